//! What the engine evaluates: conditions narrowed to the rule's event types, shared checks
//! evaluated once per event (crate::memo). Same verdicts as the conditions as written, and
//! nothing carried over from one event to the next.

mod common;

use harrier_rules::expr::{Ctx, FlagCache};
use harrier_rules::ruleset::{LoadOptions, RuleSet};
use harrier_rules::testing::FakeEvent;
use harrier_rules::value::EventSource;

fn load(files: &[(String, String)]) -> RuleSet {
    RuleSet::load(files, &LoadOptions::default()).unwrap_or_else(|d| panic!("{d:?}"))
}

/// The rule's condition as written (no narrowing to its event types, no memo).
fn full_condition(rs: &RuleSet, i: u32, ev: &FakeEvent) -> bool {
    let flags = FlagCache::default();
    let cx = Ctx { src: ev, flags: &flags, memo: None };
    rs.rule(i).condition().is_some_and(|e| e.eval(&cx))
}

/// Every active rule on every event: the condition as written, the narrowed one (evt.type
/// tests folded), and the narrowed one with the memo all agree.
fn same_verdicts(name: &str, rs: &RuleSet, events: &[FakeEvent]) -> usize {
    for (n, ev) in events.iter().enumerate() {
        for r in rs.rules().iter().filter(|r| r.is_active()) {
            assert_eq!(
                full_condition(rs, r.index, ev),
                rs.rule_matches(r.index, ev),
                "{name}: rule '{}' on event {n} ({}): narrowed condition differs",
                r.name,
                ev.ty.name()
            );
        }
    }
    let mut memo = rs.memo();
    let mut hits = 0;
    // Twice through, so a result left over from an earlier event would show.
    for round in 0..2 {
        for (n, ev) in events.iter().enumerate() {
            memo.next_event();
            for &i in rs.candidates(ev.event_type()) {
                let plain = rs.rule_matches(i, ev);
                let memoised = rs.rule_matches_memo(i, ev, &memo);
                assert_eq!(
                    plain,
                    memoised,
                    "{name}: rule '{}' on event {n} ({}) in round {round}",
                    rs.rule(i).name,
                    ev.ty.name()
                );
                hits += plain as usize;
            }
        }
    }
    hits
}

#[test]
fn falco_stable_and_default_rules_give_the_same_verdicts() {
    let default = load(&[("harrier_rules.yaml".into(), harrier_rules::DEFAULT_RULES.into())]);
    assert!(default.shared_checks() > 0, "the default rules share checks (macros)");
    let hits = same_verdicts("default rules", &default, &common::event_mix());
    assert!(hits > 0, "the mix should trigger some default rules");
    if let Some(files) = common::read_falco(&["falco_rules.yaml"]) {
        let stable = load(&files);
        assert!(stable.shared_checks() > 0, "Falco's stable rules share checks (open_read...)");
        let hits = same_verdicts("falco stable rules", &stable, &common::event_mix());
        assert!(hits > 0, "the mix should trigger some stable rules");
    }
}

const TWO_RULES: &str = "
- macro: watched
  condition: fd.name in (/etc/shadow, /etc/sudoers)
- rule: a
  desc: d
  condition: evt.type = openat and watched and proc.name = cat
  output: o
  priority: WARNING
- rule: b
  desc: d
  condition: evt.type = openat and watched and not proc.name = cat
  output: o
  priority: WARNING
";

fn open(path: &str, proc: &str) -> FakeEvent {
    FakeEvent::new("openat").set("fd.name", path).set("proc.name", proc)
}

#[test]
fn a_shared_check_is_stored_for_one_event_only() {
    let rs = load(&[("t.yaml".into(), TWO_RULES.into())]);
    // `fd.name in (...)` and `proc.name = cat` are each used by both rules.
    assert_eq!(rs.shared_checks(), 2);
    let mut memo = rs.memo();
    let verdicts = |memo: &harrier_rules::memo::Memo, ev: &FakeEvent| {
        (rs.rule_matches_memo(0, ev, memo), rs.rule_matches_memo(1, ev, memo))
    };
    memo.next_event();
    assert_eq!(verdicts(&memo, &open("/etc/shadow", "cat")), (true, false));
    memo.next_event();
    assert_eq!(verdicts(&memo, &open("/tmp/x", "cat")), (false, false));
    memo.next_event();
    assert_eq!(verdicts(&memo, &open("/etc/sudoers", "vi")), (false, true));
    // Without next_event the previous event's results stand: the memo is really used.
    assert_eq!(verdicts(&memo, &open("/tmp/x", "cat")), (false, true));
}

#[test]
fn rules_without_common_checks_have_no_slots() {
    let rs = load(&[(
        "t.yaml".into(),
        "- rule: a\n  desc: d\n  condition: evt.type = openat and fd.name = /a\n  output: o\n  priority: INFO\n\
         - rule: b\n  desc: d\n  condition: evt.type = openat and fd.name = /b\n  output: o\n  priority: INFO\n"
            .into(),
    )]);
    assert_eq!(rs.shared_checks(), 0);
}
