//! What is wrong with a cluster as a whole, for `diagnose` given a cluster's name. It finds who
//! does not see whom (from the connection matrix), and what one member lacks that its peers hold
//! (its processes in a `pg` group, a registered name, the `global` names it sees, processes of
//! an initial call) or holds differently (an application env value, the code of a module:
//! `cluster_code`), from the facts each
//! member's `diagnose` sends (`os_sup_cluster_facts`).
//! Each is one line with the call to make next.

use super::cluster_finding::ClusterFinding;
use crate::node::cluster::ClusterView;
use serde_json::{Map, Value};

/// The most lines of differences listed (the rest counted).
const SHOWN: usize = 5;
/// A member's list of names or initial calls at this length was cut: what it lacks cannot
/// be told from it.
const CUT_AT: usize = 200;

/// The cluster's findings: a split or a member that does not see all the others first, then
/// what a member lacks that all its peers hold. `facts` are the members' `cluster_facts`.
pub(super) fn findings(
    cluster: &str,
    view: Option<&ClusterView>,
    facts: &[(String, Value)],
) -> Vec<ClusterFinding> {
    let mut out = Vec::new();
    if let Some(view) = view {
        out.extend(connections(cluster, view));
    }
    let mut lacks = Vec::new();
    lacks.extend(super::cluster_code::differences(facts));
    lacks.extend(missing_members(facts));
    lacks.extend(missing_names(facts));
    lacks.extend(missing_counts(facts));
    lacks.extend(global_differences(facts));
    lacks.extend(env_differences(facts));
    let more = lacks.len().saturating_sub(SHOWN);
    out.extend(lacks.into_iter().take(SHOWN));
    if more > 0 {
        out.push(
            ClusterFinding::new(
                format!("cluster: {more} more differences between members"),
                cluster,
                "diagnose",
                vec![],
            )
            .fact("differences", more),
        );
    }
    out
}

/// A split, or members that do not see every other one.
fn connections(cluster: &str, view: &ClusterView) -> Vec<ClusterFinding> {
    let status = |line: String| ClusterFinding::new(line, cluster, "status", vec![]);
    if let Some(groups) = view.split.as_ref().filter(|g| g.len() > 1) {
        let sides: Vec<String> = groups.iter().map(|g| g.join(", ")).collect();
        return vec![status(format!(
            "cluster: PARTITIONED into {} sides that do not see each other: [{}]",
            groups.len(),
            sides.join("] | [")
        ))
        .fact("sides", groups.len())];
    }
    let names: Vec<&str> = view.members.iter().map(|m| m.member.as_str()).collect();
    view.members
        .iter()
        .filter(|m| m.status == "ok")
        .filter_map(|m| {
            let unseen: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| *n != m.member && !m.sees.iter().any(|s| s == n))
                .collect();
            (!unseen.is_empty()).then(|| {
                status(format!(
                    "cluster: {} does not see {}{}",
                    m.member,
                    unseen.join(", "),
                    if m.blocks.is_empty() {
                        String::new()
                    } else {
                        format!(" (it blocks {})", m.blocks.join(", "))
                    }
                ))
                .fact("members_unseen", unseen.len())
            })
        })
        .collect()
}

/// A `pg` group in which one member has no process while every other member has some: that
/// member misses what is sent to the group. Next: where the code joins groups.
fn missing_members(facts: &[(String, Value)]) -> Vec<ClusterFinding> {
    let groups = union_keys(facts, "pg");
    let mut out = Vec::new();
    for group in groups {
        // `[count, what]`: how many of the member's processes are in the group, and the
        // first of them by name.
        let counts: Vec<(&str, u64)> = facts
            .iter()
            .map(|(m, f)| (m.as_str(), f["pg"][&group][0].as_u64().unwrap_or(0)))
            .collect();
        let what = facts
            .iter()
            .find_map(|(_, f)| f["pg"][&group][1].as_str().map(String::from));
        for (member, count) in &counts {
            let others: Vec<String> = counts
                .iter()
                .filter(|(m, _)| m != member)
                .map(|(m, c)| format!("{m} {c}"))
                .collect();
            if *count == 0
                && !others.is_empty()
                && counts.iter().all(|(m, c)| m == member || *c > 0)
            {
                let have = what
                    .as_ref()
                    .map(|w| format!(", the others have {w} there"))
                    .unwrap_or_default();
                out.push(
                    ClusterFinding::new(
                        format!(
                        "cluster: {member} has no process in pg group {group} ({}{have}): what \
                         is sent to the group never reaches {member}",
                        others.join(", ")
                    ),
                        member,
                        "callers",
                        vec![("target", ":pg.join".into())],
                    )
                    .fact("members_in_group", others.len()),
                );
            }
        }
    }
    out
}

