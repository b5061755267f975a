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
            // exit's ptid first), its resolver thread's clone, and the two
            // threads' procexits.
            assert_eq!(out.stats.lifecycle, 5, "{name}");
            assert_eq!(out.stats.by_type["procexit"].snapshot, 2, "{name}");
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

/// A legacy procexit becomes a life-cycle exit record (as the sensor's
/// sched_process_exit gives), never a foreign event, naming the thread's
/// process when the capture said which it was; replayed, it frees the thread.
#[test]
fn procexit_becomes_a_life_cycle_exit_that_frees_the_thread() {
    use harrier_schema::decode::Meta;
    let Some(dir) = common::scap_dir() else { return };
    let out = common::convert(&dir.join("cat_write.scap"));
    let st = &out.stats.by_type["procexit"];
    assert_eq!((st.foreign, st.snapshot), (0, 1), "{}", out.stats.table());
    let exits: Vec<(u32, u32)> = out
        .events
        .iter()
        .filter_map(|b| match decode(b).unwrap() {
            Event::Meta(h, Meta::Exit { pid }) => Some((h.tid, pid)),
            _ => None,
        })
        .collect();
    assert_eq!(exits.len(), 1, "{exits:?}");
    let (tid, pid) = exits[0];
    assert_ne!(tid, 0);
    // The process list names cat's thread: its pid is known.
    let listed = out.snapshots.iter().find_map(|s| match s {
        harrier_scap::Snapshot::Process(p) if p.tid == tid as u64 => Some(p.pid as u32),
        _ => None,
    });
    if let Some(p) = listed {
        assert_eq!(pid, p, "the exit names the listed process");
    }
    // Replayed into state tables that know the thread (never this machine's
    // /proc): the thread is there until the exit, gone a batch after it.
    let snap = harrier_state::Snapshot {
        processes: vec![harrier_state::snapshot::SnapProcess {
            pid: if pid != 0 { pid } else { tid },
            tids: vec![tid],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut state = harrier_state::State::from_snapshot(&snap);
    assert!(state.process(tid).is_some(), "thread {tid} known before its exit");
    for b in &out.events {
        state.apply(&decode(b).unwrap());
    }
    state.end_batch();
    state.end_batch();
    assert!(state.process(tid).is_none(), "thread {tid} freed after its exit");
}
