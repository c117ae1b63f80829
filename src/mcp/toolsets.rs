//! Toolsets: named groups of tools, so a user can hand an agent a smaller list
//! (`--tools core,trace`). Which tool is in which set is said where the tools are listed
//! (`tools/mod.rs`, `McpServer::routers_by_set`), so a new tool cannot be left out of one.
//!
//! `core` (status, start, stop, eval, logs…) is always offered: without it an agent cannot
//! even learn a node's name. `--read-only` then removes whatever changes something, in any set.

use std::fmt;

/// A named group of tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Toolset {
    /// Node lifecycle, code evaluation and logs.
    Core,
    /// Looking inside a running node.
    Introspect,
    /// Tracing calls and messages, system monitor.
    Trace,
    /// The edit-compile-test loop.
    Dev,
    /// Reading the node's code.
    Code,
}

impl Toolset {
    pub const ALL: [Toolset; 5] = [
        Toolset::Core,
        Toolset::Introspect,
        Toolset::Trace,
        Toolset::Dev,
        Toolset::Code,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Toolset::Core => "core",
            Toolset::Introspect => "introspect",
            Toolset::Trace => "trace",
            Toolset::Dev => "dev",
            Toolset::Code => "code",
        }
    }

    /// What its tools are for, as the server's instructions say it before their names.
    pub fn purpose(self) -> &'static str {
        match self {
            Toolset::Core => "Run nodes (a Mix project by path, or attach to one running), evaluate code, read logs",
            Toolset::Introspect => "Look inside a running node (what is wrong first)",
            Toolset::Trace => "Trace calls and messages, watch the system monitor",
            Toolset::Dev => "The edit-compile-test loop",
            Toolset::Code => "Read the node's code (docs, file:line, callers, names)",
        }
    }

    /// A set by name, or an error listing the valid names.
    pub fn parse(name: &str) -> Result<Toolset, String> {
        let name = name.trim();
        Self::ALL
            .into_iter()
            .find(|set| set.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown toolset `{name}`; valid: {} (e.g. --tools introspect,trace)",
                    Self::ALL.map(Toolset::name).join(", ")
                )
            })
    }
}

impl fmt::Display for Toolset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_ones_list_the_valid() {
        assert_eq!(Toolset::parse(" trace"), Ok(Toolset::Trace));
        let error = Toolset::parse("tracing").unwrap_err();
        assert!(
            error.contains("unknown toolset `tracing`; valid: core, introspect, trace, dev, code"),
            "{error}"
        );
    }
}
