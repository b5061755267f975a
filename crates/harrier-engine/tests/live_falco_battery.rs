//! The battery (harrier_actions::battery: every rule behaviour falco-diff
//! runs) under a live sensor with Falco's three rule files and falco.yaml's
//! settings, and every alert against Falco's, recorded once from Falco 0.44.1
//! (tests/data/falco-battery.json): the same alerts per behaviour, and every
//! output field as Falco rendered it, after the run-to-run normalisations of
//! expected/normalise.rs. No Falco is needed.

mod common;
mod expected;

use common::*;
use expected::normalise::Run;
use harrier_actions::battery::{self, Behaviour, Tools, LINEAGE_FIELDS};
use harrier_capture::testing::bpf_available;
use harrier_falco::config::RunConfig;
use harrier_rules::ruleset::{RuleMatching, RuleSet};
use std::sync::mpsc;
use std::time::Duration;

/// falco.yaml's settings that shape alerts (the reference's: rule_matching
/// first, suggested output), with the lineage fields appended as falco-diff does.
fn config() -> RunConfig {
    let fields: String = LINEAGE_FIELDS.iter().map(|f| format!("      - \"{f}\"\n")).collect();
    let text = format!(
        "rule_matching: first\nappend_output:\n  - extra_fields:\n{fields}  - suggested_output: true\n"
    );
    RunConfig::parse("falco-diff.yaml", &text).expect("config")
}

fn rules() -> Option<RuleSet> {
    let dir = falco_rules_dir()?;
    let files: Vec<(String, String)> =
        ["falco_rules.yaml", "falco-incubating_rules.yaml", "falco-sandbox_rules.yaml"]
            .iter()
            .map(|f| {
                let p = dir.join(f);
                (
                    p.display().to_string(),
                    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
                )
            })
            .collect();
    Some(RuleSet::load(&files, &config().load_options()).unwrap_or_else(|d| panic!("rules load: {d:?}")))
}

/// Behaviours that write where a test guest cannot (its /usr and /root are the
/// host's, read-only): run only where that directory is writable.
const WRITES_TO: [(&str, &str); 6] = [
    ("write-usr-bin", "/usr/bin"),
    ("rename-usr-bin", "/usr/bin"),
    ("mkdir-usr-bin", "/usr/bin"),
    ("write-root", "/root"),
    ("read-root-ssh", "/root"),
    ("write-authorized-keys", "/root"),
];

