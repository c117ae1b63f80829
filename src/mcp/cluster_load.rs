//! A cluster's load compared member to member: the same registered process's work (reductions
//! a second over the diagnosis window) side by side. One member doing several times what its
//! peers do is where the routing of work goes wrong; a member at the load that made another
//! member's finding is no healthier than that member, whatever its own thresholds say.

use super::cluster_finding::ClusterFinding;
use crate::node::diagnose::{rate_text, Diagnosis, Kind};

/// A process this many times busier on one member than the middle of the others is an
/// imbalance...
const IMBALANCE: f64 = 3.0;
/// ...when it does this many reductions a second there.
const IMBALANCE_MIN_RATE: f64 = 2000.0;
/// A peer at this share of the load that made a member's finding bears the same load.
const SAME_LOAD: f64 = 0.8;
/// Imbalances said, at most.
const SHOWN: usize = 2;

/// The imbalances between members, and the healthy members at the load that made another's
/// finding (each a finding addressed to that member): `(findings, members held back from
/// healthy)`.
pub(super) fn compare(answered: &[(&str, &Diagnosis)]) -> (Vec<ClusterFinding>, Vec<String>) {
    let mut out = imbalances(answered);
    let mut held = Vec::new();
    for (member, d) in answered {
        for f in d
            .findings
            .iter()
            .filter(|f| matches!(f.kind, Kind::Cpu | Kind::Work))
        {
            let Some(name) = f.keys.names.first() else {
                continue;
            };
            let Some(load) = rate_of(d, name) else {
                continue;
            };
            for (peer, p) in answered.iter().filter(|(m, _)| m != member) {
                let Some(rate) = rate_of(p, name).filter(|r| *r >= SAME_LOAD * load) else {
                    continue;
                };
                if !p.healthy() || held.iter().any(|h| h == peer) {
                    continue;
                }
                held.push(peer.to_string());
                out.push(
                    ClusterFinding::new(
                        format!(
                            "cluster: {peer} runs {} at {} of reductions, {:.0} % of the load \
                             that made {member}'s {} finding: not healthy at that load",
                            shown(name, p.elixir),
                            rate_text(rate),
                            rate * 100.0 / load,
                            kind_name(f.kind)
                        ),
                        peer,
                        "process_info",
                        vec![("pid", shown(name, p.elixir))],
                    )
                    .fact("reductions_per_s", rate as usize),
                );
            }
        }
    }
    (out, held)
}

/// The registered processes several times busier on one member than on the others.
fn imbalances(answered: &[(&str, &Diagnosis)]) -> Vec<ClusterFinding> {
    let mut names: Vec<&str> = answered
        .iter()
        .flat_map(|(_, d)| d.work_now.iter().map(|(n, _)| n.as_str()))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut found: Vec<(f64, ClusterFinding)> = names
        .into_iter()
        .filter_map(|name| {
            let mut rates: Vec<(&str, f64)> = answered
                .iter()
                .filter_map(|(m, d)| Some((*m, rate_of(d, name)?)))
                .collect();
            if rates.len() < 2 {
                return None;
            }
            rates.sort_by(|a, b| b.1.total_cmp(&a.1));
            let (hot, top) = rates[0];
            let others = &rates[1..];
            let middle = others[others.len() / 2].1;
            let ratio = top / middle.max(1.0);
            if top < IMBALANCE_MIN_RATE || ratio < IMBALANCE {
                return None;
            }
            let elixir = answered.iter().any(|(_, d)| d.elixir);
            let peers: Vec<String> = others
                .iter()
                .map(|(m, r)| format!("{m} {}", rate_text(*r)))
                .collect();
            let line = format!(
                "cluster: {} works {ratio:.1}× as hard on {hot} ({} of reductions) as on the \
                 others ({}): what sends the members their work favours {hot}",
                shown(name, elixir),
                rate_text(top),
                peers.join(", ")
            );
            let finding = ClusterFinding::new(
                line,
                hot,
                "process_info",
                vec![("pid", shown(name, elixir))],
            )
            .fact("reductions_per_s", top as usize)
            .fact("times_the_others", ratio as usize);
            Some((ratio, finding))
        })
        .collect();
    found.sort_by(|a, b| b.0.total_cmp(&a.0));
    found.into_iter().take(SHOWN).map(|(_, f)| f).collect()
}

fn rate_of(d: &Diagnosis, name: &str) -> Option<f64> {
    d.work_now.iter().find(|(n, _)| n == name).map(|(_, r)| *r)
}

/// A registered name as the member's syntax writes it (`Shop.Worker`, `:shop_worker`).
fn shown(name: &str, elixir: bool) -> String {
    match (name.strip_prefix("Elixir."), elixir) {
        (Some(module), _) => module.to_string(),
        (None, true) => format!(":{name}"),
        (None, false) => name.to_string(),
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Cpu => "cpu",
        _ => "work",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::diagnose::{Assessment, Finding, Next, Verdict};

    fn member(work: &[(&str, f64)], findings: Vec<Finding>) -> Diagnosis {
        Diagnosis {
            verdict: if findings.is_empty() {
                Verdict::Healthy("healthy".into())
            } else {
                Verdict::Findings
            },
            findings,
            figures_line: String::new(),
            figures: serde_json::Value::Null,
            assessment: Assessment::default(),
            warnings: vec![],
            cluster_facts: serde_json::Value::Null,
            window_ms: 1000,
            duration_ms: 1000,
            elixir: true,
            work_now: work.iter().map(|(n, r)| (n.to_string(), *r)).collect(),
        }
    }

    fn cpu_on(name: &str) -> Finding {
        let mut f = Finding::new(
            Kind::Cpu,
            "cpu: Worker".into(),
            String::new(),
            Next::new("source", vec![]),
        );
        f.keys.names = vec![name.into()];
        f
    }

    #[test]
    fn one_member_doing_the_others_work_is_an_imbalance() {
        let w = "Elixir.App.Worker";
        let (hot, a, b) = (
            member(&[(w, 40_000.0)], vec![cpu_on(w)]),
            member(&[(w, 5_000.0)], vec![]),
            member(&[(w, 5_200.0)], vec![]),
        );
        let (found, held) = compare(&[("hs-1", &hot), ("hs-2", &a), ("hs-3", &b)]);
        assert_eq!(
            found.len(),
            1,
            "{:?}",
            found.iter().map(|f| f.line()).collect::<Vec<_>>()
        );
        let line = found[0].line();
        assert!(
            line.starts_with(
                "cluster: App.Worker works 8.0× as hard on hs-1 (40.0 k/s of reductions)"
            ),
            "{line}"
        );
        assert_eq!(found[0].name, "hs-1");
        assert!(held.is_empty());
    }

    #[test]
    fn a_peer_at_the_load_that_made_a_finding_is_not_healthy() {
        let w = "Elixir.App.Worker";
        let (flagged, peer, idle) = (
            member(&[(w, 9_000.0)], vec![cpu_on(w)]),
            member(&[(w, 8_800.0)], vec![]),
            member(&[(w, 100.0)], vec![]),
        );
        let (found, held) = compare(&[("hs-2", &flagged), ("hs-3", &peer), ("hs-4", &idle)]);
        assert_eq!(held, ["hs-3"]);
        let line = found
            .iter()
            .map(|f| f.line())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            line.contains("cluster: hs-3 runs App.Worker at 8.8 k/s of reductions, 98 % of the load that made \
                 hs-2's cpu finding"),
            "{line}"
        );
    }
}