/// Registered names every other member has and one lacks. Next: what runs under that
/// member's supervisors.
fn missing_names(facts: &[(String, Value)]) -> Vec<ClusterFinding> {
    let lists: Vec<(&str, Vec<&str>)> = facts
        .iter()
        .filter_map(|(m, f)| {
            let list: Vec<&str> = f["names"]
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            (list.len() < CUT_AT).then_some((m.as_str(), list))
        })
        .collect();
    let mut out = Vec::new();
    if lists.len() < 2 || lists.len() < facts.len() {
        return out;
    }
    for (member, list) in &lists {
        let lacked: Vec<&str> = lists
            .iter()
            .filter(|(m, _)| m != member)
            .map(|(_, l)| l)
            .fold(None::<Vec<&str>>, |common, l| {
                Some(match common {
                    None => l.clone(),
                    Some(c) => c.into_iter().filter(|n| l.contains(n)).collect(),
                })
            })
            .unwrap_or_default()
            .into_iter()
            .filter(|n| !list.contains(n))
            .collect();
        if !lacked.is_empty() {
            out.push(
                ClusterFinding::new(
                    format!(
                        "cluster: {member} lacks registered name{} {} that every other member has",
                        if lacked.len() > 1 { "s" } else { "" },
                        lacked
                            .iter()
                            .take(3)
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                            + &if lacked.len() > 3 {
                                format!(" (+{} more)", lacked.len() - 3)
                            } else {
                                String::new()
                            }
                    ),
                    member,
                    "supervision_tree",
                    vec![],
                )
                .fact("names_lacked", lacked.len()),
            );
        }
    }
    out
}

/// Processes of an initial call every other member runs and one runs none of.
fn missing_counts(facts: &[(String, Value)]) -> Vec<ClusterFinding> {
    let complete: Vec<&(String, Value)> = facts
        .iter()
        .filter(|(_, f)| {
            f["initial_calls"]
                .as_object()
                .is_some_and(|o| o.len() < CUT_AT)
        })
        .collect();
    if complete.len() < 2 || complete.len() < facts.len() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for call in union_keys(facts, "initial_calls") {
        let count = |f: &Value| f["initial_calls"][&call].as_u64().unwrap_or(0);
        for (member, f) in &complete {
            let others: Vec<String> = complete
                .iter()
                .filter(|(m, _)| m != member)
                .map(|(m, f)| format!("{m} {}", count(f)))
                .collect();
            if count(f) == 0 && complete.iter().all(|(m, f)| m == member || count(f) > 0) {
                out.push(
                    ClusterFinding::new(
                        format!(
                            "cluster: {member} runs no {call} process, the others do ({})",
                            others.join(", ")
                        ),
                        member,
                        "supervision_tree",
                        vec![],
                    )
                    .fact("members_running_it", others.len()),
                );
            }
        }
    }
    out
}

/// Members that see different `global` names (a name registered on one side of a split).
fn global_differences(facts: &[(String, Value)]) -> Vec<ClusterFinding> {
    let sets: Vec<(&str, Vec<&str>)> = facts
        .iter()
        .filter_map(|(m, f)| {
            let names = f["global"].as_array()?;
            Some((m.as_str(), names.iter().filter_map(Value::as_str).collect()))
        })
        .collect();
    let Some((_, first)) = sets.first() else {
        return Vec::new();
    };
    if sets.iter().all(|(_, s)| s == first) {
        return Vec::new();
    }
    let described: Vec<String> = sets
        .iter()
        .map(|(m, s)| format!("{m} {}", s.len()))
        .collect();
    vec![ClusterFinding::new(
        format!(
            "cluster: members see different :global names ({}): the name registry is split",
            described.join(", ")
        ),
        sets[0].0,
        "eval",
        vec![("code", ":global.registered_names()".into())],
    )
    .fact("name_sets", sets.len())]
}

