//! One finding of `diagnose`, the record from the node to the reader: as the node sends it
//! (decoded once from its term) or as this server makes it from the history: its kind, its
//! evidence and numbers, the holding process, where its code is, the next call and what is
//! told as part of it. How urgent a kind is is said here, once ([`Kind::urgency`]); the text
//! is written from it at the edge (`mcp::finding_text`).

use super::history::Trend;
use crate::term::Pid;
use serde::{Deserialize, Serialize};

/// What a finding is about: the node's kinds, and those only this server sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The symptom the user named (`diagnose`'s `focus`): its calls' times and where the
    /// time of the process serving it went.
    Focus,
    /// A project application whose start has not returned: where it waits.
    NotStarted,
    Deadlock,
    Leak,
    Restarts,
    Lost,
    Ets,
    /// A table whose rows only grow, however slowly, over the history its keeper holds.
    Rows,
    Mailbox,
    Contention,
    /// The VM pauses a process again and again (long collections of a large heap, schedules
    /// that do not yield), or a busy port suspends its senders.
    Stall,
    /// A process holds work it has not taken out of its mailbox: a `gen_statem`'s postponed
    /// events.
    Queue,
    Cpu,
    RunQueue,
    Errors,
    /// Code that runs is not its `.beam`'s (loaded from memory, compiled and not loaded).
    Code,
    /// The node logs more than it can keep up with, or than anyone reads.
    LogFlood,
    /// This server restarted the node inside the history read.
    NodeRestart,
    /// The node is down for good (its restarts ran out, or it crashed with none to come).
    NodeDown,
    /// A meter of the history grows or nears its limit.
    Growth,
    /// A process's work keeps rising while the node's input is flat.
    Work,
    /// Members of a cluster differ: who does not see whom, what a member lacks that its peers
    /// hold, code that differs (a cluster's diagnosis only).
    Cluster,
}

impl Kind {
    /// Seconds until a finding of this kind does harm, which is its rank among the others
    /// (a growth is timed by its limit instead): a deadlock harms now; a leak, a long mailbox,
    /// a crowd or a run queue soon; a crash lost, restarts and a growing table hurt with no
    /// limit in sight; CPU and errors last.
    pub fn urgency(self) -> f64 {
        match self {
            // What the user asked about comes first, whatever else is found.
            Kind::Focus => -1.0,
            Kind::Deadlock | Kind::NotStarted | Kind::NodeDown => 0.0,
            Kind::Lost | Kind::NodeRestart | Kind::Cluster => 1e7,
            Kind::Leak
            | Kind::Mailbox
            | Kind::Queue
            | Kind::Contention
            | Kind::Stall
            | Kind::RunQueue => 1e8,
            // Code that is not the .beam's: the cause of what it does, before the restarts
            // and errors it may make.
            Kind::Code => 4e8,
            Kind::Restarts | Kind::Ets | Kind::Rows => 5e8,
            // Growth with no limit in sight ranks after what has one; a log flood with it.
            Kind::Growth | Kind::LogFlood => 1e9,
            // Work that rises takes the schedulers in the end, with no limit to time it by.
            Kind::Work => 1.5e9,
            Kind::Cpu | Kind::Errors => 2e9,
        }
    }
}

/// Where a finding's code is: the module and function (as the node writes them in the
/// syntax asked for), and the file and line when known.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Site {
    pub module: String,
    pub function: Option<String>,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u32>,
}

/// An argument of a next call: text, a number, a flag or a process.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Arg {
    Pid(Pid),
    Int(i64),
    Float(f64),
    Flag(bool),
    Text(String),
}

/// The call to make next: a tool and its arguments (the node's name is added when written).
#[derive(Debug, Clone, PartialEq)]
pub struct Next {
    pub tool: String,
    pub args: Vec<(String, Arg)>,
}

impl Next {
    pub fn new(tool: &str, args: Vec<(&str, Arg)>) -> Self {
        Next {
            tool: tool.into(),
            args: args.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }

    /// `process_info {"name":"web","pid":"#PID<0.1.0>"}`, the node's `name` first (a pid
    /// in the syntax of `elixir`).
    pub fn call_text(&self, name: &str, elixir: bool) -> String {
        let pairs: Vec<String> = self
            .arguments(name, elixir)
            .map(|(key, value)| format!("{}:{value}", serde_json::Value::from(key)))
            .collect();
        format!("{} {{{}}}", self.tool, pairs.join(","))
    }

    /// `{"tool": "process_info", "arguments": {"name": "web", "pid": "<0.1.0>"}}`: the call
    /// as data, its arguments as `call_text` writes them.
    pub fn call_json(&self, name: &str, elixir: bool) -> serde_json::Value {
        let arguments: serde_json::Map<String, serde_json::Value> = self
            .arguments(name, elixir)
            .map(|(key, value)| (key.to_string(), value))
            .collect();
        serde_json::json!({"tool": self.tool, "arguments": arguments})
    }

    /// The call's arguments in order, the node's `name` first.
    fn arguments<'a>(
        &'a self,
        name: &'a str,
        elixir: bool,
    ) -> impl Iterator<Item = (&'a str, serde_json::Value)> + 'a {
        let name = std::iter::once(("name", serde_json::Value::from(name)));
        name.chain(self.args.iter().map(move |(key, arg)| {
            let value = match arg {
                Arg::Pid(pid) if elixir => serde_json::Value::from(format!("#PID{}", pid.local())),
                Arg::Pid(pid) => serde_json::Value::from(pid.local()),
                Arg::Int(n) => (*n).into(),
                Arg::Float(f) => (*f).into(),
                Arg::Flag(b) => (*b).into(),
                Arg::Text(t) => t.as_str().into(),
            };
            (key.as_str(), value)
        }))
    }
}

/// The node's next call on the wire: `{Tool, [{Key, Value}]}`.
impl<'de> Deserialize<'de> for Next {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (tool, args) = <(String, Vec<(String, Arg)>)>::deserialize(d)?;
        Ok(Next { tool, args })
    }
}

