//! Falco's own rule files load, and how many of their rules Harrier evaluates.

mod common;

use harrier_rules::ruleset::{LoadOptions, RuleSet, RuleStatus};

fn load(names: &[&str]) -> Option<RuleSet> {
    let files = common::read_falco(names)?;
    match RuleSet::load(&files, &LoadOptions::default()) {
        Ok(r) => Some(r),
        Err(d) => panic!("{}", d.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")),
    }
}

#[test]
fn stable_rules_all_evaluable() {
    let Some(rs) = load(&["falco_rules.yaml"]) else { return };
    let rep = rs.check_report();
    println!("{rep}");
    assert_eq!(rep.total(), 25);
    let bad: Vec<_> = rs
        .rules()
        .iter()
        .filter(|r| r.status != RuleStatus::Evaluable)
        .map(|r| (&r.name, &r.status))
        .collect();
    assert!(bad.is_empty(), "not evaluable: {bad:?}");
    assert_eq!(rep.evaluable(), 25);
    assert_eq!(rep.active(), 25);
    // Every rule is restricted to a few event types (none needs every syscall).
    for r in rs.rules() {
        assert!(!r.event_types.is_empty() && r.event_types.len() < 10, "{}: {:?}", r.name, r.event_types);
    }
    let attach = rs.event_types().syscall_names();
    println!("syscalls to attach: {attach:?}");
    for s in ["execve", "openat", "connect", "ptrace", "socket", "symlinkat", "linkat"] {
        assert!(attach.contains(&s), "{s} missing from {attach:?}");
    }
}

#[test]
fn incubating_and_sandbox_counts() {
    let Some(rs) = load(&["falco_rules.yaml", "falco-incubating_rules.yaml", "falco-sandbox_rules.yaml"])
    else {
        return;
    };
    let rep = rs.check_report();
    println!("{rep}");
    let per_file = |f: &str| {
        let rules: Vec<_> = rs.rules().iter().filter(|r| r.file.ends_with(f)).collect();
        let evaluable =
            rules.iter().filter(|r| matches!(r.status, RuleStatus::Evaluable | RuleStatus::Disabled)).count();
        let enabled = rules.iter().filter(|r| r.status == RuleStatus::Evaluable).count();
        let valueless = rules.iter().filter(|r| !r.valueless_fields.is_empty()).count();
        println!(
            "{f}: {} rules, {evaluable} evaluable, {enabled} enabled by default, {valueless} read Kubernetes fields (never set here)",
            rules.len()
        );
        (rules.len(), evaluable, enabled)
    };
    assert_eq!(per_file("/falco_rules.yaml"), (25, 25, 25));
    assert_eq!(per_file("/falco-incubating_rules.yaml"), (31, 31, 31));
    assert_eq!(per_file("/falco-sandbox_rules.yaml"), (37, 37, 25));
}

/// Falco's own stable rules fire on the behaviours they describe (fake events carrying the
/// fields their macros read), and stay quiet on ordinary events.
#[test]
fn stable_rules_fire_on_their_behaviours() {
    use common::with_proc;
    use harrier_rules::testing::{FakeEvent, Owned};
    let Some(files) = common::read_falco(&["falco_rules.yaml"]) else { return };
    let opts = LoadOptions { rule_matching: harrier_rules::ruleset::RuleMatching::All, ..Default::default() };
    let rs = RuleSet::load(&files, &opts).unwrap();
    let fired = |ev: &FakeEvent| {
        let mut v = Vec::new();
        rs.evaluate(ev, |r| v.push(r.name.clone()));
        v
    };
    let mix = common::event_mix();
    let got: Vec<Vec<String>> = mix.iter().map(fired).collect();
    for (ev, g) in mix.iter().zip(&got) {
        println!("{}: {g:?}", ev.ty.name());
    }
    assert_eq!(got[0], ["Read sensitive file untrusted"], "cat /etc/shadow");
    assert!(got[1].is_empty(), "ls opens libc");
    assert_eq!(got[2], ["Clear Log Activities"], "truncate /var/log/syslog");
    assert_eq!(got[4], ["Run shell untrusted"], "sh under nginx");
    assert!(got[5].is_empty(), "ls runs");
    assert_eq!(got[8], ["PTRACE attached to process"], "gdb attaches");
    assert!(got[9].is_empty(), "a read");

    let exec =
        |name: &str, exe: &str| with_proc(FakeEvent::new("execve"), name, exe, &format!("{name} x"), "bash");
    assert_eq!(fired(&exec("x", "/dev/shm/x")), ["Execution from /dev/shm"]);
    assert_eq!(
        fired(&exec("x", "/memfd:x (deleted)").set("proc.is_exe_from_memfd", true)),
        ["Fileless execution via memfd_create"]
    );
    let sym = with_proc(FakeEvent::new("symlinkat"), "ln", "/usr/bin/ln", "ln -s /etc/shadow /tmp/s", "bash")
        .set("evt.arg.target", "/etc/shadow")
        .set("evt.arg.linkpath", "/tmp/s");
    assert_eq!(fired(&sym), ["Create Symlink Over Sensitive Files"]);
    let pkt = with_proc(FakeEvent::new("socket"), "tcpdump", "/usr/bin/tcpdump", "tcpdump", "sh")
        .set("evt.arg.domain", Owned::Flags(17, "socket_family"))
        .set("container.id", "0123456789ab");
    assert_eq!(fired(&pkt), ["Packet socket created in container"]);
    assert!(fired(&pkt.clone().set("container.id", "host")).is_empty());
}