/// Application env keys whose value one member holds differently from all the others, who
/// agree, or holds alone or lacks alone (a value every member holds differently, as each
/// member's port, is no finding; two members cannot tell which one is odd). The values are
/// compared by hash: env holds secrets.
fn env_differences(facts: &[(String, Value)]) -> Vec<ClusterFinding> {
    // Per member: `(app, key, hash)` rows; a cut list cannot tell what a member lacks.
    type Rows<'a> = Vec<(&'a str, &'a str, u64)>;
    let envs: Vec<(&str, Rows)> = facts
        .iter()
        .filter_map(|(m, f)| {
            let rows = f["env"].as_array().filter(|r| r.len() < CUT_AT)?;
            let rows = rows
                .iter()
                .filter_map(|r| Some((r[0].as_str()?, r[1].as_str()?, r[2].as_u64()?)))
                .collect();
            Some((m.as_str(), rows))
        })
        .collect();
    if envs.len() < 3 || envs.len() < facts.len() {
        return Vec::new();
    }
    let value = |rows: &[(&str, &str, u64)], app: &str, key: &str| {
        rows.iter()
            .find(|(a, k, _)| *a == app && *k == key)
            .map(|r| r.2)
    };
    let mut keys: Vec<(&str, &str)> = envs
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|(a, k, _)| (*a, *k)))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let mut odd: Vec<(&str, Vec<(&str, &str)>)> = Vec::new();
    for (app, key) in keys {
        let values: Vec<Option<u64>> = envs.iter().map(|(_, r)| value(r, app, key)).collect();
        for (i, (member, _)) in envs.iter().enumerate() {
            let mut others = values.iter().enumerate().filter(|(j, _)| *j != i);
            let Some((_, shared)) = others.next() else {
                continue;
            };
            if others.all(|(_, v)| v == shared) && values[i] != *shared {
                match odd.iter_mut().find(|(m, _)| m == member) {
                    Some((_, keys)) => keys.push((app, key)),
                    None => odd.push((member, vec![(app, key)])),
                }
            }
        }
    }
    odd.into_iter()
        .map(|(member, keys)| {
            let (app, key) = keys[0];
            let shown: Vec<String> = keys
                .iter()
                .take(3)
                .map(|(a, k)| format!("{a} {k}"))
                .collect();
            let more = match keys.len() {
                n if n > 3 => format!(" (+{} more)", n - 3),
                _ => String::new(),
            };
            // The app as the node printed it: `:shop` in Elixir, `shop` in Erlang.
            let code = if app.starts_with(':') {
                format!("Application.get_env({app}, {key})")
            } else {
                format!("application:get_env({app}, {key}).")
            };
            ClusterFinding::new(
                format!(
                    "cluster: {member} holds a different application env value than every \
                     other member at {}{more}",
                    shown.join(", ")
                ),
                member,
                "eval",
                vec![("code", code)],
            )
            .fact("keys_differ", keys.len())
        })
        .collect()
}

/// Every key of object `key` in any member's facts, sorted.
fn union_keys(facts: &[(String, Value)], key: &str) -> Vec<String> {
    let mut keys: Vec<String> = facts
        .iter()
        .filter_map(|(_, f)| f[key].as_object().map(Map::keys))
        .flatten()
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(m, f)| (m.to_string(), f.clone()))
            .collect()
    }

    #[test]
    fn a_member_out_of_a_group_its_peers_are_in_is_named() {
        let f = facts(&[
            (
                "rep-1",
                json!({"pg": {"pg :stores": [1, "Replicas.Store"]}, "names": ["A", "B"], "global": []}),
            ),
            (
                "rep-2",
                json!({"pg": {"pg :stores": [0, null]}, "names": ["A"], "global": []}),
            ),
            (
                "rep-3",
                json!({"pg": {"pg :stores": [1, "Replicas.Store"]}, "names": ["A", "B"], "global": []}),
            ),
        ]);
        let found = findings("rep", None, &f);
        let lines: Vec<String> = found.iter().map(|f| f.line()).collect();
        assert!(
            lines[0].starts_with(
                "cluster: rep-2 has no process in pg group pg :stores (rep-1 1, rep-3 1, the \
                 others have Replicas.Store there)"
            ),
            "{lines:?}"
        );
        assert_eq!(
            found[0].next_text(),
            "callers {\"name\":\"rep-2\",\"target\":\":pg.join\"}"
        );
        assert!(
            lines[1].contains("rep-2 lacks registered name B"),
            "{lines:?}"
        );
        assert_eq!(found.len(), 2, "{lines:?}");
    }

    #[test]
    fn an_env_value_one_member_holds_differently_is_named() {
        let env = |peers: u64, port: u64| json!({"env": [[":shop", ":peers", peers], [":shop", ":port", port]]});
        let f = facts(&[
            ("a", env(1, 4001)),
            ("b", env(2, 4002)),
            ("c", env(1, 4003)),
        ]);
        let found = findings("c", None, &f);
        assert_eq!(found.len(), 1, "each member's own port is no finding");
        assert_eq!(
            found[0].line(),
            "cluster: b holds a different application env value than every other member at \
             :shop :peers"
        );
        assert_eq!(
            found[0].next_text(),
            "eval {\"name\":\"b\",\"code\":\"Application.get_env(:shop, :peers)\"}"
        );
        assert_eq!(
            found[0].finding.next.call_json(&found[0].name, false),
            json!({"tool": "eval",
                   "arguments": {"name": "b", "code": "Application.get_env(:shop, :peers)"}})
        );
        let two = facts(&[("a", env(1, 1)), ("b", env(2, 1))]);
        assert!(findings("c", None, &two).is_empty(), "two cannot tell");
    }

    #[test]
    fn alike_members_give_nothing() {
        let same = json!({"pg": {"pg :stores": 1}, "names": ["A"], "global": ["g"],
                          "initial_calls": {"A.init/1": 2}});
        let f = facts(&[("a", same.clone()), ("b", same)]);
        assert!(findings("c", None, &f).is_empty());
    }
}
