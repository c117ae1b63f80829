//! Asking every member of a cluster at once. A call of a tool that looks (its
//! `read_only_hint`) or only stops (`stop`), or of `eval` with `all: true`, whose `name` is
//! a cluster runs once per member, all at once, under one deadline; the answers are merged
//! into one that names every member's status (ok, not running, not connected, the error it
//! gave, or no answer by the deadline) and stays within one node's size limits. Log lines are merged by time, lists of applications or settings shown by what
//! differs across members; other answers come member by member. `diagnose` is merged from
//! the members' typed diagnoses instead (`cluster_diagnose`).

use super::output::{failure, text_of};
use super::McpServer;
use crate::node::NodeState;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Value};
use std::time::Duration;

/// The argument by which a call of a tool that changes things (`eval`) asks every member
/// of the cluster it names; without it, such a tool refuses a cluster's name.
pub const EVERY_MEMBER: &str = "all";

/// Which calls of a tool given a cluster's name ask every member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FanOut {
    /// Every call (the tool only looks, or only stops).
    Always,
    /// Calls with [`EVERY_MEMBER`] true.
    OptIn,
}

/// How long the members have, beyond the window a tool samples over.
const DEADLINE: Duration = Duration::from_secs(15);
/// How long a member of an attached cluster may take to be attached.
const ATTACH_LIMIT: Duration = Duration::from_secs(5);
/// The merged answer's text, at most (one node's answers are held to the same).
const TEXT_BYTES: usize = 16 * 1024;
/// Each member's data in the merged answer, at most.
const DATA_BYTES: usize = 64 * 1024;

/// One member's part of a merged answer.
struct Answer {
    member: String,
    status: Status,
    text: String,
    data: Value,
}

/// What became of one member's call, written out (`ok`, `error: …`, `not running (STATE): …`,
/// `not connected: …`, `timeout: …`, `gone: …`) only where an answer is written.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Status {
    Ok,
    /// The tool answered with an error, or the call failed: why.
    Error(String),
    /// The member is not running (its state): why the call failed.
    NotRunning(NodeState, String),
    NotConnected(String),
    /// No answer within these seconds.
    Timeout(u64),
    /// The member is no longer known: why the call failed.
    Gone(String),
}

impl Status {
    /// The status of a call that failed with `why` on a member in `state` (`None`: gone).
    pub(super) fn failed(state: Option<NodeState>, why: String) -> Self {
        match state {
            Some(NodeState::Running | NodeState::Attached) => Status::Error(why),
            Some(state) => Status::NotRunning(state, why),
            None => Status::Gone(why),
        }
    }

    pub(super) fn is_ok(&self) -> bool {
        matches!(self, Status::Ok)
    }

    /// Its place in [`COUNTED`]: how the members with this status are counted.
    fn counted_at(&self) -> usize {
        match self {
            Status::Ok => 0,
            Status::Error(_) => 1,
            Status::NotRunning(..) => 2,
            Status::NotConnected(_) => 3,
            Status::Timeout(_) => 4,
            Status::Gone(_) => 5,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Ok => write!(f, "ok"),
            Status::Error(why) => write!(f, "error: {why}"),
            Status::NotRunning(state, why) => write!(f, "not running ({state}): {why}"),
            Status::NotConnected(why) => write!(f, "not connected: {why}"),
            Status::Timeout(secs) => {
                write!(f, "timeout: no answer in {secs} s (frozen or overloaded?)")
            }
            Status::Gone(why) => write!(f, "gone: {why}"),
        }
    }
}

