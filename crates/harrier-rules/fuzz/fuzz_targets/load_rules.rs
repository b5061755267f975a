//! Any text as a rules file: loading gives a rule set or diagnostics, never panics; a
//! loaded set evaluates a few events and formats their outputs.
#![no_main]

use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use harrier_rules::testing::{FakeEvent, Owned};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let files = [("fuzz.yaml", text)];
    let opts = LoadOptions { rule_matching: RuleMatching::All, ..Default::default() };
    let rs = match RuleSet::load(&files, &opts) {
        Ok(rs) => rs,
        Err(diags) => {
            assert!(!diags.is_empty());
            for d in &diags {
                let _ = d.to_string();
            }
            return;
        }
    };
    let _ = rs.check_report().to_string();
    let events = [
        FakeEvent::new("openat")
            .set("fd.name", "/etc/shadow")
            .set("proc.name", "cat")
            .set("evt.arg.flags", Owned::Flags(0o1101, "open_flags"))
            .set("evt.rawres", 3i64),
        FakeEvent::new("execve")
            .set("proc.name", "sh")
            .set("proc.pname", "nginx")
            .set_all("proc.aname", vec!["nginx".into(), "init".into()]),
    ];
    for ev in &events {
        rs.evaluate(ev, |r| {
            let _ = r.format_output(ev);
        });
    }
});
