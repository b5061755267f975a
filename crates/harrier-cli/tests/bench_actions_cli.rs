//! The rules benchmark's action generator and alert receiver (harrier-actions,
//! used by `harrier-bench rules-load`) against the real `harrier run` with its
//! default rules: every action's alert comes back by HTTP POST and is matched
//! to its action by event-generator's rule-name normalisation. A fixed number
//! of actions, then a wait for their alerts: no clock decides the outcome.

mod common;

use common::harrier_run;
use harrier_actions::{actions, Generator, Kit, Receiver, Tally};
use harrier_capture::testing::{bpf_available, slack};
use std::sync::Arc;
use std::time::Duration;

fn default_rule_names() -> Vec<String> {
    let opts = harrier_rules::ruleset::LoadOptions {
        supported: Arc::new(harrier_engine::source::supported),
        ..Default::default()
    };
    let files = [(harrier_rules::DEFAULT_RULES_NAME, harrier_rules::DEFAULT_RULES)];
    let rules = harrier_rules::ruleset::RuleSet::load(&files, &opts).expect("the default rules load");
    rules.rules().iter().filter(|r| r.is_active()).map(|r| r.name.clone()).collect()
}

#[test]
fn generated_actions_alert_over_http_and_are_matched_by_rule_name() {
    if !bpf_available() {
        return;
    }
    let rules = default_rule_names();
    let selected = actions::select(rules.iter().map(String::as_str), false);
    let names: Vec<&str> = selected.iter().map(|a| a.name).collect();
    for must in ["ReadSensitiveFileUntrusted", "WriteBelowBinaryDir", "ChangeThreadNamespace"] {
        assert!(names.contains(&must), "{must} has a default rule: {names:?}");
    }
    let kit = Kit::new().unwrap();
    // Only alerts from this process and its children count: the machine may
    // be running other tests that read /etc/shadow.
    let tally = Tally::new(&names, Some(std::process::id()));
    let receiver = Receiver::start(tally.clone()).unwrap();
    let dir = harrier_actions::kit::Scratch::new("bench-actions").unwrap();
    let config = dir.path().join("harrier.yaml");
    std::fs::write(&config, harrier_actions::receiver::harrier_config(&receiver.url)).unwrap();

    // Alerts go to the receiver; stdout is still drained (a full pipe would stall the sensor).
    let (mut sensor, _out, rx) = harrier_run(&["--config", config.to_str().unwrap()]);
    // Ready once it says so (rules loaded, attached, /proc read).
    let mut seen = Vec::new();
    loop {
        let line = rx
            .recv_timeout(slack(Duration::from_secs(120)))
            .unwrap_or_else(|_| panic!("harrier run did not start; stderr: {seen:#?}"));
        let ready = line.contains(" rules loaded, ");
        seen.push(line);
        if ready {
            break;
        }
    }

    let mut generator = Generator::new(selected, &kit, tally.clone(), Duration::ZERO, false);
    let expected = generator.passes(3).unwrap();
    let all_in = |actual: &[u64]| actual.iter().zip(&expected).all(|(a, e)| a >= e);
    // An upper bound for a failing run; a passing one returns at the last alert.
    tally.wait_until(slack(Duration::from_secs(60)), all_in);

    unsafe { libc::kill(sensor.0.id() as i32, libc::SIGINT) };
    let status = sensor.0.wait().unwrap();
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(status.success(), "harrier run exited with {status}: {seen:#?} {rest:#?}");
    let actual = tally.actual();
    for ((name, e), a) in names.iter().zip(&expected).zip(&actual) {
        assert_eq!((*e, *a), (3, 3), "{name}: expected vs actual alerts; sensor said {rest:#?}");
    }
    assert_eq!(tally.bad_requests.load(std::sync::atomic::Ordering::Relaxed), 0);
}
