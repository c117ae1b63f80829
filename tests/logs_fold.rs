//! A web app's day in its log: a pool's fifty reports of one kill fold into one line led by
//! what died first, `diagnose` names the killed supervisor and its next call reads that one
//! line, and 20,000 request lines later the crash is still there.

mod common;

use common::{diagnose, text, wait_until, web_pool, Server};
use serde_json::{json, Value};
use std::time::Duration;

/// `N` of `N processes ended with it` in `line` (0 without): the 50 acceptors, and on OTP 29
/// the two servers beside them, whose reports it logs too.
fn ended(line: &str) -> u32 {
    line.split_once(" processes ended with it")
        .and_then(|(before, _)| before.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// How long the crash reports may take to reach `logs`.
const ARRIVAL: Duration = Duration::from_secs(15);
/// What an agent reads of a crash: at most this.
const ANSWER_BYTES: usize = 2048;

#[tokio::test]
async fn a_killed_top_supervisor_is_named_and_its_pool_folded_and_never_evicted() {
    let server = Server::start();
    let mut c = server.client().await;
    let started = c.start_project("web", &web_pool()).await;
    let pid = started["os_pid"].as_u64().unwrap();
    // The node's logger events flow to the server (a node killed before they do keeps them).
    c.eval("web", r#"require Logger; Logger.info("serving")"#)
        .await;
    wait_logged(&mut c, "serving").await;
    c.eval(
        "web",
        "Process.exit(Process.whereis(WebPool.Supervisor), :kill)",
    )
    .await;
    // The application exits with its top supervisor; the server restarts the node.
    c.wait_restarted("web", pid).await;

    let errors = json!({"name": "web", "min_level": "error"});
    let folded = |page: &Value| {
        page["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["repeats"]["count"].as_u64() >= Some(40))
    };
    let page = wait_until(
        ARRIVAL,
        "the pool's reports, folded",
        async || c.ok("logs", errors.clone()).await,
        folded,
    )
    .await;
    let answer = text(&c.call("logs", errors.clone()).await);
    eprintln!("logs --min-level error ({} bytes):\n{answer}", answer.len());
    assert!(folded(&page), "{answer}");
    assert!(answer.len() <= ANSWER_BYTES, "{answer}");
    // The pool's reports fold into their first, and the line naming what died first follows.
    let named = answer
        .lines()
        .position(|l| l.contains("first to die: WebPool.Supervisor (killed); ") && ended(l) >= 50)
        .expect(&answer);
    let pool = answer
        .lines()
        .position(|l| l.contains(" × "))
        .expect(&answer);
    assert!(pool < named, "{answer}");

    // `diagnose` names the killed supervisor, and its next call reads that one line.
    let (report_text, report) = diagnose(&mut c, "web").await;
    let restart = node_restart(&report, &report_text);
    let line = restart["line"].as_str().unwrap();
    assert!(
        line.contains("killed: its top supervisor WebPool.Supervisor was killed"),
        "{report_text}"
    );
    assert!(
        line.contains("first to die: WebPool.Supervisor"),
        "{report_text}"
    );
    assert!(ended(line) >= 50, "{line}");
    let next = &restart["next"];
    let args = logs_args(next);
    assert_eq!(args["tail"], 1, "{next}");
    let next = text(&c.call("logs", args).await);
    eprintln!("its next call ({} bytes):\n{next}", next.len());
    assert!(next.contains("first to die: WebPool.Supervisor"), "{next}");
    assert!(next.len() <= ANSWER_BYTES, "{next}");

    // An error of the new run is this run's, never the restart's cause.
    c.eval(
        "web",
        r#"require Logger; Logger.error("the new run's own error")"#,
    )
    .await;
    wait_logged(&mut c, "new run's own").await;
    let (report_text, report) = diagnose(&mut c, "web").await;
    let restart = node_restart(&report, &report_text);
    let line = restart["line"].as_str().unwrap();
    assert!(
        line.contains("first to die: WebPool.Supervisor") && !line.contains("new run's own"),
        "{report_text}"
    );
    let status = c.ok("status", json!({"name": "web"})).await;
    let node = &status["nodes"][0];
    assert!(
        node["last_error"]
            .as_str()
            .unwrap()
            .contains("new run's own")
            && node["exit_error"]
                .as_str()
                .unwrap()
                .contains("first to die: WebPool.Supervisor"),
        "{status}"
    );

    // 21,000 request lines: the ring drops info lines, never the crash.
    c.eval("web", "WebPool.Requests.serve(7000)").await;
    let flooded = wait_until(
        ARRIVAL,
        "the request lines",
        async || c.ok("logs", json!({"name": "web", "tail": 1})).await,
        |page| page["dropped"].as_u64() >= Some(1000),
    )
    .await;
    assert!(flooded["dropped"].as_u64() >= Some(1000), "{flooded}");
    let after = text(&c.call("logs", errors).await);
    eprintln!("after the requests ({} bytes):\n{after}", after.len());
    assert!(
        after.contains("first to die: WebPool.Supervisor"),
        "{after}"
    );
    assert!(
        after.contains("dropped (") && after.contains("info "),
        "{after}"
    );
    assert!(after.len() <= ANSWER_BYTES, "{after}");
}

#[tokio::test]
async fn a_restart_finding_reads_next_the_one_report_of_what_died() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_project("web", &web_pool()).await;
    c.eval(
        "web",
        "Process.exit(Process.whereis(WebPool.Telemetry), :kill)",
    )
    .await;
    let (answer, report) = common::diagnose_until(&mut c, "web", "restarts").await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "restarts", "{answer}");
    let line = finding["line"].as_str().unwrap();
    assert!(
        line.contains("WebPool.Supervisor restarted WebPool.Telemetry 1×, last: :killed"),
        "{answer}"
    );
    let next = &finding["next"];
    let args = logs_args(next);
    assert_eq!(args["tail"], 1, "{next}");
    let read = text(&c.call("logs", args).await);
    eprintln!("its next call ({} bytes):\n{read}", read.len());
    assert!(
        read.contains("Child WebPool.Telemetry of Supervisor WebPool.Supervisor terminated"),
        "{read}"
    );
    assert!(read.len() <= ANSWER_BYTES, "{read}");
}

/// Until node `web`'s log has a line matching `grep`.
async fn wait_logged(c: &mut common::Client, grep: &str) {
    wait_until(
        ARRIVAL,
        grep,
        async || c.ok("logs", json!({"name": "web", "grep": grep})).await,
        |page| page["matched"].as_u64() >= Some(1),
    )
    .await;
}

/// The `node_restart` finding of a `diagnose` report.
fn node_restart<'a>(report: &'a Value, report_text: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "node_restart")
        .unwrap_or_else(|| panic!("{report_text}"))
}

/// The arguments of a finding's next call, `{"tool": "logs", "arguments": {"name": "web", ...}}`.
fn logs_args(next: &Value) -> Value {
    let (tool, args) = common::next_call(next);
    assert_eq!(tool, "logs", "{next}");
    args
}
