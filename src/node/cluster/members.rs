//! The members of a cluster this server starts: `start` with `nodes: N` makes members
//! `NAME-1 … NAME-N` of one project, sharing a cookie, each told its index
//! (`OS_SUP_NODE_INDEX`, and `{index}` or `{4000+index}` in the values of `env` and in a ready
//! URL, so that `PORT` differs without a change to the project) and, unless the project
//! connects its members itself, its peers (`OS_SUP_CLUSTER`, which the helper's
//! `os_sup_cluster` connects to at boot).

use crate::node::child_config::NodeConfig;
use crate::node::Readiness;

/// The member names of cluster `name` with `count` members.
pub fn member_names(name: &str, count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("{name}-{i}")).collect()
}

/// Each member's configuration: `base` renamed, with the shared `cookie`, its index and
/// (when `connect`) its peers' node names in its environment.
pub fn member_configs(
    base: &NodeConfig,
    members: &[(String, String)],
    cookie: &str,
    connect: bool,
) -> Vec<NodeConfig> {
    let peers: Vec<&str> = members.iter().map(|(_, node)| node.as_str()).collect();
    members
        .iter()
        .enumerate()
        .map(|(i, (member, _))| {
            let mut config = base.clone();
            config.name = member.clone();
            config.cookie = Some(cookie.to_string());
            for value in config.env.values_mut() {
                *value = with_index(value, i + 1);
            }
            if let Readiness::Http(url) = &config.readiness {
                config.readiness = Readiness::Http(with_index(url, i + 1));
            }
            config
                .env
                .insert("OS_SUP_NODE_INDEX".into(), (i + 1).to_string());
            if connect {
                config.env.insert("OS_SUP_CLUSTER".into(), peers.join(","));
            }
            config
        })
        .collect()
}

/// Why `readiness` cannot tell when each member of a cluster is ready, if it cannot: a port
/// or a URL without `{index}` is the same for every member, so the first member up would
/// make all of them look ready.
pub fn check_readiness(readiness: &Readiness) -> Result<(), String> {
    let same_for_all = match readiness {
        Readiness::Port(port) => Some(format!("port {port}")),
        Readiness::Http(url) if !url.contains("index}") => Some(format!("`{url}`")),
        _ => None,
    };
    match same_for_all {
        Some(what) => Err(format!(
            "`ready` would wait on {what} for every member, which the first member up answers \
             for all: give each its own with `{{index}}` or `{{4000+index}}` in a URL (`ready: \
             {{\"url\": \"http://127.0.0.1:{{4000+index}}/\"}}`, with `env: {{\"PORT\": \
             \"{{4000+index}}\"}}`), or use `app` or a `log` line"
        )),
        None => Ok(()),
    }
}

/// `value` with `{index}` replaced by `index` and `{N+index}` by N + `index`
/// (`"PORT": "{4000+index}"` gives member 2 port 4002); anything else is left as it is.
fn with_index(value: &str, index: usize) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(open) = rest.find('{') {
        out += &rest[..open];
        let after = &rest[open..];
        let Some(close) = after.find('}') else {
            out += after;
            rest = "";
            break;
        };
        let inner = after[1..close].trim();
        let base = match inner.strip_suffix("index") {
            Some("") => Some(0),
            Some(base) => base
                .trim_end()
                .strip_suffix('+')
                .and_then(|n| n.trim().parse::<usize>().ok()),
            None => None,
        };
        match base.and_then(|base| base.checked_add(index)) {
            Some(n) => out += &n.to_string(),
            None => out += &after[..=close],
        }
        rest = &after[close + 1..];
    }
    out + rest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_name_the_member_index() {
        assert_eq!(with_index("{4000+index}", 2), "4002");
        assert_eq!(with_index("node{index}.log", 3), "node3.log");
        assert_eq!(with_index("{ 100 + index}", 1), "101");
        assert_eq!(with_index("{other} {index", 1), "{other} {index");
        assert_eq!(with_index("a{}b{x+index}c", 1), "a{}b{x+index}c");
        assert_eq!(with_index("plain", 1), "plain");
        let huge = format!("{{{}+index}}", usize::MAX);
        assert_eq!(with_index(&huge, 1), huge);
    }

    #[test]
    fn members_are_numbered_from_one() {
        assert_eq!(member_names("web", 3), ["web-1", "web-2", "web-3"]);
        assert!(member_names("web", 0).is_empty());
    }

    fn base() -> NodeConfig {
        let mut base = NodeConfig::mix("web", "/app");
        base.env.insert("PORT".into(), "{4000+index}".into());
        base.env.insert("MODE".into(), "prod".into());
        base.readiness = Readiness::Http("http://127.0.0.1:{4000+index}/health".into());
        base
    }

    fn members() -> Vec<(String, String)> {
        vec![
            ("web-1".into(), "web-1_x@127.0.0.1".into()),
            ("web-2".into(), "web-2_x@127.0.0.1".into()),
        ]
    }

    #[test]
    fn each_member_gets_its_name_index_cookie_and_peers() {
        let configs = member_configs(&base(), &members(), "shared", true);
        assert_eq!(configs.len(), 2);
        for (i, config) in configs.iter().enumerate() {
            let index = i + 1;
            assert_eq!(config.name, format!("web-{index}"));
            assert_eq!(config.cookie.as_deref(), Some("shared"));
            assert_eq!(config.path, base().path);
            assert_eq!(config.env["OS_SUP_NODE_INDEX"], index.to_string());
            assert_eq!(config.env["PORT"], format!("{}", 4000 + index));
            assert_eq!(config.env["MODE"], "prod");
            assert_eq!(
                config.env["OS_SUP_CLUSTER"],
                "web-1_x@127.0.0.1,web-2_x@127.0.0.1"
            );
            assert!(
                matches!(&config.readiness, Readiness::Http(url)
                    if *url == format!("http://127.0.0.1:{}/health", 4000 + index)),
                "{:?}",
                config.readiness
            );
        }
    }

    #[test]
    fn a_project_that_connects_itself_is_not_told_its_peers() {
        let configs = member_configs(&base(), &members(), "shared", false);
        assert!(configs
            .iter()
            .all(|c| !c.env.contains_key("OS_SUP_CLUSTER") && c.env.contains_key("PORT")));
    }

    #[test]
    fn a_readiness_the_same_for_every_member_is_refused() {
        let err = check_readiness(&Readiness::Port(4000)).unwrap_err();
        assert!(err.contains("wait on port 4000 for every member"), "{err}");
        let err = check_readiness(&Readiness::Http("http://127.0.0.1:4000/".into())).unwrap_err();
        assert!(err.contains("`http://127.0.0.1:4000/`"), "{err}");
        let own = Readiness::Http("http://127.0.0.1:{4000+index}/".into());
        assert_eq!(check_readiness(&own), Ok(()));
        assert_eq!(check_readiness(&Readiness::default()), Ok(()));
    }
}
