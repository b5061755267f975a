//! Falco's alerts for the battery, recorded once (tests/data/falco-battery.json,
//! written by `harrier-bench falco-diff --expected`), and their comparison
//! with Harrier's: per behaviour, alert by alert, every output field after
//! normalisation (normalise.rs); the differences docs/falco-differences.md
//! explains are each accepted only with Harrier's value pinned (pins.rs).

pub mod normalise;
pub mod pins;

use normalise::Run;
use serde_json::{Map, Value};

/// One alert, Falco's (recorded) or Harrier's, with the behaviour it is of.
#[derive(Debug, Clone)]
pub struct Alert {
    pub behaviour: String,
    pub rule: String,
    pub priority: String,
    pub fields: Map<String, Value>,
}

pub struct Recorded {
    pub about: String,
    pub run: Run,
    pub alerts: Vec<Alert>,
}

/// The behaviour name for alerts after the battery's last behaviour (Tools
/// removing what behaviours made).
pub const AFTER: &str = "(after the battery)";

pub fn recorded() -> Recorded {
    let v: Value =
        serde_json::from_str(include_str!("../data/falco-battery.json")).expect("falco-battery.json");
    let r = &v["runner"];
    let mut run = Run {
        pid: r["pid"].as_u64().expect("runner.pid"),
        session: r["session"].as_str().unwrap_or("").to_string(),
        cwd: r["cwd"].as_str().unwrap_or("").to_string(),
        usr_overlay: r["usr_overlay"].as_bool().unwrap_or(false),
        cgroup2: r["cgroup2"].as_bool().unwrap_or(false),
        own: Vec::new(),
    };
    let alerts = v["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .map(|a| Alert {
            behaviour: a["behaviour"].as_str().unwrap_or("").to_string(),
            rule: a["rule"].as_str().unwrap_or("").to_string(),
            priority: a["priority"].as_str().unwrap_or("").to_string(),
            fields: a["fields"].as_object().cloned().unwrap_or_default(),
        })
        .collect::<Vec<Alert>>();
    run.learn(alerts.iter().map(|a| &a.fields));
    Recorded { about: v["recorded"].as_str().unwrap_or("").to_string(), run, alerts }
}

/// What a comparison found: every problem on a line of its own (behaviour,
/// rule, field, Falco's value, Harrier's), and how much it compared.
#[derive(Default)]
pub struct Outcome {
    pub problems: Vec<String>,
    pub matched: usize,
    /// Falco's alerts matched, or explained where Harrier raised none.
    pub accounted: usize,
    pub fields: usize,
    /// Differences accepted by a pin, by cause.
    pub pinned: std::collections::BTreeMap<&'static str, usize>,
}

/// Falco's alerts against Harrier's for the behaviours in `behaviours`.
pub fn compare(
    falco: &[Alert],
    falco_run: &Run,
    harrier: &[Alert],
    harrier_run: &Run,
    behaviours: &[String],
) -> Outcome {
    let mut out = Outcome::default();
    for b in behaviours {
        let mut theirs: Vec<(&Alert, Map<String, Value>)> = harrier
            .iter()
            .filter(|a| &a.behaviour == b)
            .map(|a| (a, normalise::normalise(harrier_run, &a.fields)))
            .collect();
        let mut matched: Vec<(String, Map<String, Value>)> = Vec::new();
        let mut lone_falco: Vec<(&Alert, Map<String, Value>)> = Vec::new();
        for f in falco.iter().filter(|a| &a.behaviour == b) {
            let fnorm = normalise::normalise(falco_run, &f.fields);
            // The Harrier alert of the same rule that differs in the fewest fields.
            let best = theirs
                .iter()
                .enumerate()
                .filter(|(_, (h, _))| h.rule == f.rule)
                .min_by_key(|(_, (_, hn))| differing(&fnorm, hn).len())
                .map(|(i, _)| i);
            let Some(i) = best else {
                lone_falco.push((f, fnorm));
                continue;
            };
            let (h, hnorm) = theirs.remove(i);
            matched.push((h.rule.clone(), hnorm.clone()));
            out.matched += 1;
            out.accounted += 1;
            out.fields += fnorm.len().max(hnorm.len()) + 1;
            if f.priority != h.priority {
                out.problems.push(format!(
                    "{b}: '{}': priority: Falco {}, Harrier {}",
                    f.rule, f.priority, h.priority
                ));
            }
            for k in differing(&fnorm, &hnorm) {
                let (fv, hv) = (fnorm.get(&k).unwrap_or(&Value::Null), hnorm.get(&k).unwrap_or(&Value::Null));
                let missing = if !hnorm.contains_key(&k) {
                    " (Harrier has no such field)"
                } else if !fnorm.contains_key(&k) {
                    " (Falco has no such field)"
                } else {
                    ""
                };
                match pins::check(f, h, &k, fv, hv) {
                    Some(Ok(cause)) => *out.pinned.entry(cause).or_default() += 1,
                    Some(Err(e)) => out.problems.push(format!("{b}: '{}': {k}: {e}", f.rule)),
                    None => out
                        .problems
                        .push(format!("{b}: '{}': {k}: Falco {fv}, Harrier {hv}{missing}", f.rule)),
                }
            }
            for e in pins::always(f, h) {
                out.problems.push(format!("{b}: '{}': {e}", f.rule));
            }
        }
        let repeat = |rule: &str, n: &Map<String, Value>| matched.iter().any(|(r, m)| r == rule && m == n);
        for (f, fnorm) in lone_falco {
            if repeat(&f.rule, &fnorm) {
                *out.pinned.entry(normalise::REPEATS).or_default() += 1;
                out.accounted += 1;
                continue;
            }
            match pins::only_falco(f, harrier.iter().filter(|h| &h.behaviour == b)) {
                Some(Ok(cause)) => {
                    *out.pinned.entry(cause).or_default() += 1;
                    out.accounted += 1;
                }
                Some(Err(e)) => {
                    out.problems.push(format!("{b}: Falco raised '{}', Harrier did not: {e}", f.rule))
                }
                None => out.problems.push(format!("{b}: Falco raised '{}', Harrier did not", f.rule)),
            }
        }
        for (h, hn) in theirs {
            if repeat(&h.rule, &hn) {
                *out.pinned.entry(normalise::REPEATS).or_default() += 1;
                continue;
            }
            match pins::only_harrier(h) {
                Some(Ok(cause)) => *out.pinned.entry(cause).or_default() += 1,
                Some(Err(e)) => {
                    out.problems.push(format!("{b}: Harrier raised '{}', Falco did not: {e}", h.rule))
                }
                None => out.problems.push(format!(
                    "{b}: Harrier raised '{}', Falco did not: {}",
                    h.rule,
                    Value::Object(hn)
                )),
            }
        }
    }
    out
}

/// The fields whose (normalised) values differ, or that only one side has.
fn differing(a: &Map<String, Value>, b: &Map<String, Value>) -> Vec<String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).cloned().collect()
}
