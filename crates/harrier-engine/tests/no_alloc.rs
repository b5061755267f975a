//! The whole per-event path of `harrier run` (decode, state, Falco's stable
//! rules, outputs) allocates nothing for events that raise no alert: the
//! vs-falco mix's sent events (a UDP socket, its connect from a new port each
//! time, its close) and a kept open and close, once warm.

mod common;

use common::falco_rules_dir;
use harrier_engine::state::EngineState;
use harrier_engine::Engine;
use harrier_outputs::{Limits, Outputs};
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use harrier_state::testing::{exec, fork, sockaddr_in as inet, syscall, P};
use std::sync::Arc;

#[global_allocator]
static A: harrier_alloc_count::Counting = harrier_alloc_count::Counting;

fn stable() -> Option<RuleSet> {
    let p = falco_rules_dir()?.join("falco_rules.yaml");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let opts = LoadOptions { supported: Arc::new(harrier_engine::source::supported), ..Default::default() };
    Some(RuleSet::load(&[(p.display().to_string(), text)], &opts).expect("the stable rules load"))
}

/// One iteration's events from thread tid at time ts.., its socket's local port `port`.
fn iteration(tid: u32, ts: u64, port: u16) -> Vec<Vec<u8>> {
    let (local, peer) = (inet(port, [127, 0, 0, 1]), inet(9_999, [127, 0, 0, 1]));
    vec![
        syscall(ts, tid, "openat", 3, &[("flags", P::I(0)), ("fullpath", P::B(b"/var/tmp/.load/f1"))]),
        syscall(ts + 1, tid, "close", 0, &[("fd", P::I(3))]),
        syscall(ts + 2, tid, "socket", 3, &[("domain", P::I(2)), ("type", P::I(2))]),
        syscall(
            ts + 3,
            tid,
            "connect",
            0,
            &[("fd", P::I(3)), ("peer", P::B(&peer)), ("local", P::B(&local))],
        ),
        syscall(ts + 4, tid, "close", 0, &[("fd", P::I(3))]),
    ]
}

#[test]
fn events_that_raise_no_alert_allocate_nothing_once_warm() {
    let Some(rules) = stable() else { return };
    let mut e = Engine::new(rules, EngineState::new(), Outputs::new(Limits::default()), RuleMatching::All);
    let tid = 4_300_001;
    e.on_event(&fork(1, 1, tid, tid, "init"));
    e.on_event(&exec(2, tid, tid, "load", "/"));
    let rounds: Vec<Vec<Vec<u8>>> =
        (0..200).map(|i| iteration(tid, 10 + i * 10, 40_000 + i as u16)).collect();
    for r in &rounds[..2] {
        for ev in r {
            e.on_event(ev); // warm-up: names interned, regex caches filled
        }
    }
    e.end_batch();
    let before = harrier_alloc_count::this_thread().allocations;
    for r in &rounds[2..] {
        for ev in r {
            e.on_event(ev);
        }
    }
    e.end_batch();
    let n = harrier_alloc_count::this_thread().allocations - before;
    assert_eq!(n, 0, "allocations in {} events", 198 * 5);
    let evaluated: u64 = e.active_rules().map(|(_, c)| c.evaluations).sum();
    assert!(evaluated >= 200 * 2, "the connects and opens reached the rules ({evaluated} evaluations)");
}