impl McpServer {
    /// Runs `request` on every member of cluster `cluster` and merges the answers.
    pub(super) async fn fan_out(
        &self,
        cluster: &str,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let args = request.arguments.clone().unwrap_or_default();
        if request.name == "diagnose" {
            // Typed end to end: the members' diagnoses, not their text.
            let window = args
                .get("window_ms")
                .and_then(Value::as_u64)
                .unwrap_or(crate::bounds::DIAGNOSE_WINDOW_DEFAULT_MS);
            let format = args
                .get("format")
                .cloned()
                .and_then(|f| serde_json::from_value(f).ok())
                .unwrap_or_default();
            let focus = args.get("focus").and_then(Value::as_str);
            return self
                .diagnose_cluster(cluster, Duration::from_millis(window), format, focus)
                .await;
        }
        // A tool's own time: the window it samples over, or how long its code may run.
        let window = ["window_ms", "timeout_ms"]
            .iter()
            .filter_map(|key| args.get(*key)?.as_u64())
            .max()
            .map_or(Duration::ZERO, |ms| Duration::from_millis(ms.min(60_000)));
        let deadline = DEADLINE + window;
        // Members of a cluster found by `attach` are attached when first asked.
        let unattached = self.registry.attach_pending(cluster, ATTACH_LIMIT).await;
        let members: Vec<String> = self
            .registry
            .members(cluster)
            .unwrap_or_default()
            .into_iter()
            .filter(|m| !unattached.iter().any(|(u, _)| u == m))
            .collect();
        let calls = members.iter().map(|member| {
            let mut request = request.clone();
            let mut args = args.clone();
            args.insert("name".into(), Value::String(member.clone()));
            args.remove(EVERY_MEMBER);
            request.arguments = Some(args);
            let call = ToolCallContext::new(self, request, context.clone());
            async move {
                let (status, text, data) = match tokio::time::timeout(
                    deadline,
                    self.tool_router.call(call),
                )
                .await
                {
                    Err(_) => (
                        Status::Timeout(deadline.as_secs()),
                        String::new(),
                        Value::Null,
                    ),
                    Ok(Err(e)) => (
                        Status::Error(e.message.to_string()),
                        String::new(),
                        Value::Null,
                    ),
                    Ok(Ok(CallToolResponse::Complete(result))) => {
                        let text = text_of(&result);
                        let data = result.structured_content.unwrap_or(Value::Null);
                        if result.is_error == Some(true) {
                            let first = text.lines().next().unwrap_or("failed");
                            (self.failed_status(member, first.to_string()), text, data)
                        } else {
                            (Status::Ok, text, data)
                        }
                    }
                    Ok(Ok(_)) => (
                        Status::Error(
                            "the tool asked for a task or input, which a cluster call cannot give"
                                .into(),
                        ),
                        String::new(),
                        Value::Null,
                    ),
                };
                Answer {
                    member: member.clone(),
                    status,
                    text,
                    data,
                }
            }
        });
        let mut answers = futures::future::join_all(calls).await;
        answers.extend(unattached.into_iter().map(|(member, why)| Answer {
            member,
            status: Status::NotConnected(why),
            text: String::new(),
            data: Value::Null,
        }));
        // What the members answered is shown as they wrote it: node names are values (an
        // agent passes them on), so members' names go only in headers and a legend.
        let nodes: Vec<(String, String)> = answers
            .iter()
            .filter_map(|a| {
                let node = self.registry.node_status(&a.member).ok()?.node;
                (!node.is_empty()).then(|| (a.member.clone(), node))
            })
            .collect();
        let named = names_a_node(&answers, &nodes);
        let mut merged = merge(cluster, &request.name, &args, answers);
        if named {
            legend(&mut merged, &nodes);
        }
        merged
    }

    /// The status of a member whose call failed with `why`: not running (its state) when
    /// that is the reason, else an error.
    pub(super) fn failed_status(&self, member: &str, why: String) -> Status {
        let state = self.registry.node_status(member).map(|s| s.state).ok();
        Status::failed(state, why)
    }

    /// The answer to a call on cluster `cluster` that does not go to every member.
    pub(super) fn refuse_cluster(
        cluster: &str,
        tool: &str,
        members: &[String],
        opt_in: bool,
    ) -> CallToolResult {
        let or_all = if opt_in {
            format!(" (or say `{EVERY_MEMBER}: true` to run it on every member)")
        } else {
            String::new()
        };
        failure(format!(
            "`{cluster}` is a cluster ({}): `{tool}` acts on one member, so name one{or_all}; \
             tools that only look (logs, diagnose, processes…) and `stop` ask every member \
             when given the cluster's name, `status` shows who sees whom",
            members.join(", ")
        ))
    }
}

