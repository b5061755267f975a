//! Per-event evaluation does not allocate: Falco's stable rules (or the default set) over a
//! mix of events, with a counting global allocator. Also prints the ns per event.

mod common;

use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
#[global_allocator]
static A: harrier_alloc_count::Counting = harrier_alloc_count::Counting;

/// CPU time of this thread: unlike wall time it does not count the time other jobs on a
/// busy machine take the CPU away.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn allocations() -> u64 {
    harrier_alloc_count::this_thread().allocations
}

fn run(name: &str, files: &[(String, String)]) {
    let opts = LoadOptions { rule_matching: RuleMatching::All, ..Default::default() };
    let rs = RuleSet::load(files, &opts).unwrap_or_else(|d| panic!("{d:?}"));
    if files.iter().all(|(n, _)| n == "dns.yaml") {
        rs.dns().refresh(); // local names only: Falco's own would ask the network
    }
    let events = common::event_mix();
    let mut matches = 0usize;
    // Warm up: regex caches and rendered flag names are built on first use.
    for ev in &events {
        matches += rs.evaluate(ev, |_| {});
    }
    let before = allocations();
    let rounds = 20000;
    let t = thread_cpu_ns();
    for _ in 0..rounds {
        for ev in &events {
            matches += rs.evaluate(ev, |_| {});
        }
    }
    let el = thread_cpu_ns() - t;
    let after = allocations();
    assert_eq!(after - before, 0, "{name}: evaluation allocated {} times", after - before);
    // The engine's path: each rule on its own, with the per-event memo of shared checks.
    let mut memo = rs.memo();
    let before = allocations();
    for ev in &events {
        memo.next_event();
        for &i in rs.candidates(harrier_rules::value::EventSource::event_type(ev)) {
            rs.rule_matches_memo(i, ev, &memo);
        }
    }
    let after = allocations();
    assert_eq!(after - before, 0, "{name}: evaluation with the memo allocated {} times", after - before);
    assert!(matches > 0, "{name}: the mix should trigger some rules");
    let n = rounds * events.len();
    println!(
        "{name}: {} events, {:.0} ns CPU/event evaluation (this build), {} matches",
        n,
        el as f64 / n as f64,
        matches
    );
}

#[test]
fn evaluation_does_not_allocate() {
    run("default rules", &[("harrier_rules.yaml".into(), harrier_rules::DEFAULT_RULES.into())]);
    if let Some(files) = common::read_falco(&["falco_rules.yaml"]) {
        run("falco stable rules", &files);
    }
    // A name compared with the fd's address (fd.sip.name), resolved: a read-locked lookup.
    let rule = "- rule: api server\n  desc: d\n  condition: evt.type = connect and fd.sip.name in (localhost, 1.1.1.1)\n  output: o\n  priority: NOTICE\n";
    run("resolved names", &[("dns.yaml".into(), rule.into())]);
}

/// Where the time goes, per event of the mix (printed; run with --release --nocapture).
#[test]
fn per_event_cost() {
    let Some(files) = common::read_falco(&["falco_rules.yaml"]) else { return };
    let rs = RuleSet::load(&files, &LoadOptions::default()).unwrap();
    for ev in common::event_mix() {
        let t = thread_cpu_ns();
        for _ in 0..20000 {
            rs.evaluate(&ev, |_| {});
        }
        let ns = (thread_cpu_ns() - t) as f64 / 20000.0;
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
            let t = thread_cpu_ns();
            for _ in 0..20000 {
                rs.rule_matches(i, &ev);
            }
            let ns = (thread_cpu_ns() - t) as f64 / 20000.0;
            println!("{:>8} {:>7.0} ns {}", ev.ty.name(), ns, rs.rule(i).name);
        }
    }
}

/// The cost of one comparison (diagnostic: `--ignored --nocapture`).
#[test]
#[ignore]
fn one_check_cost() {
    use harrier_rules::testing::FakeEvent;
    for (what, cond) in [
        ("type only", "evt.type = execve"),
        ("1 startswith", "evt.type = execve and proc.exe startswith /dev/shm/"),
        ("4 startswith", "evt.type = execve and (proc.exe startswith /dev/shm/ or proc.cwd startswith /dev/shm/ or proc.args startswith /dev/shm or proc.name startswith /dev/shm)"),
        ("1 in", "evt.type = execve and proc.name in (a, b, c, d)"),
    ] {
        let y = format!("- rule: r\n  desc: d\n  condition: {cond}\n  output: o\n  priority: INFO\n");
        let rs = RuleSet::load(&[("t.yaml", y.as_str())], &LoadOptions::default()).unwrap();
        let ev = common::with_proc(FakeEvent::new("execve"), "ls", "/usr/bin/ls", "ls -l", "bash");
        let t = thread_cpu_ns();
        for _ in 0..1_000_000 {
            rs.evaluate(&ev, |_| {});
        }
        println!("{what}: {:.1} ns", (thread_cpu_ns() - t) as f64 / 1e6);
    }
}
