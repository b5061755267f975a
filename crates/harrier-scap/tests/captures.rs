//! Every legacy capture converts; what comes out is consistent with what
//! went in, block by block and event by event.

mod common;

use harrier_scap::Snapshot;
use harrier_schema::decode::{decode, Event};

#[test]
fn every_capture_converts_and_every_legacy_event_is_accounted_for() {
    let Some(dir) = common::scap_dir() else { return };
    for path in common::captures(&dir) {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let out = common::convert(&path);
        let mut metas = 0;
        for b in &out.events {
            let e = decode(b).unwrap_or_else(|e| panic!("{name}: a record does not decode: {e}"));
            metas += u64::from(matches!(e, Event::Meta(..)));
        }
        assert_eq!(metas, out.stats.lifecycle, "{name}: life-cycle records");
        if name == "curl_google.scap" {
            // curl's exec (its clone predates the capture: a fork from the
            // exit's ptid first) and its resolver thread's clone.
            assert_eq!(out.stats.lifecycle, 3, "{name}");
        }
        let t = out.stats.total();
        // Each legacy event is the source of one output, an enter merged into
        // its exit's output, or skipped with a reason. Snapshots from blocks
        // (processes, users, groups) are not events.
        let from_blocks: u64 = ["processes", "users", "groups"]
            .iter()
            .map(|k| out.stats.by_type.get(*k).map_or(0, |s| s.snapshot))
            .sum();
        let outputs = t.merged + t.exit_only + t.generic + t.foreign + t.snapshot - from_blocks;
        assert_eq!(
            out.stats.legacy_events,
            outputs + out.stats.enters_merged + t.skipped_total(),
            "{name}: legacy events vs outputs\n{}",
            out.stats.table()
        );
        assert_eq!(out.events.len() as u64, t.merged + t.exit_only + t.generic + metas, "{name}");
        assert!(out.snapshots.iter().any(|s| matches!(s, Snapshot::Process(_))), "{name}: no process list");
        eprintln!("{name}:\n{}", out.stats.table());
    }
}
