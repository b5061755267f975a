//! Falco's own rule files (../shared/data/falco-rules, or FALCO_RULES_DIR) load, and how
//! many of their rules Harrier evaluates.

use harrier_rules::ruleset::{LoadOptions, RuleSet, RuleStatus};
use std::path::PathBuf;

/// FALCO_RULES_DIR, else the first `shared/data/falco-rules` above the crate (the project's
/// machines keep Falco's files there; they are not copied into the repository).
fn dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FALCO_RULES_DIR") {
        return Some(PathBuf::from(d));
    }
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        let c = p.join("shared/data/falco-rules");
        if c.join("falco_rules.yaml").exists() {
            return Some(c);
        }
        if !p.pop() {
            break;
        }
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("Falco's rule files not found: set FALCO_RULES_DIR");
    }
    eprintln!("note: Falco's rule files not found (set FALCO_RULES_DIR); skipped");
    None
}

fn load(names: &[&str]) -> Option<RuleSet> {
    let dir = dir()?;
    let files: Vec<(String, String)> = names
        .iter()
        .map(|n| {
            let p = dir.join(n);
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
            )
        })
        .collect();
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
        .filter(|r| !matches!(r.status, RuleStatus::Evaluable | RuleStatus::Disabled))
        .map(|r| (&r.name, &r.status))
        .collect();
    assert!(bad.is_empty(), "not evaluable: {bad:?}");
    assert_eq!(rep.evaluable(), 25);
}

#[test]
fn incubating_and_sandbox_counts() {
    let Some(rs) = load(&["falco_rules.yaml", "falco-incubating_rules.yaml", "falco-sandbox_rules.yaml"])
    else {
        return;
    };
    let rep = rs.check_report();
    println!("{rep}");
    for w in rs.warnings() {
        println!("{w}");
    }
}
