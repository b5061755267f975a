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
