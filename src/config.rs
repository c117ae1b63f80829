//! The configuration file (`--config FILE`, TOML): nodes to start when the server starts, each
//! with the same options as the `start` tool ([`StartSpec`], owned by `node`), and `resume`
//! (as `--resume`: start again the nodes of the state dir that were up when the server before
//! ended). Relative paths are relative to the file. This file knows nothing of the MCP layer.
//!
//! ```toml
//! resume = true
//!
//! [[node]]
//! name = "web"
//! path = "."
//! mix_env = "dev"
//! ready = { url = "http://127.0.0.1:4000/" }
//! max_restarts = 5
//! ```

use crate::node::{NodeConfig, StartSpec};
use anyhow::Context;
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    resume: bool,
    #[serde(default)]
    node: Vec<StartSpec>,
}

/// What a configuration file asks for.
#[derive(Debug, Default)]
pub struct Config {
    pub nodes: Vec<NodeConfig>,
    pub resume: bool,
}

/// Reads a configuration file, validating each node.
pub fn load(path: &Path) -> anyhow::Result<Config> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file: File = toml::from_str(&text)
        .with_context(|| format!("{} is not a valid config file", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut nodes = Vec::new();
    for mut input in file.node {
        if let Some(node_path) = input.path.as_mut() {
            if Path::new(node_path.as_str()).is_relative() {
                *node_path = base.join(&*node_path).display().to_string();
            }
        }
        let name = input.name.clone();
        if input.nodes.is_some() {
            anyhow::bail!(
                "node `{name}` in {}: `nodes` (a cluster) is not read from a config file; \
                 start the cluster with the `start` tool",
                path.display()
            );
        }
        let config = input
            .into_config()
            .map_err(|e| anyhow::anyhow!("node `{name}` in {}: {e}", path.display()))?;
        config
            .validate()
            .with_context(|| format!("node `{name}` in {}", path.display()))?;
        nodes.push(config);
    }
    Ok(Config {
        nodes,
        resume: file.resume,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nodes_with_start_options_and_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("app")).unwrap();
        std::fs::write(dir.path().join("app/mix.exs"), "").unwrap();
        let file = dir.path().join("os_sup.toml");
        std::fs::write(
            &file,
            r#"
[[node]]
name = "web"
path = "app"
ready = { port = 4000 }
max_restarts = 5

[[node]]
name = "plain"
command = ["erl", "-noshell"]
"#,
        )
        .unwrap();
        let config = load(&file).unwrap();
        assert!(!config.resume);
        let nodes = config.nodes;
        assert_eq!(nodes.len(), 2);
        assert_eq!(
            nodes[0].path.as_deref(),
            Some(dir.path().join("app").as_path())
        );
        assert_eq!(nodes[0].restart.max_restarts, 5);
        assert!(matches!(
            nodes[0].readiness,
            crate::node::Readiness::Port(4000)
        ));
        std::fs::write(&file, "[[node]]\nname = \"x\"\npath = \"missing\"\n").unwrap();
        assert!(format!("{:#}", load(&file).unwrap_err()).contains("not usable"));
        std::fs::write(&file, "resume = true\n").unwrap();
        assert!(load(&file).unwrap().resume);
        std::fs::write(&file, "[[nodes]]\n").unwrap();
        assert!(load(&file).is_err(), "unknown keys are refused");
    }
}
