//! Alert against alert: the workload's alerts of each sensor (in its window,
//! from its process tree), paired by rule, process and time, and every
//! output field of a pair compared.

use super::config::HARNESS_FIELDS;
use super::Capture;
use anyhow::{Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;

/// Two evt.time values this close are the same event (the sensors convert
/// kernel time to wall time each its own way).
pub const TIME_SLACK_NS: u64 = 50_000_000;
/// Alerts further apart than this are never paired.
const PAIR_WINDOW_NS: u64 = 2_000_000_000;

/// One alert as the comparison reads it.
#[derive(Debug, Clone)]
pub struct Alert {
    pub rule: String,
    pub priority: String,
    pub time: u64,
    pub pid: Option<u64>,
    /// The output text after the time prefix.
    pub text: String,
    /// output_fields without the harness's own.
    pub fields: BTreeMap<String, Value>,
    /// The battery behaviour whose window holds it.
    pub step: Option<String>,
    pub json: Value,
}

/// One field of a matched pair that differs.
#[derive(Debug, Clone)]
pub struct FieldDiff {
    pub field: String,
    pub falco: Value,
    pub harrier: Value,
    /// Why (an anchor in docs/falco-differences.md), if known.
    pub why: Option<&'static str>,
}

#[derive(Debug, Clone)]
pub struct Pair {
    pub falco: Alert,
    pub harrier: Alert,
    pub fields: usize,
    pub diffs: Vec<FieldDiff>,
    pub text_equal: bool,
}

#[derive(Debug, Clone, Default)]
pub struct RuleRow {
    pub rule: String,
    pub file: String,
    pub falco: usize,
    pub harrier: usize,
    pub matched: usize,
    pub fields: usize,
    pub equal: usize,
}

pub struct Diff {
    pub pairs: Vec<Pair>,
    pub only_falco: Vec<(Alert, Option<&'static str>)>,
    pub only_harrier: Vec<(Alert, Option<&'static str>)>,
    pub rows: Vec<RuleRow>,
    /// Alerts outside the workload (other processes on the machine), per sensor.
    pub ignored: (usize, usize),
}

fn parse(v: &Value, cap: &Capture) -> Alert {
    let f = v["output_fields"].as_object().cloned().unwrap_or_default();
    let time = f.get("evt.time").and_then(|t| t.as_u64()).unwrap_or(0);
    let output = v["output"].as_str().unwrap_or("");
    // "HH:MM:SS.nnnnnnnnn: Priority text": the text after the priority.
    let text = output.split_once(": ").map_or(output, |(_, r)| r);
    let text = text.split_once(' ').map_or("", |(_, r)| r).to_string();
    let step = cap
        .steps
        .iter()
        .find(|s| time >= s.start.saturating_sub(TIME_SLACK_NS) && time <= s.end + 300_000_000)
        .map(|s| s.name.clone());
    Alert {
        rule: v["rule"].as_str().unwrap_or("").to_string(),
        priority: v["priority"].as_str().unwrap_or("").to_string(),
        time,
        pid: f.get("proc.pid").and_then(|p| p.as_u64()),
        text,
        fields: f.into_iter().filter(|(k, _)| !HARNESS_FIELDS.contains(&k.as_str())).collect(),
        step,
        json: v.clone(),
    }
}

/// Is this alert the workload's: in its window and from a descendant of
/// `root` (the pid or an ancestor's, as appended)? Other processes of the
/// machine (other users' builds and tests) are counted apart, not compared.
fn ours(v: &Value, cap: &Capture) -> bool {
    let f = &v["output_fields"];
    let t = f["evt.time"].as_u64().unwrap_or(0);
    if t < cap.window.0 || t > cap.window.1 + 1_000_000_000 {
        return false;
    }
    HARNESS_FIELDS.iter().any(|k| f[*k].as_u64() == Some(cap.root_pid as u64))
}

/// Which rules file defines each rule (`- rule: NAME` lines).
fn rule_files(rules: &[String]) -> Result<BTreeMap<String, String>> {
    let mut m = BTreeMap::new();
    for f in rules {
        let text = std::fs::read_to_string(f).with_context(|| format!("reading {f}"))?;
        let file =
            std::path::Path::new(f).file_name().map_or(f.clone(), |n| n.to_string_lossy().into_owned());
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("- rule: ") {
                m.entry(name.trim().trim_matches('"').to_string()).or_insert_with(|| file.clone());
            }
        }
    }
    Ok(m)
}

/// Times the sensors take from different kernel clocks or moments (the event's
/// timestamp; a process's start: Falco's is the first clone exit it sees or
/// the task's start_time, Harrier's the fork tracepoint): equal within a slack.
fn time_slack(k: &str) -> Option<u64> {
    match k {
        "evt.time" => Some(TIME_SLACK_NS),
        "proc.pid.ts"
        | "proc.ppid.ts"
        | "proc.duration"
        | "proc.ppid.duration"
        | "container.start_ts"
        | "container.duration"
        | "proc.pidns_init_start_ts"
        | "proc.exe_ino.ctime_duration_proc_start" => Some(START_SLACK_NS),
        _ => None,
    }
}

/// See [`time_slack`]: a loaded machine may run a new child milliseconds
/// after its fork, and Falco's clone time is the child's first event.
pub const START_SLACK_NS: u64 = 20_000_000;

fn values_equal(k: &str, a: &Value, b: &Value) -> bool {
    if let Some(slack) = time_slack(k) {
        return match (a.as_u64(), b.as_u64()) {
            (Some(x), Some(y)) => x.abs_diff(y) <= slack,
            _ => a == b,
        };
    }
    a == b
}

pub fn compare(cap: &Capture, rules: &[String]) -> Result<Diff> {
    let files = rule_files(rules)?;
    let take = |vs: &[Value]| -> (Vec<Alert>, usize) {
        let (mine, other): (Vec<&Value>, Vec<&Value>) = vs.iter().partition(|v| ours(v, cap));
        (mine.into_iter().map(|v| parse(v, cap)).collect(), other.len())
    };
    let (falco, fi) = take(&cap.falco);
    let (mut harrier, hi) = take(&cap.harrier);
    let mut pairs = Vec::new();
    let mut only_falco = Vec::new();
    for f in falco {
        // The nearest unpaired Harrier alert of the same rule and process.
        let best = harrier
            .iter()
            .enumerate()
            .filter(|(_, h)| h.rule == f.rule && (f.pid.is_none() || h.pid == f.pid))
            .map(|(i, h)| (i, h.time.abs_diff(f.time)))
            .filter(|&(_, d)| d <= PAIR_WINDOW_NS)
            .min_by_key(|&(_, d)| d);
        match best {
            Some((i, _)) => {
                let h = harrier.remove(i);
                pairs.push(pair(f, h));
            }
            None => {
                let why = super::explain::only_falco(&f, cap);
                only_falco.push((f, why));
            }
        }
    }
    let only_harrier: Vec<_> = harrier
        .into_iter()
        .map(|h| {
            let why = super::explain::only_harrier(&h, cap);
            (h, why)
        })
        .collect();
    let mut rows: BTreeMap<String, RuleRow> = BTreeMap::new();
    fn row<'r>(
        rows: &'r mut BTreeMap<String, RuleRow>,
        files: &BTreeMap<String, String>,
        rule: &str,
    ) -> &'r mut RuleRow {
        rows.entry(rule.to_string()).or_insert_with(|| RuleRow {
            rule: rule.to_string(),
            file: files.get(rule).cloned().unwrap_or_else(|| "?".into()),
            ..Default::default()
        })
    }
    for p in &pairs {
        let r = row(&mut rows, &files, &p.falco.rule);
        r.falco += 1;
        r.harrier += 1;
        r.matched += 1;
        r.fields += p.fields;
        r.equal += p.fields - p.diffs.len();
    }
    for (a, _) in &only_falco {
        row(&mut rows, &files, &a.rule).falco += 1;
    }
    for (a, _) in &only_harrier {
        row(&mut rows, &files, &a.rule).harrier += 1;
    }
    Ok(Diff { pairs, only_falco, only_harrier, rows: rows.into_values().collect(), ignored: (fi, hi) })
}

fn pair(f: Alert, h: Alert) -> Pair {
    let mut keys: Vec<&String> = f.fields.keys().chain(h.fields.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut diffs = Vec::new();
    for k in &keys {
        let (a, b) = (
            f.fields.get(*k).cloned().unwrap_or(Value::Null),
            h.fields.get(*k).cloned().unwrap_or(Value::Null),
        );
        let missing = !f.fields.contains_key(*k) || !h.fields.contains_key(*k);
        if missing || !values_equal(k, &a, &b) {
            let why = super::explain::field(&f, k, &a, &b);
            diffs.push(FieldDiff { field: k.to_string(), falco: a, harrier: b, why });
        }
    }
    if f.priority != h.priority {
        let (a, b) = (Value::from(f.priority.clone()), Value::from(h.priority.clone()));
        diffs.push(FieldDiff {
            field: "priority".into(),
            why: super::explain::field(&f, "priority", &a, &b),
            falco: a,
            harrier: b,
        });
    }
    let text_equal = f.text == h.text;
    Pair { fields: keys.len() + 1, diffs, text_equal, falco: f, harrier: h }
}
