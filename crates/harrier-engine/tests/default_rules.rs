//! The default rules over synthetic events (no BPF): the engine's field
//! extraction and the rules agree on what an event means.

use harrier_engine::state::EngineState;
use harrier_engine::Engine;
use harrier_outputs::sinks::Sink;
use harrier_outputs::{Alert, Outputs};
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use std::sync::{Arc, Mutex};

struct Collect(Arc<Mutex<Vec<Alert>>>);
impl Sink for Collect {
    fn send(&mut self, a: &Alert) -> anyhow::Result<()> {
        self.0.lock().unwrap().push(a.clone());
        Ok(())
    }
}

fn event(tid: u32, kind: u16, ret: i64, body: &[u8]) -> Vec<u8> {
    let len = (24 + body.len()) as u16;
    let mut b = Vec::new();
    b.extend(1u64.to_le_bytes());
    b.extend(tid.to_le_bytes());
    b.extend(kind.to_le_bytes());
    b.extend(len.to_le_bytes());
    b.extend(ret.to_le_bytes());
    b.extend(body);
    b
}

fn var(b: &mut Vec<u8>, s: &[u8]) {
    b.extend((s.len() as u16).to_le_bytes());
    b.extend(s);
}

fn exec_meta(tid: u32, comm: &str) -> Vec<u8> {
    let mut body = tid.to_le_bytes().to_vec();
    let mut c = [0u8; 16];
    c[..comm.len()].copy_from_slice(comm.as_bytes());
    body.extend(c);
    event(tid, 1001, 0, &body)
}

fn openat(tid: u32, path: &str, flags: u32) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend((-100i32).to_le_bytes());
    body.extend(flags.to_le_bytes());
    body.extend(0u32.to_le_bytes());
    var(&mut body, path.as_bytes());
    var(&mut body, path.as_bytes());
    event(tid, 257, 3, &body)
}

fn engine() -> (Engine, Arc<Mutex<Vec<Alert>>>) {
    let opts = LoadOptions { supported: Arc::new(harrier_engine::source::supported), ..Default::default() };
    let rules = RuleSet::load(&[("harrier_rules.yaml", harrier_rules::DEFAULT_RULES)], &opts).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut outs = Outputs::new(64);
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
    e.on_event(&exec_meta(4242, "untrusted-cat"));
    e.on_event(&openat(4242, "/etc/shadow", 0));
    e.on_event(&exec_meta(4343, "passwd"));
    e.on_event(&openat(4343, "/etc/shadow", 0));
    let a = alerts(e, &got);
    assert_eq!(a.len(), 1, "{a:#?}");
    assert_eq!(a[0].rule, "Read sensitive file untrusted");
    assert_eq!(a[0].priority, "Warning");
    assert_eq!(a[0].output_fields["fd.name"], "/etc/shadow");
    assert_eq!(a[0].output_fields["proc.name"], "untrusted-cat");
}
