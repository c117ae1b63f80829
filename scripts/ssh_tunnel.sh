#!/usr/bin/env bash
# Tries the README's SSH-tunnel recipe for a node on another host, on this machine: the "other
# host" is a network namespace of its own (its own loopback, its own EPMD), reached only through
# ssh (sshd runs in the namespace, spoken to over ssh's ProxyCommand). The node there fixes its
# distribution port; ssh forwards its EPMD to a local port of its own and its distribution port
# to the same local port; the server attaches with `host: "127.0.0.1:EPMD_PORT"`.
# Needs root (network namespaces) and openssh-server (installed when missing).
# usage: scripts/ssh_tunnel.sh      (from the project's root; prints what the server answered)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "needs root (ip netns)"; exit 2; }
command -v erl >/dev/null || scripts/setup.sh
[ -x /usr/sbin/sshd ] || { apt-get update -qq && apt-get install -y -qq openssh-server >/dev/null; }
cargo build -q

ns=os_sup_far$$
dir=$(mktemp -d)
epmd_port=14369
dist_port=9200
listen=127.0.0.1:9322
cookie=tunnel$$
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null
  pkill -f "ssh-tunnel-$ns" 2>/dev/null || true
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -9
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

ssh-keygen -q -t ed25519 -N '' -f "$dir/key"
ssh-keygen -q -t ed25519 -N '' -f "$dir/hostkey"
cat > "$dir/sshd_config" <<EOF
HostKey $dir/hostkey
AuthorizedKeysFile $dir/key.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
StrictModes no
AllowTcpForwarding yes
PidFile none
UsePAM no
EOF
mkdir -p /run/sshd

# The other host: a node with a fixed distribution port, its own EPMD.
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" erl -sname far -setcookie "$cookie" -noshell -detached \
  -kernel inet_dist_listen_min $dist_port inet_dist_listen_max $dist_port
for _ in $(seq 50); do
  ip netns exec "$ns" epmd -names 2>/dev/null | grep -q "name far" && break
  sleep 0.2
done
echo "in the namespace: $(ip netns exec "$ns" epmd -names | tr '\n' ' ')"

# The tunnel: EPMD to a local port of its own (this host's EPMD keeps 4369), the distribution
# port to the same port here.
ssh -f -N -i "$dir/key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
  -o LogLevel=ERROR -o ExitOnForwardFailure=yes \
  -o ProxyCommand="ip netns exec $ns /usr/sbin/sshd -i -f $dir/sshd_config" \
  -L 127.0.0.1:$epmd_port:127.0.0.1:4369 -L 127.0.0.1:$dist_port:127.0.0.1:$dist_port \
  "root@ssh-tunnel-$ns"

target/debug/os_sup_mcp --listen "$listen" 2>"$dir/server.log" &
server=$!
sleep 1
client() { target/debug/os_sup_mcp --connect "$listen" "$@"; }
node="far@$(hostname -s)"
echo "attach $node through the tunnel:"
client call attach "{\"name\":\"far\",\"node\":\"$node\",\"cookie\":\"$cookie\",\"host\":\"127.0.0.1:$epmd_port\"}"
echo "eval on it:"
client eval far 'node().' --lang erlang
echo "its top processes:"
client call processes '{"name":"far","limit":3}'
