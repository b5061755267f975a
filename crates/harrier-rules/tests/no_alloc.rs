//! Per-event evaluation does not allocate: Falco's stable rules (or the default set) over a
//! mix of events, with a counting global allocator. Also prints the ns per event.

mod common;

use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocations() -> u64 {
    COUNT.with(|c| c.get())
}

fn run(name: &str, files: &[(String, String)]) {
    let opts = LoadOptions { rule_matching: RuleMatching::All, ..Default::default() };
    let rs = RuleSet::load(files, &opts).unwrap_or_else(|d| panic!("{d:?}"));
    let events = common::event_mix();
    let mut matches = 0usize;
    // Warm up: regex caches and rendered flag names are built on first use.
    for ev in &events {
        matches += rs.evaluate(ev, |_| {});
    }
    let before = allocations();
    let rounds = 2000;
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        for ev in &events {
            matches += rs.evaluate(ev, |_| {});
        }
    }
    let el = t.elapsed();
    let after = allocations();
    assert_eq!(after - before, 0, "{name}: evaluation allocated {} times", after - before);
    assert!(matches > 0, "{name}: the mix should trigger some rules");
    let n = rounds * events.len();
    println!(
        "{name}: {} events, {:.0} ns/event evaluation (this build), {} matches",
        n,
        el.as_nanos() as f64 / n as f64,
        matches
    );
}

#[test]
fn evaluation_does_not_allocate() {
    run("default rules", &[("harrier_rules.yaml".into(), harrier_rules::DEFAULT_RULES.into())]);
    if let Some(files) = common::read_falco(&["falco_rules.yaml"]) {
        run("falco stable rules", &files);
    }
}

/// Where the time goes, per event of the mix (printed; run with --release --nocapture).
#[test]
fn per_event_cost() {
    let Some(files) = common::read_falco(&["falco_rules.yaml"]) else { return };
    let rs = RuleSet::load(&files, &LoadOptions::default()).unwrap();
    for ev in common::event_mix() {
        let t = std::time::Instant::now();
        for _ in 0..2000 {
            rs.evaluate(&ev, |_| {});
        }
        let ns = t.elapsed().as_nanos() as f64 / 2000.0;
        let cands = rs.candidates(harrier_rules::value::EventSource::event_type(&ev)).len();
        println!("{:>8}: {ns:>7.0} ns, {cands} candidate rules", ev.ty.name());
    }
}

/// Each candidate rule's cost on each event of the mix (diagnostic: `--ignored --nocapture`).
#[test]
#[ignore]
fn per_rule_cost() {
    let Some(files) = common::read_falco(&["falco_rules.yaml"]) else { return };
    let rs = RuleSet::load(&files, &LoadOptions::default()).unwrap();
    for ev in common::event_mix() {
        for &i in rs.candidates(harrier_rules::value::EventSource::event_type(&ev)) {
            let t = std::time::Instant::now();
            for _ in 0..2000 {
                rs.rule_matches(i, &ev);
            }
            let ns = t.elapsed().as_nanos() as f64 / 2000.0;
            println!("{:>8} {:>7.0} ns {}", ev.ty.name(), ns, rs.rule(i).name);
        }
    }
}
