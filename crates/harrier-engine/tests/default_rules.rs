//! The default rules over synthetic events (no BPF): the engine's field
//! extraction and the rules agree on what an event means.

use harrier_engine::state::EngineState;
use harrier_engine::Engine;
use harrier_outputs::sinks::Sink;
use harrier_outputs::{Alert, Limits, Outputs};
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use std::sync::{Arc, Mutex};

struct Collect(Arc<Mutex<Vec<Alert>>>);
impl Sink for Collect {
    fn send(&mut self, a: &Alert) -> anyhow::Result<()> {
        self.0.lock().unwrap().push(a.clone());
        Ok(())
    }
}

use harrier_state::testing::{exec, fork, syscall, P};

/// A process `name` (pid = tid) forked from pid 1 and exec'd.
fn spawn(e: &mut Engine, tid: u32, name: &str) {
    e.on_event(&fork(1, 1, tid, tid, "init"));
    e.on_event(&exec(2, tid, tid, name, "/"));
    let exe = format!("/usr/bin/{name}");
    e.on_event(&syscall(
        3,
        tid,
        "execve",
        0,
        &[("exe", P::B(exe.as_bytes())), ("args", P::B(exe.as_bytes()))],
    ));
}

fn openat(tid: u32, path: &str, flags: i64) -> Vec<u8> {
    let p = path.as_bytes();
    syscall(
        4,
        tid,
        "openat",
        3,
        &[("dirfd", P::I(-100)), ("flags", P::I(flags)), ("path", P::B(p)), ("fullpath", P::B(p))],
    )
}

fn engine() -> (Engine, Arc<Mutex<Vec<Alert>>>) {
    let opts = LoadOptions { supported: Arc::new(harrier_engine::source::supported), ..Default::default() };
    let rules = RuleSet::load(&[("harrier_rules.yaml", harrier_rules::DEFAULT_RULES)], &opts).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut outs = Outputs::new(Limits::default());
    outs.add("collect", Box::new(Collect(got.clone())));
    (Engine::new(rules, EngineState::new(), outs, RuleMatching::First), got)
}

fn alerts(engine: Engine, got: &Arc<Mutex<Vec<Alert>>>) -> Vec<Alert> {
    engine.into_outputs().close(std::time::Duration::from_secs(2));
    got.lock().unwrap().clone()
}

#[test]
fn an_untrusted_read_of_shadow_alerts_and_a_trusted_one_does_not() {
    let (mut e, got) = engine();
    spawn(&mut e, 4242, "untrusted-cat");
    e.on_event(&openat(4242, "/etc/shadow", 0));
    spawn(&mut e, 4343, "passwd");
    e.on_event(&openat(4343, "/etc/shadow", 0));
    let a = alerts(e, &got);
    assert_eq!(a.len(), 1, "{a:#?}");
    assert_eq!(a[0].rule, "Read sensitive file untrusted");
    assert_eq!(a[0].priority, "Warning");
    assert_eq!(a[0].output_fields["fd.name"], "/etc/shadow");
    assert_eq!(a[0].output_fields["proc.name"], "untrusted-cat");
}
