//! `harrier run` live: it reloads its rule files on SIGHUP (the new rules
//! judge the next events, the state tables and the sensor stay), and with
//! its entry copies off still reads fd.nameraw; as `falco`, with
//! watch_config_files, an edited rules file swaps the rules the same way, and an edited
//! config applies what shapes the rules and names what waits for a restart.
//! Waits on lines the sensor prints, never on a clock.

mod common;

use common::{harrier_falco, harrier_run, wait_for};
use harrier_capture::testing::bpf_available;

fn rule(name: &str, marker: &str) -> String {
    format!(
        "- rule: {name}\n  desc: t\n  condition: evt.type = openat and fd.name = {marker}\n  \
         output: opened %fd.name\n  priority: WARNING\n"
    )
}

/// A fresh scratch folder `harrier-<name>-<pid>` with a marker file (the rules watch its
/// opens) and `rules.yaml` holding `rule(first, marker)`: (folder, marker, rules file).
fn scratch(name: &str, first: &str) -> (std::path::PathBuf, String, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("harrier-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("marker");
    std::fs::write(&marker, "x").unwrap();
    let marker = marker.to_str().unwrap().to_string();
    let rules = dir.join("rules.yaml");
    std::fs::write(&rules, rule(first, &marker)).unwrap();
    (dir, marker, rules)
}

#[test]
fn sighup_swaps_the_rules_and_keeps_running() {
    if !bpf_available() {
        return;
    }
    let (dir, marker, rules) = scratch("reload", "Before reload");
    let (mut child, out, err) = harrier_run(&["--json", "-r", rules.to_str().unwrap()]);
    wait_for(&err, "rules loaded");
    std::fs::read(&marker).unwrap();
    assert!(wait_for(&out, "\"rule\"").contains("Before reload"));

    std::fs::write(&rules, rule("After reload", &marker)).unwrap();
    unsafe { libc::kill(child.0.id() as i32, libc::SIGHUP) };
    wait_for(&err, "reloaded: 1 rules evaluated");
    std::fs::read(&marker).unwrap();
    let alert = wait_for(&out, "\"rule\"");
    assert!(alert.contains("After reload"), "{alert}");

    // A broken file keeps the old rules.
    std::fs::write(&rules, "- rule: [").unwrap();
    unsafe { libc::kill(child.0.id() as i32, libc::SIGHUP) };
    wait_for(&err, "reload failed, the old rules stay");
    std::fs::read(&marker).unwrap();
    assert!(wait_for(&out, "\"rule\"").contains("After reload"));

    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success(), "SIGINT ends it cleanly");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_entry_copies_fd_nameraw_is_read_at_exit() {
    if !bpf_available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("harrier-noentry-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let marker = dir.join("marker");
    std::fs::write(&marker, "x").unwrap();
    let rules = dir.join("rules.yaml");
    let rule = format!(
        "- rule: Raw name\n  desc: t\n  condition: evt.type = openat and fd.name = {}\n  \
         output: raw=%fd.nameraw name=%fd.name\n  priority: WARNING\n",
        marker.display()
    );
    std::fs::write(&rules, rule).unwrap();
    let (mut child, out, err) = harrier_run(&["--no-entry-copies", "-r", rules.to_str().unwrap()]);
    let collected = wait_for(&err, "collected:");
    assert!(collected.contains("openat (read at exit)"), "{collected}");
    wait_for(&err, "rules loaded");
    let raw = format!("{}/sub/../marker", dir.display());
    std::fs::read(&raw).unwrap();
    let alert = wait_for(&out, "raw=");
    assert!(alert.contains(&format!("raw={raw} name={}", marker.display())), "{alert}");

    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success(), "SIGINT ends it cleanly");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn falco_watches_its_rules_file_and_swaps_the_rules_live() {
    if !bpf_available() {
        return;
    }
    let (dir, marker, rules) = scratch("falco-watch", "Before edit");
    let cfg = dir.join("falco.yaml");
    std::fs::write(&cfg, "watch_config_files: true\njson_output: true\nstdout_output:\n  enabled: true\n")
        .unwrap();
    let (mut child, out, err) = harrier_falco(&[
        "-c",
        cfg.to_str().unwrap(),
        "-r",
        rules.to_str().unwrap(),
        "-o",
        "engine.kind=modern_ebpf",
    ]);
    wait_for(&err, "rules loaded");
    std::fs::read(&marker).unwrap();
    assert!(wait_for(&out, "\"rule\"").contains("Before edit"));

    std::fs::write(&rules, rule("After edit", &marker)).unwrap();
    wait_for(&err, "SIGHUP received, restarting");
    wait_for(&err, "reloaded: 1 rules evaluated");
    std::fs::read(&marker).unwrap();
    let alert = wait_for(&out, "\"rule\"");
    assert!(alert.contains("After edit"), "{alert}");

    // The config itself: its priority applies in place (the Warning rule is no longer
    // evaluated); a key only a restart applies is named.
    let edited =
        "watch_config_files: true\njson_output: false\npriority: error\nstdout_output:\n  enabled: true\n";
    std::fs::write(&cfg, edited).unwrap();
    wait_for(&err, "reloaded: 0 rules evaluated");
    let note = wait_for(&err, "applied at the next start");
    assert!(note.ends_with(": json_output"), "{note}");

    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success(), "SIGINT ends it cleanly");
    wait_for(&err, "rules reloaded 2 time(s) in place");
    assert!(wait_for(&err, "event drop detected").contains("0 occurrences"), "Falco's closing lines");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_alert_of_a_capture_rule_writes_the_events_that_follow_to_a_file() {
    if !bpf_available() {
        return;
    }
    let (dir, marker, rules) = scratch("capture-on-alert", "Captured");
    let capturing = rule("Captured", &marker) + "  capture: true\n  capture_duration: 60000\n";
    std::fs::write(&rules, capturing).unwrap();
    let prefix = dir.join("cap").display().to_string();
    let cfg = dir.join("falco.yaml");
    let text =
        format!("capture:\n  enabled: true\n  mode: rules\n  path_prefix: {prefix}\njson_output: true\n");
    std::fs::write(&cfg, text).unwrap();
    let (mut child, out, err) = harrier_falco(&["-c", cfg.to_str().unwrap(), "-r", rules.to_str().unwrap()]);
    wait_for(&err, "rules loaded");
    std::fs::read(&marker).unwrap();
    assert!(wait_for(&out, "\"rule\"").contains("Captured"));
    let started = wait_for(&err, "capture on alert: writing");
    let path = started.rsplit(' ').next().unwrap().to_string();
    assert!(path.starts_with(&prefix) && path.ends_with(".hrcap"), "{started}");
    std::fs::read(&marker).unwrap(); // a second open, inside the capture's minute
    assert!(wait_for(&out, "\"rule\"").contains("Captured"));
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success());
    wait_for(&err, &format!("wrote {path}"));
    let read = std::process::Command::new(common::HARRIER).args(["read", &path]).output().unwrap();
    let text = String::from_utf8_lossy(&read.stdout);
    let opens = text.lines().filter(|l| l.contains("openat") && l.contains(&marker)).count();
    assert_eq!(opens, 2, "the triggering open and the next: {text}");
    assert_eq!(
        std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("cap_"))
            .count(),
        1,
        "one file: the second alert extended it"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn metrics_snapshots_under_a_live_sensor_count_events_and_matches() {
    if !bpf_available() {
        return;
    }
    let (dir, marker, rules) = scratch("metrics-live", "Snapshot rule");
    let file = dir.join("stats.jsonl");
    let cfg = dir.join("m.yaml");
    std::fs::write(
        &cfg,
        format!(
            "json_output: true\nmetrics:\n  enabled: true\n  interval: 500ms\n  output_rule: true\n  \
             output_file: {}\n",
            file.display()
        ),
    )
    .unwrap();
    let (mut child, out, err) = harrier_run(&["-c", cfg.to_str().unwrap(), "-r", rules.to_str().unwrap()]);
    wait_for(&err, "rules loaded");
    std::fs::read(&marker).unwrap();
    wait_for(&out, "Snapshot rule");
    // The first snapshot taken after the match counts it, with the events seen.
    let snap = loop {
        let l = wait_for(&out, "Falco internal: metrics snapshot");
        let j: serde_json::Value = serde_json::from_str(&l).unwrap();
        if j["output_fields"]["falco.rules.matches_total"].as_u64() > Some(0) {
            break j;
        }
    };
    let f = &snap["output_fields"];
    assert_eq!((&snap["priority"], &snap["source"]), (&"Informational".into(), &"internal".into()));
    assert_eq!(f["falco.rules.Snapshot_rule"].as_u64(), Some(1), "{f}");
    assert!(f["scap.n_evts"].as_u64().unwrap() > 0 && f["falco.num_evts"].as_u64().unwrap() > 0, "{f}");
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success());
    let lines = std::fs::read_to_string(&file).unwrap();
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(last["output_fields"]["falco.rules.Snapshot_rule"].as_u64(), Some(1), "{lines}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Opens and closes `path` at about `rate` opens per second until `stop`.
fn load(path: std::path::PathBuf, rate: u64, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> u64 {
    let (start, mut n) = (std::time::Instant::now(), 0u64);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        for _ in 0..100 {
            drop(std::fs::File::open(&path));
        }
        n += 100;
        let due = std::time::Duration::from_secs_f64(n as f64 / rate as f64);
        if let Some(ahead) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
    n
}

#[test]
fn reloads_under_load_lose_no_alert_and_drop_no_event() {
    if !bpf_available() {
        return;
    }
    use std::sync::{atomic::AtomicBool, Arc};
    let (dir, marker, rules) = scratch("reload-load", "Marker");
    let stats = dir.join("stats.jsonl");
    let noise = dir.join("noise");
    std::fs::write(&noise, "x").unwrap();
    // Every open reaches the rules (no kernel filter): ~100K syscalls/s
    // (50K opens and their closes), scaled down under emulation.
    let rate = 50_000 / harrier_capture::testing::scale() as u64;
    let (mut child, out, err) = harrier_run(&[
        "--json",
        "--no-kernel-filter",
        "-r",
        rules.to_str().unwrap(),
        "--stats-file",
        stats.to_str().unwrap(),
        "--stats-interval",
        "100",
    ]);
    wait_for(&err, "rules loaded");
    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let stop = stop.clone();
        std::thread::spawn(move || load(noise, rate, stop))
    };
    let reloads = 8;
    for i in 0..reloads {
        unsafe { libc::kill(child.0.id() as i32, libc::SIGHUP) };
        wait_for(&err, "reloaded: 1 rules evaluated");
        // One marked open per reload, right after it: its alert must come.
        std::fs::read(&marker).unwrap();
        let alert = wait_for(&out, "\"rule\"");
        assert!(alert.contains("Marker"), "reload {i}: {alert}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    let opens = loader.join().unwrap();
    eprintln!("load: {opens} opens (+ closes), until {:?} ago", t0.elapsed());
    std::thread::sleep(std::time::Duration::from_millis(300)); // a stats line after the load
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success(), "SIGINT ends it cleanly");

    let text = std::fs::read_to_string(&stats).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["reloads"], reloads, "{last}");
    assert_eq!(last["cur"]["drops"], 0, "events dropped under the load: {last}");
    assert!(last["cur"]["events"].as_u64().unwrap() >= opens, "{opens} opens, {last}");
    std::fs::remove_dir_all(&dir).unwrap();
}
