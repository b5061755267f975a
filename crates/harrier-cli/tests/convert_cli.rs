//! `harrier convert IN OUT`: a legacy capture becomes a Harrier capture file
//! that `read`, `inspect` and `run --replay` take like any other, holding
//! exactly the syscall events `convert --json` shows.

use std::path::PathBuf;
use std::process::Command;

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

/// One of Falco's public legacy captures (harrier_scap::testing::scap_dir).
fn capture(name: &str) -> Option<PathBuf> {
    harrier_scap::testing::scap_dir().map(|d| d.join(name))
}

fn harrier(args: &[&str]) -> String {
    let out = Command::new(HARRIER).args(args).output().unwrap();
    assert!(out.status.success(), "harrier {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_converted_capture_reads_back_event_for_event() {
    let Some(input) = capture("curl_google.scap") else { return };
    let input = input.to_str().unwrap();
    let file = std::env::temp_dir().join(format!("harrier-convert-{}.hrcap", std::process::id()));
    let file_s = file.to_str().unwrap();
    let stats = harrier(&["convert", input, file_s, "--stats"]);
    assert!(stats.contains("TOTAL"), "{stats}");

    let json = harrier(&["convert", input, "--json"]);
    let syscalls: Vec<&str> = json.lines().filter(|l| l.contains("\"syscall\":")).collect();
    let connects = syscalls.iter().filter(|l| l.contains("\"syscall\":\"connect\"")).count();
    assert!(syscalls.len() > 500 && connects > 0, "{} syscall events", syscalls.len());

    // Foreign events too: legacy events without a typed form, and the proc-info
    // and user/group changes met after the start snapshot.
    let later =
        ["\"foreign\":", "\"snapshot\":\"ProcInfo", "\"snapshot\":\"UserAdded", "\"snapshot\":\"GroupAdded"];
    let records = syscalls.len() + json.lines().filter(|l| later.iter().any(|k| l.contains(k))).count();
    assert_eq!(harrier(&["read", file_s]).lines().count(), records, "every record reads back");
    let inspect = harrier(&["inspect", file_s]);
    assert!(inspect.contains(&format!("events:     {records} syscall events")), "{inspect}");
    assert!(inspect.contains("end:        complete"), "{inspect}");
    assert!(inspect.contains("host:       ip-10-0-0-79"), "the legacy machine block's host: {inspect}");
    let read = harrier(&["read", file_s, "--filter", "evt.type = connect"]);
    assert_eq!(read.lines().count(), connects, "{read}");
    // The rules run on it as on a live capture (no alert expected from curl's syscalls).
    harrier(&["run", "--replay", file_s]);

    // Wire records (--no-pack) read back the same events from unpacked blocks.
    let wire = file.with_extension("wire.hrcap");
    let wire_s = wire.to_str().unwrap();
    harrier(&["convert", input, wire_s, "--no-pack"]);
    assert_eq!(harrier(&["read", wire_s]), harrier(&["read", file_s]), "packed and wire files read alike");
    let packed_blocks = |f: &str| -> u64 {
        let j: serde_json::Value = serde_json::from_str(&harrier(&["inspect", f, "--json"])).unwrap();
        j["packed_blocks"].as_u64().unwrap()
    };
    assert!(packed_blocks(file_s) > 0, "convert packs by default");
    assert_eq!(packed_blocks(wire_s), 0, "--no-pack");
    std::fs::remove_file(&file).unwrap();
    std::fs::remove_file(&wire).unwrap();
}

/// A generic exit of a legacy capture (the libs' event for syscalls they have no
/// table entry for) carries no return value: sysdig 0.29 shows `<NA>` for its
/// evt.res and evt.rawres. Converted, it has none either: `read` shows `<NA>`,
/// a filter on its result is false, and the rules see no evt.res/evt.rawres.
#[test]
fn a_legacy_exit_without_a_return_value_has_none_after_conversion() {
    let Some(input) = capture("curl_google.scap") else { return };
    let dir = std::env::temp_dir().join(format!("harrier-noret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.hrcap");
    let file_s = file.to_str().unwrap();
    harrier(&["convert", input.to_str().unwrap(), file_s]);
    // sysdig: 189 generic exits with <NA> results, among them mprotect's.
    let read = harrier(&["read", file_s]);
    let mprotect: Vec<&str> = read.lines().filter(|l| l.contains(" mprotect res=")).collect();
    assert!(!mprotect.is_empty(), "{read}");
    assert!(mprotect.iter().all(|l| l.contains(" mprotect res=<NA>")), "{mprotect:?}");
    let json = harrier(&["read", file_s, "--json", "--filter", "evt.type = mprotect"]);
    assert_eq!(json.lines().count(), mprotect.len());
    assert!(json.lines().all(|l| l.contains("\"ret\":null")), "{json}");
    for cond in ["evt.type = mprotect and evt.rawres exists", "evt.type = mprotect and evt.res = SUCCESS"] {
        assert_eq!(harrier(&["read", file_s, "--filter", cond]), "", "{cond}");
    }
    // Typed events keep theirs.
    assert!(!harrier(&["read", file_s, "--filter", "evt.type = connect and evt.rawres exists"]).is_empty());
    let rules = dir.join("r.yaml");
    std::fs::write(
        &rules,
        "- rule: mprotect result\n  desc: d\n  condition: evt.type = mprotect\n  output: res=%evt.res raw=%evt.rawres\n  priority: NOTICE\n",
    )
    .unwrap();
    let out = harrier(&["run", "--replay", file_s, "-r", rules.to_str().unwrap(), "--json"]);
    let alerts: Vec<serde_json::Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(alerts.len(), mprotect.len(), "{out}");
    for a in &alerts {
        assert!(a["output"].as_str().unwrap().ends_with("res=<NA> raw=<NA>"), "{a}");
        assert!(a["output_fields"]["evt.rawres"].is_null() && a["output_fields"]["evt.res"].is_null(), "{a}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
