//! What the agent did: a bounded feed of the tool calls this server answered (tool, node,
//! duration, ok or error, the eval code and the result, both cut), for the people watching
//! (the dashboard). Recording is one short lock per call and never blocks on a reader.

use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::ErrorData;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

/// Calls kept; the oldest go first.
pub const MAX_CALLS: usize = 200;
/// Most bytes kept of a call's code and of its result text.
const MAX_SHOWN: usize = 600;

/// One answered tool call.
#[derive(Debug, Clone, Serialize)]
pub struct Call {
    /// Increasing from 1; pass the last one seen as `since` to read only newer calls.
    pub id: u64,
    /// RFC 3339 UTC with milliseconds.
    pub time: String,
    pub tool: String,
    /// The `name` argument, when the tool acts on a node.
    pub node: Option<String>,
    pub duration_ms: f64,
    pub ok: bool,
    /// The `code` argument (eval), cut.
    pub code: Option<String>,
    /// The result text, cut.
    pub result: String,
}

/// The feed: a ring of the last [`MAX_CALLS`] calls.
#[derive(Default)]
pub struct Activity {
    ring: Mutex<(VecDeque<Call>, u64)>,
}

/// A call being answered: what [`Activity::begin`] took from its arguments.
pub struct Pending {
    started: Instant,
    tool: String,
    node: Option<String>,
    code: Option<String>,
}

impl Activity {
    /// Notes a call as it arrives: its tool, node and code (cut; nothing else is kept).
    pub fn begin(&self, tool: &str, arguments: Option<&Map<String, Value>>) -> Pending {
        let argument = |key: &str| {
            arguments
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .map(|s| cut(s, MAX_SHOWN))
        };
        Pending {
            started: Instant::now(),
            tool: cut(tool, 64),
            node: argument("name"),
            code: argument("code"),
        }
    }

    /// Records the answer to a call (protocol errors are not tool calls and are left out).
    pub fn finish(&self, pending: Pending, response: &Result<CallToolResponse, ErrorData>) {
        let Ok(CallToolResponse::Complete(result)) = response else {
            return;
        };
        self.record(pending, result);
    }

    fn record(&self, pending: Pending, result: &CallToolResult) {
        let text = super::output::text_of(result);
        let took = pending.started.elapsed();
        let mut call = Call {
            id: 0,
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            tool: pending.tool,
            node: pending.node,
            duration_ms: (took.as_secs_f64() * 1e4).round() / 10.0,
            ok: result.is_error != Some(true),
            code: pending.code,
            result: cut(&text, MAX_SHOWN),
        };
        let mut ring = self.ring.lock().expect("activity lock");
        ring.1 += 1;
        call.id = ring.1;
        if ring.0.len() == MAX_CALLS {
            ring.0.pop_front();
        }
        ring.0.push_back(call);
    }

    /// Calls newer than `since` (oldest first), at most `limit`: the newest of them.
    pub fn since(&self, since: u64, limit: usize) -> Vec<Call> {
        let ring = self.ring.lock().expect("activity lock");
        let newer = ring.0.iter().filter(|c| c.id > since);
        let skip = newer.clone().count().saturating_sub(limit);
        newer.skip(skip).cloned().collect()
    }
}

/// `text` cut at about `max` bytes on a character boundary, marked `…[+N bytes]`.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[+{} bytes]", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    #[test]
    fn the_feed_is_bounded_and_cuts_what_it_shows() {
        let activity = Activity::default();
        let ok = CallToolResult::success(vec![ContentBlock::text("é".repeat(1000))]);
        let mut args = Map::new();
        args.insert("name".into(), "web".into());
        args.insert("code".into(), "x".repeat(5000).into());
        for _ in 0..MAX_CALLS + 5 {
            activity.record(activity.begin("eval", Some(&args)), &ok);
        }
        let calls = activity.since(0, 1000);
        assert_eq!(calls.len(), MAX_CALLS);
        assert_eq!(calls.last().unwrap().id, MAX_CALLS as u64 + 5);
        let last = calls.last().unwrap();
        assert_eq!(last.node.as_deref(), Some("web"));
        assert!(last.code.as_ref().unwrap().ends_with("…[+4400 bytes]"));
        assert!(last.result.len() < MAX_SHOWN + 32 && last.ok);
        assert_eq!(activity.since(last.id - 2, 1).len(), 1);
        let failed = CallToolResult::error(vec![ContentBlock::text("boom")]);
        activity.finish(activity.begin("stop", None), &Ok(failed.into()));
        let newest = activity.since(last.id, 10);
        assert_eq!((newest.len(), newest[0].ok), (1, false));
    }
}
