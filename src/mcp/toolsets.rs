//! Toolsets: named groups of tools, so a user can hand an agent a smaller list
//! (`--tools core,trace`). The one place that says which tool is in which set; a tool missing
//! here fails a test (`every_tool_is_in_a_set`), so a new tool cannot be forgotten.
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

    /// The set a tool belongs to (`None`: a tool nobody placed yet, a bug).
    pub fn of(tool: &str) -> Option<Toolset> {
        Some(match tool {
            "status" | "start" | "stop" | "restart" | "remove" | "wait_ready" | "eval" | "logs"
            | "attach" | "detach" => Toolset::Core,
            "supervision_tree" | "processes" | "process_info" | "get_state" | "applications"
            | "system_info" | "ets" | "waits" | "diagnose" => Toolset::Introspect,
            "trace" | "trace_messages" | "trace_results" | "trace_stop" | "traces"
            | "system_monitor" => Toolset::Trace,
            "mix" | "recompile" => Toolset::Dev,
            "module_info" | "docs" | "source" | "callers" | "find" => Toolset::Code,
            _ => return None,
        })
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
