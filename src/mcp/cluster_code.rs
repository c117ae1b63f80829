//! Code that differs between the members of a cluster, for `diagnose` given a cluster's name.
//! Each member's `diagnose` sends, in its cluster facts (`os_sup_diagnose_code:facts/2`), a
//! short hash of the code of each of its application's modules and where it was loaded from:
//! the directory of its `.beam` (an index into `dirs`), or a text when it was not loaded from
//! its `.beam` (`memory, compiled from priv/fix.ex`, then whether it was loaded from memory).
//! A module that one member runs with other
//! code than the others, who agree, is that member's finding, with both origins. Modules not
//! loaded on a member (loaded on first call) are not compared there; a member's cut list
//! (`listed` < `count`) compares only what it lists.

use super::cluster_finding::ClusterFinding;
use serde_json::Value;
use std::collections::BTreeMap;

/// Modules named in one line (the rest counted).
const NAMED: usize = 3;

/// One member's copy of a module: its hash and where it came from.
struct Copy<'a> {
    member: &'a str,
    hash: u64,
    /// Where it was loaded from, as the member said it.
    origin: String,
    /// Loaded from its `.beam` (not memory, not elsewhere).
    from_beam: bool,
    /// Loaded from memory (compiled at run time: the likelier hot fix).
    from_memory: bool,
}

/// A module one member runs with other code than its peers, who agree.
struct Odd<'a> {
    module: &'a str,
    /// Where the member's copy came from.
    origin: String,
    from_memory: bool,
    /// The peers, and where their copy came from.
    others: Vec<&'a str>,
    their: String,
}