/// A finding's numbers, each named with its unit (`_per_s` a rate a second, `_bytes`,
/// `_ms`, else a count): what the evidence says, as data.
pub type Facts = std::collections::BTreeMap<String, f64>;

/// What ties a node finding to another's cause ([`super::cause::one_per_cause`]): the
/// names a deadlock's members go by, the children a restarts finding counts (each with its
/// restarts) and whether a supervisor gave up, the server a leak's processes wait on, a log
/// flood's handler processes.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Keys {
    #[serde(default)]
    pub members: Vec<String>,
    #[serde(default)]
    pub children: Vec<(String, u64)>,
    #[serde(default)]
    pub gave_up: bool,
    #[serde(default)]
    pub behind: Option<Pid>,
    #[serde(default)]
    pub handlers: Vec<Pid>,
    /// The holder's registered name, as the node wrote it (`Elixir.Shop.Worker`): a cluster
    /// compares that process's work on every member.
    #[serde(default)]
    pub names: Vec<String>,
}

/// A finding told as part of another, its cause ([`super::cause::one_per_cause`]): what the
/// cause's text says of it.
#[derive(Debug, Clone, PartialEq)]
pub enum Joined {
    /// The node's memory grows with a mailbox's queue (a growth held by its process).
    MemoryGrows { per_s: f64, to_limit: Option<f64> },
    /// Processes that wait on a contended process pile up (a growth of `meter`); `told`
    /// when a leak of them already says how.
    PileUp {
        meter: &'static str,
        per_s: f64,
        to_limit: Option<f64>,
        told: bool,
    },
    /// A leak whose processes wait on the contended process.
    Leak(Box<Finding>),
    /// A deadlock's members restarted this many times in all.
    MembersRestarted(u64),
    /// Error events of the last 5 minutes that are the restarts' own crash reports.
    CrashReports(u64),
    /// Error events that are a log flood's own lines (the node's count since start).
    FloodErrors(u64),
    /// File descriptors (ports are some) run out first.
    DescriptorsFull {
        per_s: f64,
        current: u64,
        limit: u64,
        to_limit: f64,
    },
    /// A leak of processes fills the process table.
    ProcessesFull(f64),
    /// The work that intervals nobody cancels make.
    TimersWork(Vec<super::history::Rising>),
    /// A finding whose next call reads the same function.
    SameCode(Box<Finding>),
    /// Another growth the same process holds.
    SameHolder(Box<Finding>),
    /// What is seen of a process while the VM pauses it (callers piling up, its work).
    WhileStalled(Box<Finding>),
    /// The pauses of a process whose long mailbox is what each collection sweeps.
    Pauses(Box<Finding>),
}

/// One finding, from the node or made by this server: its kind; its evidence (`head`, what
/// and how much, then `detail`, each clause led by its `; `); the holding process and its
/// code; its numbers and what ties it to other findings; the next call; the findings told as
/// part of it; a growth's trend; and, once ranked, how soon it does harm.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Finding {
    pub kind: Kind,
    pub head: String,
    #[serde(default)]
    pub detail: String,
    #[serde(rename = "pid")]
    pub holder: Option<Pid>,
    pub site: Option<Site>,
    pub next: Next,
    #[serde(default)]
    pub facts: Facts,
    #[serde(default)]
    pub keys: Keys,
    #[serde(skip)]
    pub joined: Vec<Joined>,
    /// The history's trend this finding is made of, and the function its holder is in
    /// (growth only).
    #[serde(skip)]
    pub trend: Option<Trend>,
    #[serde(skip)]
    pub holder_function: Option<String>,
    /// The process the holder waits on, when it does (growth only).
    #[serde(skip)]
    pub holder_waits_on: Option<Pid>,
    /// Seconds until it does harm: the kind's urgency, or a growth's time to its limit;
    /// set when ranked.
    #[serde(skip)]
    pub seconds_to_harm: f64,
}

impl Finding {
    /// A finding this server makes (no holder or site from the node): `head`, and the
    /// `detail` after it (its clauses each led by `; `).
    pub fn new(kind: Kind, head: String, detail: String, next: Next) -> Self {
        Finding {
            kind,
            head,
            detail,
            holder: None,
            site: None,
            next,
            facts: Facts::new(),
            keys: Keys::default(),
            joined: Vec::new(),
            trend: None,
            holder_function: None,
            holder_waits_on: None,
            seconds_to_harm: kind.urgency(),
        }
    }

    /// A number of the evidence.
    pub fn fact(&self, name: &str) -> Option<f64> {
        self.facts.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_next_call_is_written_with_the_nodes_name_and_its_pid_in_the_syntax_asked() {
        let pid = Pid {
            node: "web@host".into(),
            id: 1,
            serial: 0,
        };
        let next = Next::new(
            "process_info",
            vec![("pid", Arg::Pid(pid)), ("tail", Arg::Int(10))],
        );
        assert_eq!(
            next.call_text("we\"b", false),
            "process_info {\"name\":\"we\\\"b\",\"pid\":\"<0.1.0>\",\"tail\":10}"
        );
        assert_eq!(
            next.call_text("web", true),
            "process_info {\"name\":\"web\",\"pid\":\"#PID<0.1.0>\",\"tail\":10}"
        );
        assert_eq!(
            next.call_json("web", true),
            serde_json::json!({"tool": "process_info",
                "arguments": {"name": "web", "pid": "#PID<0.1.0>", "tail": 10}})
        );
    }
}
