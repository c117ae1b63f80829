//! MCP prompts: the commands a client shows its user (`/diagnose_crash web`), each a short
//! plan naming which tools to call in which order. A prompt needs the node to be known to this
//! server and says what state it is in now; it calls nothing on the node itself.

use super::McpServer;
use rmcp::model::{
    GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage, Role,
};
use rmcp::ErrorData;
use serde_json::{Map, Value};

/// One prompt: its arguments (the first is always the node's `name`) and its text, where
/// `{name}` stands for the node and `{ARG}` for an optional argument's phrase.
struct Spec {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    /// Optional arguments after `name`: (argument, description, the phrase `{ARG}` becomes
    /// when it is given, with `{}` for its value; absent, `{ARG}` is left out).
    optional: &'static [(&'static str, &'static str, &'static str)],
    text: &'static str,
}

const PROMPTS: [Spec; 3] = [
    Spec {
        name: "diagnose_crash",
        title: "Diagnose a crash",
        description: "Find why a node crashed or keeps restarting, and fix it.",
        optional: &[],
        text: "Node `{name}` crashed, keeps restarting or misbehaves. Find the first cause, not \
the last symptom, with these tools, in this order:
1. `diagnose` (if listed) with name `{name}`: the one-call health report; it may name the culprit at once.
2. `status` with name `{name}`: state, restarts, last exit, last error line, failure reason, each application's health.
3. `logs` with name `{name}`, min_level `error`, tail 50: the first crash or supervisor report is the cause, later ones are mostly its consequences. Note the top stack frame in the project's own modules.
4. `supervision_tree` with name `{name}`: which supervisor restarts which child, and children that are missing.
5. For a live suspect process: `process_info` with its pid (current function, message queue, links); `waits` if a call timed out (who waits on whom, deadlocks).
6. Read the code the stacktrace names (`source` gives its file and line, `docs` its contract), fix it, then `recompile` (or `restart`) `{name}` and call `logs` again with `since` set to the header's `next` value to confirm the error is gone.
Report the root cause (quote the log line), the fix, and how you verified it.",
    },
    Spec {
        name: "find_bottleneck",
        title: "Find a bottleneck",
        description: "Find what makes a node slow: overloaded processes, blocked calls, memory.",
        optional: &[],
        text: "Node `{name}` is slow, times out or grows. Find the bottleneck with these tools, \
in this order:
1. `diagnose` (if listed) with name `{name}`: the one-call health report.
2. `system_info` with name `{name}`: run queues, memory by kind, process, port and atom counts against their limits.
3. `processes` with name `{name}`, sort_by `message_queue_len`, then `reductions`, then `memory`: the top processes by each.
4. `waits` with name `{name}`: chains of blocked calls ending at the process that holds the others up, and deadlocks.
5. `process_info` with name `{name}` and each suspect's pid: current function, stack, message queue, links.
6. `get_state` of a suspect GenServer when its state may explain it (a backlog, a huge state); `ets` for large tables.
Report the bottleneck (process, function, numbers) and a fix (less work per message, a cast or a pool instead of one busy GenServer, ETS for shared reads), then check it with the same tools.",
    },
    Spec {
        name: "fix_failing_test",
        title: "Fix a failing test",
        description: "Run a node's project tests, find why they fail, and fix the code.",
        optional: &[(
            "test",
            "A test file or file:line (default: the whole suite).",
            " and args [\"{}\"]",
        )],
        text: "Tests of the project of node `{name}` fail. Fix them with these tools:
1. `mix` with task `test`, name `{name}`{test}: the summary lists each failure with its file:line and assertion.
2. Read each failing test and the code it tests. Try the code in the running node with `eval` on `{name}`; `logs` with min_level `error` shows what the application itself logged.
3. Fix the code (not the test, unless the test is wrong), run `mix` `test` again on the failing file:line until it passes, then on the whole suite.
4. `recompile` `{name}` so the running node uses the fixed code, and check `status`.
Report what failed, why, and the fix.",
    },
];

fn unknown(name: &str) -> ErrorData {
    let known: Vec<&str> = PROMPTS.iter().map(|p| p.name).collect();
    ErrorData::invalid_params(
        format!("unknown prompt `{name}`; prompts: {}", known.join(", ")),
        None,
    )
}

fn spec(name: &str) -> Result<&'static Spec, ErrorData> {
    PROMPTS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| unknown(name))
}

/// Whether prompt `prompt` has argument `argument`; an unknown prompt is an error.
pub(crate) fn has_argument(prompt: &str, argument: &str) -> Result<bool, ErrorData> {
    let spec = spec(prompt)?;
    Ok(argument == "name" || spec.optional.iter().any(|(arg, ..)| *arg == argument))
}

/// `prompts/list`.
pub(crate) fn list() -> ListPromptsResult {
    ListPromptsResult::with_all_items(
        PROMPTS
            .iter()
            .map(|spec| {
                let mut arguments = vec![PromptArgument::new("name")
                    .with_description("The node's name (see `status`).")
                    .with_required(true)];
                arguments.extend(spec.optional.iter().map(|(arg, description, _)| {
                    PromptArgument::new(*arg)
                        .with_description(*description)
                        .with_required(false)
                }));
                Prompt::new(spec.name, Some(spec.description), Some(arguments))
                    .with_title(spec.title)
            })
            .collect(),
    )
}

impl McpServer {
    /// `prompts/get`: the plan for node `name`, opened by the node's state now.
    pub(crate) fn prompt_get(
        &self,
        prompt: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<GetPromptResult, ErrorData> {
        let spec = spec(prompt)?;
        let argument = |arg: &str| {
            arguments
                .and_then(|args| args.get(arg))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|value| !value.is_empty())
        };
        let name = argument("name").ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "prompt `{prompt}` needs the argument `name`: a node's name (see `status`)"
                ),
                None,
            )
        })?;
        let status = self
            .registry
            .node_status(name)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let mut text = spec.text.replace("{name}", name);
        for (arg, _, phrase) in spec.optional {
            let phrase = argument(arg).map(|value| phrase.replace("{}", value));
            text = text.replace(&format!("{{{arg}}}"), phrase.as_deref().unwrap_or(""));
        }
        let now = format!(
            "Now: node `{name}` is {}{}.\n\n",
            status.state,
            status
                .last_exit
                .map(|exit| format!(", last exit: {exit}"))
                .unwrap_or_default()
        );
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, now + &text)])
                .with_description(spec.description),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prompt_takes_a_name_and_mentions_only_its_own_placeholders() {
        for spec in &PROMPTS {
            assert!(has_argument(spec.name, "name").unwrap());
            let mut text = spec.text.replace("{name}", "");
            for (arg, ..) in spec.optional {
                text = text.replace(&format!("{{{arg}}}"), "");
            }
            assert!(!text.contains('{'), "{}: stray placeholder", spec.name);
        }
        assert!(has_argument("nope", "name").is_err());
        assert_eq!(list().prompts.len(), PROMPTS.len());
    }
}