fn writable(dir: &str) -> bool {
    let p = std::path::Path::new(dir).join(format!(".harrier-probe-{}", std::process::id()));
    let ok = std::fs::write(&p, "").is_ok();
    let _ = std::fs::remove_file(&p);
    ok
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Runs `behaviours` on a thread of their own while `drain` has the sensor
/// read the rings (and at once whenever a container's behaviour is done, while
/// the container exists); returns each behaviour's start time (ns), the
/// last one AFTER's (Tools removing what they made).
fn run_battery(behaviours: Vec<&'static Behaviour>, drain: &mut dyn FnMut()) -> Vec<(String, u64)> {
    enum Msg {
        Ready(mpsc::SyncSender<()>),
    }
    let (tx, rx) = mpsc::channel();
    // Named as the process (a child it forks without exec has the name of the
    // thread that forked it, and is the runner's copy: normalise.rs, runner-copy).
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default().trim().to_string();
    let worker = std::thread::Builder::new()
        .name(comm)
        .spawn(move || {
            // The first behaviour's window opens before Tools::new (which makes files
            // the rules see); what came earlier is the sensor's own start.
            let mut starts = vec![(behaviours[0].name.to_string(), now_ns())];
            let tools = Tools::new().expect("battery tools");
            let ready = tx.clone();
            tools.on_container_ready(Box::new(move || {
                let (ack, wait) = mpsc::sync_channel(0);
                if ready.send(Msg::Ready(ack)).is_ok() {
                    let _ = wait.recv();
                }
            }));
            let mut failed = Vec::new();
            for (i, b) in behaviours.into_iter().enumerate() {
                if i > 0 {
                    starts.push((b.name.to_string(), now_ns()));
                }
                if let Err(e) = (b.run)(&tools) {
                    failed.push(format!("{}: {e:#}", b.name));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            starts.push((expected::AFTER.to_string(), now_ns()));
            drop(tools);
            drop(tx);
            (starts, failed)
        })
        .expect("the battery's thread");
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Msg::Ready(ack)) => {
                drain();
                let _ = ack.send(());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => drain(),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let (starts, failed) = worker.join().expect("the battery's thread");
    assert!(failed.is_empty(), "behaviours failed:\n{}", failed.join("\n"));
    starts
}

/// The behaviour an alert at `t` belongs to: the last one started by then
/// (None: before the battery).
fn behaviour_at(starts: &[(String, u64)], t: u64) -> Option<String> {
    starts.iter().rev().find(|(_, s)| *s <= t).map(|(n, _)| n.clone())
}

/// The test leads a session of its own, so proc.sname of its children is its
/// own name. The session it is started in is whatever ran it: under CI the
/// name /proc gave the test for that leader did not match the one Harrier
/// reported (`process_api`). setsid fails, and the inherited session stays,
/// where a shell made the test a process-group leader.
fn lead_own_session() {
    // SAFETY: setsid takes no arguments and touches no memory of ours.
    unsafe { libc::setsid() };
}

fn this_run() -> Run {
    let r = harrier_actions::battery::Runner::this_process().expect("the runner's facts");
    Run {
        pid: std::process::id() as u64,
        session: r.session,
        cwd: r.cwd,
        usr_overlay: r.usr_overlay,
        cgroup2: r.cgroup2,
        own: Vec::new(),
    }
}

#[test]
fn every_battery_alert_has_falcos_output_fields() {
    if !bpf_available() {
        return;
    }
    let Some(rules) = rules() else { return };
    let rec = expected::recorded();
    let mut skipped = Vec::new();
    let behaviours: Vec<&'static Behaviour> = battery::all()
        .into_iter()
        .filter(|b| match WRITES_TO.iter().find(|(n, _)| *n == b.name) {
            Some((_, dir)) if !writable(dir) => {
                skipped.push(format!("{} ({dir} is read-only here)", b.name));
                false
            }
            _ => true,
        })
        .collect();
    if !skipped.is_empty() {
        eprintln!("note: not run: {}", skipped.join(", "));
    }
    let mut names: Vec<String> = behaviours.iter().map(|b| b.name.to_string()).collect();
    // What Tools removes after the battery depends on every behaviour having run.
    if skipped.is_empty() {
        names.push(expected::AFTER.to_string());
    }
    lead_own_session();
    let mut starts = Vec::new();
    // As much ring as falco-diff gives harrier run: the whole machine's events
    // pass the kernel filter, and none of the battery's may be lost.
    let ring = Some(16 << 20);
    let (alerts, _) = run_live_sized(rules, RuleMatching::First, true, ring, |drain| {
        starts = run_battery(behaviours, drain)
    });
    let mut run = this_run();
    let mut not_compared = std::collections::BTreeMap::new();
    let harrier: Vec<expected::Alert> = alerts
        .iter()
        .filter(|a| expected::normalise::Lineage::of(&a.output_fields, &run).runner_level.is_some())
        .filter(|a| match run.only_here(&a.rule, &a.output_fields) {
            Some(why) => {
                *not_compared.entry(why).or_insert(0usize) += 1;
                false
            }
            None => true,
        })
        .filter_map(|a| {
            Some(expected::Alert {
                behaviour: behaviour_at(&starts, a.time_ns)?,
                rule: a.rule.clone(),
                priority: a.priority.to_string(),
                fields: a.output_fields.clone(),
            })
        })
        .collect();
    run.learn(harrier.iter().map(|a| &a.fields));
    if !not_compared.is_empty() {
        eprintln!("note: alerts of this machine only, not compared: {not_compared:?}");
    }
    let out = expected::compare(&rec.alerts, &rec.run, &harrier, &run, &names);
    eprintln!(
        "{} of Falco's alerts matched, {} fields compared, differences explained: {:?} ({})",
        out.matched, out.fields, out.pinned, rec.about
    );
    let rules: Vec<String> =
        expected::normalise::RULES.iter().map(|r| format!("  {}: {}", r.name, r.why)).collect();
    assert!(
        out.problems.is_empty(),
        "{} differences from Falco:\n{}\n(values normalised first, expected/normalise.rs:\n{})",
        out.problems.len(),
        out.problems.join("\n"),
        rules.join("\n")
    );
    let expected = rec.alerts.iter().filter(|a| names.contains(&a.behaviour)).count();
    assert_eq!(out.accounted, expected, "every recorded alert matched or explained");
}