/// The members that run a module with other code than their peers: one line per member
/// that differs (its modules grouped), or per module whose copies no majority settles.
pub(super) fn differences(facts: &[(String, Value)]) -> Vec<ClusterFinding> {
    let mut modules: BTreeMap<&str, Vec<Copy>> = BTreeMap::new();
    for (member, f) in facts {
        let code = &f["code"];
        let Some(listed) = code["modules"].as_object() else {
            continue;
        };
        let dirs: Vec<&str> = code["dirs"]
            .as_array()
            .map(|d| d.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (module, entry) in listed {
            let Some(hash) = entry[0].as_u64() else {
                continue;
            };
            let from_memory = entry[2].as_bool() == Some(true);
            let (origin, from_beam) = match &entry[1] {
                Value::String(text) => (text.clone(), false),
                v => match v.as_u64().and_then(|i| dirs.get(i as usize)) {
                    Some(dir) => (format!("its .beam in {dir}"), true),
                    None => ("its .beam".to_string(), true),
                },
            };
            modules.entry(module).or_default().push(Copy {
                member,
                hash,
                origin,
                from_beam,
                from_memory,
            });
        }
    }
    // Per member that differs, its modules.
    let mut odd: BTreeMap<&str, Vec<Odd>> = BTreeMap::new();
    let mut unsettled = Vec::new();
    for (module, copies) in &modules {
        if copies.len() < 2 || copies.iter().all(|c| c.hash == copies[0].hash) {
            continue;
        }
        match odd_one(copies) {
            Some(i) => {
                let others: Vec<&Copy> =
                    copies.iter().filter(|c| c.hash != copies[i].hash).collect();
                odd.entry(copies[i].member).or_default().push(Odd {
                    module,
                    origin: copies[i].origin.clone(),
                    from_memory: copies[i].from_memory,
                    others: others.iter().map(|c| c.member).collect(),
                    their: others[0].origin.clone(),
                });
            }
            None => unsettled.push((module, copies)),
        }
    }
    let mut out: Vec<ClusterFinding> = odd
        .into_iter()
        .map(|(member, mut mods)| {
            // Code loaded from memory first: the likelier hot fix.
            mods.sort_by_key(|m| !m.from_memory);
            let Odd {
                module,
                origin,
                others,
                their,
                ..
            } = &mods[0];
            let more = match mods.len() {
                1 => String::new(),
                n => format!(
                    "; also {}{}",
                    mods[1..]
                        .iter()
                        .take(NAMED - 1)
                        .map(|m| format!("{} ({})", m.module, m.origin))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if n > NAMED {
                        format!(" (+{} more)", n - NAMED)
                    } else {
                        String::new()
                    }
                ),
            };
            source(
                format!(
                    "cluster: {member} runs other code of {module} than {}: {member}'s from \
                     {origin}; theirs from {their}{more}",
                    others.join(", ")
                ),
                member,
                module,
            )
            .fact("modules", mods.len())
        })
        .collect();
    out.extend(unsettled.into_iter().map(|(module, copies)| {
        let mut groups: Vec<(u64, Vec<&str>, &str)> = Vec::new();
        for c in copies {
            match groups.iter_mut().find(|(h, _, _)| *h == c.hash) {
                Some((_, members, _)) => members.push(c.member),
                None => groups.push((c.hash, vec![c.member], &c.origin)),
            }
        }
        let described: Vec<String> = groups
            .iter()
            .map(|(_, members, origin)| format!("{} from {origin}", members.join(", ")))
            .collect();
        source(
            format!(
                "cluster: members run different code of {module}: {}",
                described.join("; ")
            ),
            copies[0].member,
            module,
        )
        .fact("versions", groups.len())
    }));
    out
}

/// The copy that differs from all the others, who agree among themselves (at least two); or,
/// of two, the only one not loaded from its `.beam`.
fn odd_one(copies: &[Copy]) -> Option<usize> {
    if copies.len() == 2 {
        return match (copies[0].from_beam, copies[1].from_beam) {
            (true, false) => Some(1),
            (false, true) => Some(0),
            _ => None,
        };
    }
    (0..copies.len()).find(|&i| {
        let mut others = copies.iter().enumerate().filter(|(j, _)| *j != i);
        let first = others.next().map(|(_, c)| c.hash);
        first != Some(copies[i].hash) && others.all(|(_, c)| Some(c.hash) == first)
    })
}

/// `line`, with the call that reads `module`'s source on `member` next.
fn source(line: String, member: &str, module: &str) -> ClusterFinding {
    ClusterFinding::new(line, member, "source", vec![("target", module.to_string())])
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

    fn code(modules: Value) -> Value {
        json!({"code": {"count": 2, "listed": 2, "dirs": ["_build/dev/lib/app/ebin"],
                        "modules": modules}})
    }

    #[test]
    fn the_member_that_runs_other_code_is_named_with_both_origins() {
        let same = code(json!({"App.Worker": [11, 0], "App.Leader": [22, 0]}));
        let fixed = code(
            json!({"App.Worker": [99, "memory, compiled from /tmp/fix.ex", true],
                                "App.Leader": [22, 0]}),
        );
        let f = facts(&[("c-1", same.clone()), ("c-2", fixed), ("c-3", same)]);
        let found = differences(&f);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].line(),
            "cluster: c-2 runs other code of App.Worker than c-1, c-3: c-2's from memory, \
             compiled from /tmp/fix.ex; theirs from its .beam in _build/dev/lib/app/ebin"
        );
        assert_eq!(
            found[0].next_text(),
            "source {\"name\":\"c-2\",\"target\":\"App.Worker\"}"
        );
    }

    #[test]
    fn a_module_loaded_on_one_member_only_or_alike_everywhere_is_no_difference() {
        let one = code(json!({"App.Worker": [11, 0], "App.Lazy": [5, 0]}));
        let two = code(json!({"App.Worker": [11, 0]}));
        assert!(differences(&facts(&[("a", one), ("b", two.clone()), ("c", two)])).is_empty());
    }

    #[test]
    fn two_members_with_other_code_on_disk_are_both_named() {
        let a = code(json!({"App.Worker": [11, 0]}));
        let b = code(json!({"App.Worker": [12, 0]}));
        let found = differences(&facts(&[("a", a.clone()), ("b", b.clone())]));
        assert_eq!(
            found[0].line(),
            "cluster: members run different code of App.Worker: a from its .beam in \
             _build/dev/lib/app/ebin; b from its .beam in _build/dev/lib/app/ebin"
        );
        // Of two, the one loaded from memory is the odd one.
        let m = code(json!({"App.Worker": [12, "memory, compiled from a string", true]}));
        let found = differences(&facts(&[("a", a), ("b", m)]));
        assert!(found[0]
            .line()
            .starts_with("cluster: b runs other code of App.Worker than a"));
    }
}