fn merge(
    cluster: &str,
    tool: &str,
    args: &serde_json::Map<String, Value>,
    answers: Vec<Answer>,
) -> CallToolResult {
    let ok = answers.iter().filter(|a| a.status.is_ok()).count();
    // Only the members that did not answer are named (every one of them).
    let failed: Vec<String> = answers
        .iter()
        .filter(|a| !a.status.is_ok())
        .map(|a| format!("{} {}", a.member, a.status))
        .collect();
    let mut text = format!(
        "{tool} on cluster {cluster}, {} members: {} ({})\n",
        answers.len(),
        status_counts(&answers),
        if failed.is_empty() {
            "all ok".to_string()
        } else {
            failed.join("; ")
        }
    );
    let body = merged_logs(&answers, args)
        .or_else(|| differences(&answers, "applications", "name", "vsn", "applications"))
        .or_else(|| differences(&answers, "env", "key", "value", "settings"))
        .unwrap_or_else(|| by_member(&answers));
    text += &body;
    cut_merged(
        &mut text,
        TEXT_BYTES,
        "ask one member by its name for all of its answer",
    );
    let members: Vec<Value> = answers
        .iter()
        .map(|a| {
            let size = a.data.to_string().len();
            let mut entry = json!({"member": a.member, "status": a.status.to_string()});
            if size <= DATA_BYTES / answers.len().max(1) {
                entry["data"] = a.data.clone();
            } else if !a.data.is_null() {
                entry["data_cut"] = json!(size);
            }
            entry
        })
        .collect();
    let data = json!({"cluster": cluster, "tool": tool, "answered": ok, "members": members});
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(data);
    // Partial answers are answers; only a cluster that said nothing is an error.
    if ok == 0 {
        result.is_error = Some(true);
    }
    result
}

