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
