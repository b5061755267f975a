//! What the live rule tests share: a sensor running the engine as `harrier
//! run` does, Falco's rule files, runc containers and alert lookups. Each
//! test binary uses a part of it.
#![allow(dead_code)]

use harrier_actions::runc::Runc;
use harrier_capture::{AttachMode, Config, Session, Stats};
use harrier_engine::state::EngineState;
use harrier_engine::Engine;
use harrier_outputs::sinks::Sink;
use harrier_outputs::{Alert, Limits, Outputs};
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use std::cell::RefCell;
use std::path::PathBuf;
use std::process::Command;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Keeps every alert the engine sends.
struct Collect(Arc<Mutex<Vec<Alert>>>);
impl Sink for Collect {
    fn send(&mut self, a: &Alert) -> anyhow::Result<()> {
        self.0.lock().unwrap().push(a.clone());
        Ok(())
    }
}

/// Runs `work` under a live sensor evaluating `rules`, with the kernel
/// filter they imply when `kernel_filter`; returns every alert and the
/// capture's stats (no event may be lost). Names in conditions (fd.sip.name)
/// are resolved before `work` runs. `work` may call its argument to have the
/// events so far evaluated at once (while a container still exists, as
/// `harrier run` would have done).
pub fn run_live(
    rules: RuleSet,
    matching: RuleMatching,
    kernel_filter: bool,
    work: impl FnOnce(&mut dyn FnMut()),
) -> (Vec<Alert>, Stats) {
    run_live_sized(rules, matching, kernel_filter, None, work)
}

/// [`run_live`] with rings of `buffer_size` bytes per CPU (None: the default).
pub fn run_live_sized(
    rules: RuleSet,
    matching: RuleMatching,
    kernel_filter: bool,
    buffer_size: Option<usize>,
    work: impl FnOnce(&mut dyn FnMut()),
) -> (Vec<Alert>, Stats) {
    let interest = harrier_engine::interest::interest(&rules);
    let filter = kernel_filter.then(|| harrier_engine::kfilter::derive(&rules, &interest.syscalls, &[]));
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut outs = Outputs::new(Limits::default());
    outs.add("collect", Box::new(Collect(got.clone())));
    let engine = Rc::new(RefCell::new(Engine::new(rules, EngineState::new(), outs, matching)));
    // The engine resolves names on a thread of its own: one round done means
    // every name was looked up once (a lookup, not a timer, is awaited).
    let dns = engine.borrow().rules().dns().clone();
    if !dns.is_empty() {
        assert!(dns.wait_rounds(1, Duration::from_secs(120)), "names in conditions resolved");
    }
    let mut cfg = Config::new(interest.syscalls);
    cfg.attach = AttachMode::Dispatcher;
    cfg.skip_missing = true;
    cfg.kernel_filter = filter;
    if let Some(b) = buffer_size {
        cfg.buffer_size = b;
    }
    let sink = engine.clone();
    let mut session =
        Session::start(&cfg, Box::new(move |b| sink.borrow_mut().on_event(b))).expect("sensor starts");
    // As `harrier run` does: the processes whose fds are followed (untold
    // closes and sockets), and the kernel's copy of the names' addresses.
    if let Some(untold) = session.untold_fds().unwrap() {
        engine.borrow_mut().state.watch_untold(untold);
    }
    if let Some(peers) = session.named_peers().unwrap() {
        dns.on_round(Box::new(move |a| peers.set(a).expect("kf_peers written")));
    }
    engine.borrow_mut().state.scan_proc();
    work(&mut || session.drain().unwrap());
    // The action's processes have exited: their events are in the rings.
    session.drain().unwrap();
    engine.borrow_mut().end_batch();
    let stats = session.stop().unwrap();
    assert_eq!(stats.total_drops(), 0, "no event lost");
    let engine = Rc::try_unwrap(engine).ok().unwrap().into_inner();
    engine.into_outputs().close(Duration::from_secs(5));
    let v = got.lock().unwrap().clone();
    (v, stats)
}

/// FALCO_RULES_DIR, else shared/data/falco-rules in a parent of this crate
/// (a clone under /work), else /work/shared/data/falco-rules. Missing under
/// CI=true fails; elsewhere the caller skips, saying so.
pub fn falco_rules_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FALCO_RULES_DIR") {
        return Some(PathBuf::from(d));
    }
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        if p.join("shared/data/falco-rules/falco_rules.yaml").exists() {
            return Some(p.join("shared/data/falco-rules"));
        }
        if !p.pop() {
            break;
        }
    }
    let fixed = PathBuf::from("/work/shared/data/falco-rules");
    if fixed.join("falco_rules.yaml").exists() {
        return Some(fixed);
    }
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "Falco's rule files not found: set FALCO_RULES_DIR"
    );
    eprintln!("note: Falco's rule files not found (set FALCO_RULES_DIR); skipped");
    None
}

/// Falco's stable rules, then `extra` (a rules file of the test's own),
/// every matching rule reported.
pub fn stable_with(extra: &str) -> Option<RuleSet> {
    let p = falco_rules_dir()?.join("falco_rules.yaml");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let opts = LoadOptions {
        supported: Arc::new(harrier_engine::source::supported),
        rule_matching: RuleMatching::All,
        ..Default::default()
    };
    let files = [(p.display().to_string(), text), ("harrier_test.yaml".to_string(), extra.to_string())];
    Some(RuleSet::load(&files, &opts).unwrap_or_else(|d| panic!("rules load: {d:?}")))
}

/// Runs `work` under a live sensor with Falco's stable rules and `extra`.
pub fn stable_alerts_during(extra: &str, work: impl FnOnce(&mut dyn FnMut())) -> Option<Vec<Alert>> {
    Some(run_live(stable_with(extra)?, RuleMatching::All, true, work).0)
}

/// Starts `ct` under a live sensor with Falco's stable rules and `extra`,
/// has the events evaluated once it printed "ready" (while it still exists),
/// then lets it finish.
pub fn container_alerts(extra: &str, ct: &mut Runc) -> Option<Vec<Alert>> {
    stable_alerts_during(extra, |drain| {
        ct.start().unwrap();
        ct.wait_for("ready").unwrap();
        drain();
        ct.finish().unwrap();
    })
}

pub fn field<'a>(a: &'a Alert, f: &str) -> &'a str {
    a.output_fields.get(f).and_then(|v| v.as_str()).unwrap_or("")
}

/// The alerts of `rule` whose output field `f` is `value`.
pub fn by<'a>(alerts: &'a [Alert], rule: &str, f: &str, value: &str) -> Vec<&'a Alert> {
    alerts.iter().filter(|a| a.rule == rule && field(a, f) == value).collect()
}

/// Runs `prog args`, which must succeed (the behaviour has to have
/// happened); returns its standard output, trimmed.
pub fn ok(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog).args(args).output().unwrap_or_else(|e| panic!("{prog}: {e}"));
    assert!(out.status.success(), "{prog} {args:?}: {} {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A plain runc container (cgroup /<name>) whose rootfs also holds busybox
/// as each of `applets` (so that the process is named after the applet, as
/// the rules expect).
pub fn applet_container(tag: &str, script: &str, applets: &[&str]) -> Runc {
    let name = format!("harrier-{tag}-{}", std::process::id());
    let ct = Runc::new(&name, &format!("/{name}"), script, serde_json::json!({})).unwrap();
    for a in applets {
        harrier_actions::kit::copy_executable("/bin/busybox", &ct.bundle.join("rootfs/bin").join(a)).unwrap();
    }
    ct
}
