//! `--expected FILE`: Falco's alerts of the battery, kept as the expected data
//! of Harrier's test (harrier-engine/tests/live_falco_battery.rs), which needs
//! no Falco. Every output field as Falco rendered it, with the lineage fields
//! that tell the test which process ran the battery; proc.env keeps only the
//! battery's own variables (the rest is this machine's environment).

use super::compare::Diff;
use super::Capture;
use anyhow::{Context, Result};
use harrier_actions::battery::ENV_SET;
use serde_json::{json, Value};
use std::fmt::Write;
use std::path::Path;

/// The behaviour name the test gives what happens after the last behaviour.
const AFTER: &str = "(after the battery)";

pub fn write(path: &Path, cap: &Capture, d: &Diff) -> Result<()> {
    let falco = d.pairs.iter().map(|p| &p.falco).chain(d.only_falco.iter().map(|(a, _)| a));
    let mut alerts: Vec<(u64, Value)> = falco
        .map(|a| {
            let mut fields = a.json["output_fields"].as_object().cloned().unwrap_or_default();
            if let Some(Value::String(env)) = fields.get_mut("proc.env") {
                *env = own_env(env);
            }
            let v = json!({"behaviour": behaviour_at(cap, a.time), "rule": a.rule, "priority": a.priority, "fields": fields});
            (a.time, v)
        })
        .collect();
    alerts.sort_by_key(|(t, _)| *t);
    let r = harrier_actions::battery::Runner::this_process()?;
    let runner = json!({
        "pid": cap.root_pid,
        "session": r.session,
        "cwd": r.cwd,
        "usr_overlay": r.usr_overlay,
        "cgroup2": r.cgroup2,
    });
    let recorded = format!(
        "Falco 0.44.1 (libs 0.25.4, modern_ebpf, container plugin 0.7.1), harrier-bench falco-diff --workload battery, {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    let mut s =
        format!("{{\n\"recorded\": {},\n\"runner\": {runner},\n\"alerts\": [\n", Value::from(recorded));
    for (i, (_, a)) in alerts.iter().enumerate() {
        let _ = writeln!(s, "{a}{}", if i + 1 < alerts.len() { "," } else { "" });
    }
    s.push_str("]}\n");
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

/// The battery's own variables of a proc.env value.
fn own_env(env: &str) -> String {
    let own = |kv: &&str| kv.split_once('=').is_some_and(|(k, _)| ENV_SET.contains(&k));
    env.split(' ').filter(own).collect::<Vec<_>>().join(" ")
}

/// The behaviour an alert belongs to as the test attributes them: the last one
/// started by then (the first for what came before), AFTER past the last's end.
fn behaviour_at(cap: &Capture, t: u64) -> String {
    match cap.steps.last() {
        Some(last) if t > last.end => AFTER.to_string(),
        _ => cap
            .steps
            .iter()
            .rev()
            .find(|s| s.start <= t)
            .or(cap.steps.first())
            .map_or(String::new(), |s| s.name.clone()),
    }
}
