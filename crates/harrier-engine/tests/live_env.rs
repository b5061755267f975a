//! proc.env end to end under a live sensor, as event-generator's declarative
//! suites use it: a process started with a marker variable performs a rule's
//! action, and the alert's output_fields (appended by `append_output`, and
//! `%proc.env` in an output) carry its environment. A process exec'd before
//! the sensor started gets its environment from /proc instead.

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_outputs::Alert;
use harrier_rules::ruleset::{AppendOutput, LoadOptions, RuleMatching, RuleSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

/// A rule of the test's own whose output renders `%proc.env`, beside the defaults.
const RULE: &str = r#"
- rule: Env marker test open
  desc: an open of a file named for this test
  condition: evt.type in (open, openat) and fd.name endswith "/harrier-env-marker-target"
  output: marker open (env=%proc.env mark=%proc.env[HARRIER_TEST_MARK] file=%fd.name)
  priority: NOTICE
"#;

/// The rules with event-generator's append_output (proc.env in output_fields).
fn rules() -> RuleSet {
    let opts = LoadOptions {
        supported: Arc::new(harrier_engine::source::supported),
        append_output: vec![AppendOutput {
            extra_fields: vec![("proc.env".into(), None), ("proc.pid".into(), None)],
            ..Default::default()
        }],
        ..Default::default()
    };
    RuleSet::load(&[("harrier_rules.yaml", harrier_rules::DEFAULT_RULES), ("env.yaml", RULE)], &opts).unwrap()
}

/// Runs `work` under a live sensor (default rules, the test's rule, proc.env appended).
fn alerts_during(work: impl FnOnce()) -> Vec<Alert> {
    let rules = rules();
    assert!(harrier_engine::needs_env(&rules), "proc.env in the output fields: the state keeps environments");
    run_live(rules, RuleMatching::First, false, |_| work()).0
}

/// The test rule's alerts for this test's file (the tests run side by side,
/// and each sensor sees the machine).
fn marker_alerts<'a>(alerts: &'a [Alert], target: &std::path::Path) -> Vec<&'a Alert> {
    let t = target.to_str().unwrap();
    alerts.iter().filter(|a| a.rule == "Env marker test open" && field(a, "fd.name") == t).collect()
}

#[test]
fn an_alert_carries_the_environment_of_the_process_that_triggered_it() {
    if !bpf_available() {
        return;
    }
    let dir = harrier_actions::kit::Scratch::new("env").unwrap();
    let cat = dir.tool("/bin/cat", "hrcat-env").unwrap();
    let target = dir.path().join("harrier-env-marker-target");
    std::fs::write(&target, "x").unwrap();
    let alerts = alerts_during(|| {
        // A rule action (an untrusted read of /etc/shadow) and an open of
        // the test's own file, by processes exec'd with the marker.
        for file in [std::path::Path::new("/etc/shadow"), &target] {
            let st = Command::new(&cat)
                .arg(file)
                .env_clear()
                .env("HARRIER_TEST_MARK", "xyz")
                .env("PATH", "/usr/bin:/bin")
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(st.success(), "cat {}", file.display());
        }
    });
    let shadow: Vec<&Alert> = alerts
        .iter()
        .filter(|a| a.rule == "Read sensitive file untrusted" && field(a, "proc.name") == "hrcat-env")
        .collect();
    assert_eq!(shadow.len(), 1, "{alerts:#?}");
    assert_eq!(field(shadow[0], "proc.env"), "HARRIER_TEST_MARK=xyz PATH=/usr/bin:/bin", "appended proc.env");
    let own = marker_alerts(&alerts, &target);
    assert_eq!(own.len(), 1, "{alerts:#?}");
    assert!(
        own[0].output.contains("env=HARRIER_TEST_MARK=xyz PATH=/usr/bin:/bin mark=xyz"),
        "%proc.env and %proc.env[NAME] in the output text: {}",
        own[0].output
    );
    assert_eq!(field(own[0], "proc.env[HARRIER_TEST_MARK]"), "xyz");
}

#[test]
fn a_process_started_before_the_sensor_read_its_environment_from_proc() {
    if !bpf_available() {
        return;
    }
    let dir = harrier_actions::kit::Scratch::new("env-seed").unwrap();
    let target = dir.path().join("harrier-env-marker-target");
    std::fs::write(&target, "x").unwrap();
    // A shell exec'd before the sensor starts, with the marker: no exec
    // event tells its environment. It opens the file only when told on stdin.
    let mut c = Command::new("/bin/sh")
        .arg("-c")
        .arg("read go; exec 3<\"$1\"")
        .arg("sh")
        .arg(&target)
        .env_clear()
        .env("HARRIER_TEST_MARK", "seeded")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take();
    let alerts = alerts_during(|| {
        stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(c.wait().unwrap().success());
    });
    let own = marker_alerts(&alerts, &target);
    assert_eq!(own.len(), 1, "{alerts:#?}");
    assert_eq!(field(own[0], "proc.env[HARRIER_TEST_MARK]"), "seeded", "{:?}", own[0].output_fields);
    assert!(field(own[0], "proc.env").contains("HARRIER_TEST_MARK=seeded"));
}
