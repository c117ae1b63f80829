#!/usr/bin/env python3
"""Latency of `eval` and `diagnose` through MCP over TCP, for one os_sup_mcp binary.

Starts the binary on a free port, starts the demo fixture through it, times SAMPLES sequential
`eval "1 + 1"` calls and DIAGNOSE_SAMPLES `diagnose` calls (window 100 ms), prints one JSON
line of milliseconds, and stops everything. Run by scripts/bench_compare.sh, once per binary.
usage: bench_compare.py BINARY FIXTURE_DIR
"""
import json
import socket
import subprocess
import sys
import time

SAMPLES = 300
DIAGNOSE_SAMPLES = 40


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    def __init__(self, port):
        deadline = time.time() + 30
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        self.file = self.sock.makefile("rw")
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.file.write(json.dumps(message) + "\n")
        self.file.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            reply = json.loads(self.file.readline())
            if reply.get("id") == self.next_id:
                return reply

    def call(self, tool, arguments):
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        result = reply.get("result", {})
        if "error" in reply or result.get("isError"):
            raise RuntimeError(f"{tool} failed: {reply}")
        return result


def timed(client, tool, arguments, samples):
    for _ in range(max(1, samples // 10)):
        client.call(tool, arguments)
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        client.call(tool, arguments)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"p50": round(times[len(times) // 2], 2),
            "p99": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2)}


def main():
    binary, fixture = sys.argv[1], sys.argv[2]
    port = free_port()
    server = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = Client(port)
        client.call("start", {"name": "bench", "path": fixture})
        result = {"eval": timed(client, "eval", {"name": "bench", "code": "1 + 1"}, SAMPLES),
                  "diagnose": timed(client, "diagnose", {"name": "bench", "window_ms": 100},
                                    DIAGNOSE_SAMPLES)}
        client.call("stop", {"name": "bench"})
        print(json.dumps(result))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
