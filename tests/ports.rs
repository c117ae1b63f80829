//! `ports` on a real node: the ailments fixture's port leak (`AILMENT=ports`: one process opens
//! a UDP socket five times a second and keeps them) shows as the largest kind with one owner,
//! cut to `limit` ports with the rest counted; a command a process spawned shows as kind
//! `spawn` with its command, OS pid and registered owner; `limit` is held to its range.

mod common;

use common::{text, wait_until, Client, Server};
use serde_json::{json, Value};
use std::time::Duration;

/// `ports` on `name` until `check` holds of its data (at most 30 s); its text and data.
async fn ports_until(
    c: &mut Client,
    args: Value,
    check: impl Fn(&Value) -> bool,
) -> (String, Value) {
    wait_until(
        Duration::from_secs(30),
        "ports answers as expected",
        async || {
            let result = c.call("ports", args.clone()).await;
            let answer = text(&result);
            assert_ne!(result["isError"], json!(true), "{answer}");
            (answer, result["structuredContent"].clone())
        },
        |(_, data)| check(data),
    )
    .await
}

/// The kind `kind` of a `ports` answer.
fn kind<'a>(data: &'a Value, kind: &str) -> Option<&'a Value> {
    data["kinds"].as_array()?.iter().find(|k| k["kind"] == kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_by_kind_owner_and_name() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_ailment("leaky", "ports").await;

    // The leak: the largest kind, every listed port of one owner, the rest counted.
    let args = json!({"name": "leaky", "limit": 3});
    let (answer, data) = ports_until(&mut c, args, |data| {
        data["kinds"][0]["kind"] == "udp_inet" && data["kinds"][0]["count"].as_u64() >= Some(10)
    })
    .await;
    eprintln!("{answer}");
    for key in ["total", "port_limit", "scanned", "limit", "kinds"] {
        assert!(data.get(key).is_some(), "{key}: {data}");
    }
    assert_eq!(data["limit"], 3, "{data}");
    let udp = &data["kinds"][0];
    assert_eq!(udp["kind"], "udp_inet", "{answer}");
    let count = udp["count"].as_u64().unwrap();
    let listed = udp["ports"].as_array().unwrap();
    assert_eq!(listed.len(), 3, "{answer}");
    let owner = listed[0]["owner"].as_str().unwrap();
    for port in listed {
        for key in [
            "port",
            "name",
            "owner",
            "owner_name",
            "input",
            "output",
            "queue_size",
            "os_pid",
        ] {
            assert!(port.get(key).is_some(), "{key}: {port}");
        }
        assert_eq!(port["owner"], owner, "one process holds them: {answer}");
        assert_eq!(port["name"], "udp_inet", "{port}");
        assert!(port["os_pid"].is_null(), "{port}");
    }
    let head = answer.lines().next().unwrap();
    assert!(
        head.starts_with(&format!("{} ports of ", data["total"]))
            && head.contains(&format!("{count} udp_inet")),
        "{answer}"
    );
    assert!(
        answer.contains(&format!("\nudp_inet: {count}\n")),
        "{answer}"
    );
    assert!(
        answer.contains(&format!("… {} more of {count}", count - 3)),
        "{answer}"
    );
    assert!(answer.contains(&format!("owner={owner} in=")), "{answer}");
    // The distribution's own socket is a port too.
    assert!(kind(&data, "tcp_inet").is_some(), "{answer}");
    // The owner is the leak's process.
    let process = c
        .call("process_info", json!({"name": "leaky", "pid": owner}))
        .await;
    assert!(
        text(&process).contains("Ailments.Sockets"),
        "{}",
        text(&process)
    );

    // A command a process spawned: its kind, command, OS pid and named owner.
    c.eval(
        "leaky",
        "spawn(fn -> Process.register(self(), :cat_owner); \
         Port.open({:spawn, \"cat\"}, [:binary]); \
         receive do :stop -> :ok end end); :ok",
    )
    .await;
    let args = json!({"name": "leaky", "limit": 50});
    let (answer, data) = ports_until(&mut c, args, |data| kind(data, "spawn").is_some()).await;
    let spawned = kind(&data, "spawn").unwrap_or_else(|| panic!("no spawn kind: {answer}"));
    let cat = spawned["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "cat")
        .unwrap_or_else(|| panic!("no cat: {answer}"));
    assert_eq!(cat["owner_name"], ":cat_owner", "{answer}");
    assert!(cat["os_pid"].as_u64().is_some_and(|pid| pid > 0), "{cat}");
    assert!(
        answer.contains(&format!("cat os_pid={} owner=", cat["os_pid"])),
        "{answer}"
    );
    assert!(answer.contains("(:cat_owner)"), "{answer}");
    assert_eq!(data["limit"], 50, "held to its maximum: {data}");
    // Every udp port is listed now (up to the maximum), so nothing is cut from it unless
    // the leak passed 50.
    let udp = kind(&data, "udp_inet").unwrap();
    let shown = udp["ports"].as_array().unwrap().len() as u64;
    assert_eq!(shown, udp["count"].as_u64().unwrap().min(50), "{answer}");

    // `limit` is clamped to its range, not refused.
    let data = c.ok("ports", json!({"name": "leaky", "limit": 500})).await;
    assert_eq!(data["limit"], 50, "{data}");
}