/// A cluster's merged `text` held to `max` bytes (on a character boundary), the cut said with
/// what to do for the rest.
pub(super) fn cut_merged(text: &mut String, max: usize, rest: &str) {
    if text.len() <= max {
        return;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    *text += &format!("\n… (cut: {rest})");
}

/// Whether the members' answers name any member's node: a value of a member's data that is
/// one, or a member's error (an error answer is its message only, with no data: a node it
/// names, as `… it lives on c_1_ab@host`, is known only there).
fn names_a_node(answers: &[Answer], nodes: &[(String, String)]) -> bool {
    fn holds(data: &Value, node: &str) -> bool {
        match data {
            Value::String(s) => s == node,
            Value::Array(items) => items.iter().any(|v| holds(v, node)),
            Value::Object(map) => map.values().any(|v| holds(v, node)),
            _ => false,
        }
    }
    nodes.iter().any(|(_, node)| {
        answers.iter().any(|a| {
            holds(&a.data, node)
                || matches!(a.status, Status::Error(_)) && a.text.contains(node.as_str())
        })
    })
}

/// `(nodes: c-1 is c_1_ab@host, …)` on the header of a merged text whose answers name a
/// member's node, so the node names in them (left as the nodes wrote them) read as members.
fn legend(result: &mut CallToolResult, nodes: &[(String, String)]) {
    let Some(block) = result.content.first_mut() else {
        return;
    };
    let Some(text) = block.as_text().map(|t| t.text.clone()) else {
        return;
    };
    let names: Vec<String> = nodes
        .iter()
        .map(|(member, node)| format!("{member} is {node}"))
        .collect();
    // At the end of the header line: the answers below stay line for line as they were.
    let (header, rest) = text.split_once('\n').unwrap_or((text.as_str(), ""));
    *block = ContentBlock::text(format!("{header} (nodes: {})\n{rest}", names.join(", ")));
}

/// `2 ok, 1 errored`: the members counted by what became of the call (an error is an
/// answer too: `0 answered` would say the opposite of three members that each gave one).
fn status_counts(answers: &[Answer]) -> String {
    let mut counts = [0; COUNTED.len()];
    for a in answers {
        counts[a.status.counted_at()] += 1;
    }
    COUNTED
        .iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|(said, n)| format!("{n} {said}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The members of each [`Status`] counted as (in [`Status::counted_at`]'s order).
const COUNTED: [&str; 6] = [
    "ok",
    "errored",
    "not running",
    "not connected",
    "timed out",
    "gone",
];

/// Every member's answer under its name, each within an equal share of the size limit.
fn by_member(answers: &[Answer]) -> String {
    let share = TEXT_BYTES / answers.len().max(1);
    let mut out = String::new();
    for a in answers.iter().filter(|a| !a.text.is_empty()) {
        out += &format!("── {}\n", a.member);
        let mut used = 0;
        let lines: Vec<&str> = a.text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if used + line.len() > share {
                out += &format!("  … {} more lines\n", lines.len() - i);
                break;
            }
            used += line.len() + 1;
            out += line;
            out.push('\n');
        }
    }
    out
}

/// Log answers (`lines` with `time`) merged by time, the newest `tail` kept, each line
/// with its member.
fn merged_logs(answers: &[Answer], args: &serde_json::Map<String, Value>) -> Option<String> {
    let answered: Vec<&Answer> = answers.iter().filter(|a| a.status.is_ok()).collect();
    if answered.is_empty()
        || !answered.iter().all(|a| {
            a.data["lines"]
                .as_array()
                .is_some_and(|l| l.iter().all(|l| l["time"].is_string()))
        })
    {
        return None;
    }
    let mut lines: Vec<(&str, &str, &Value)> = answered
        .iter()
        .flat_map(|a| {
            a.data["lines"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |l| (l["time"].as_str().unwrap_or(""), a.member.as_str(), l))
        })
        .collect();
    lines.sort_by(|a, b| a.0.cmp(b.0));
    let tail = args.get("tail").and_then(Value::as_u64).unwrap_or(100) as usize;
    let skip = lines.len().saturating_sub(tail);
    let mut out = String::new();
    for (time, member, line) in &lines[skip..] {
        let clock = time.get(11..23).unwrap_or(time);
        let level = line["level"]
            .as_str()
            .map(|l| format!(" [{l}]"))
            .unwrap_or_default();
        out += &format!(
            "{clock} {member}{level} {}\n",
            line["text"].as_str().unwrap_or("")
        );
    }
    if out.is_empty() {
        out = "no lines\n".into();
    }
    Some(out)
}

/// Answers that list items (`list`: objects with `id` and `value`, as `applications` lists
/// applications with their versions, or an application's settings): how many are alike on
/// every member that answered, then each item that differs, member by member.
fn differences(
    answers: &[Answer],
    list: &str,
    id: &str,
    value: &str,
    what: &str,
) -> Option<String> {
    let answered: Vec<&Answer> = answers.iter().filter(|a| a.status.is_ok()).collect();
    if answered.is_empty() || !answered.iter().all(|a| a.data[list].is_array()) {
        return None;
    }
    let mut items: std::collections::BTreeMap<String, Vec<(&str, String)>> = Default::default();
    for a in &answered {
        for item in a.data[list].as_array().into_iter().flatten() {
            let key = item[id]
                .as_str()
                .map_or_else(|| item[id].to_string(), String::from);
            let shown = item[value]
                .as_str()
                .map_or_else(|| item[value].to_string(), String::from);
            items
                .entry(key)
                .or_default()
                .push((a.member.as_str(), shown));
        }
    }
    let mut alike = 0;
    let mut lines = Vec::new();
    for (key, seen) in &items {
        let first = &seen[0].1;
        if seen.len() == answered.len() && seen.iter().all(|(_, v)| v == first) {
            alike += 1;
            continue;
        }
        let mut parts: Vec<String> = seen.iter().map(|(m, v)| format!("{m} {v}")).collect();
        let missing: Vec<&str> = answered
            .iter()
            .map(|a| a.member.as_str())
            .filter(|m| !seen.iter().any(|(s, _)| s == m))
            .collect();
        if !missing.is_empty() {
            parts.push(format!("absent on {}", missing.join(", ")));
        }
        lines.push(format!("  {key}: {}", parts.join("; ")));
    }
    let mut out = format!("{alike} {what} alike on every member");
    if lines.is_empty() {
        out += "; none differs\n";
    } else {
        out += &format!("; {} differ:\n{}\n", lines.len(), lines.join("\n"));
    }
    Some(out)
}
