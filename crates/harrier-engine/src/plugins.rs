//! Plugin sources: each on a thread of its own, with its own plugin states (as Falco makes
//! an inspector per source), its own rule set and counters, and the outputs shared with the
//! syscall engine. Nothing on the syscall path waits for a plugin.

use harrier_outputs::Outputs;
use harrier_plugin::{abi, Batch, Library, Plugin};
use harrier_rules::events::{EventType, PSEUDO_BASE, PSEUDO_EVENTS};
use harrier_rules::fields::{Field, FieldArg};
use harrier_rules::ruleset::RuleSet;
use harrier_rules::{EventSource, Value};
use std::cell::RefCell;
use std::ffi::CString;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// A loaded plugin with its entry in falco.yaml.
#[derive(Clone)]
pub struct Loaded {
    pub lib: Arc<Library>,
    pub init_config: String,
    pub open_params: String,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "plugin {} {} ({})", self.lib.name, self.lib.version, self.lib.path)
    }
}

/// A plugin source's counters, read by stats and metrics while it runs.
#[derive(Default)]
pub struct SourceStats {
    pub events: AtomicU64,
    pub alerts: AtomicU64,
    /// extract_fields answers that were failures or not values.
    pub extract_errors: AtomicU64,
    /// When the plugin's current next_batch began (CLOCK_MONOTONIC ns; 0: not in one).
    pub in_call_ns: AtomicU64,
    pub done: AtomicBool,
    /// Why the source ended early (init, open or next_batch failed), one line.
    pub error: Mutex<Option<String>>,
}

/// One plugin source's run.
pub struct SourceRun {
    pub source: String,
    /// Every loaded plugin, in load order (a [`harrier_rules::fields::PluginSel`]'s index).
    pub plugins: Vec<Loaded>,
    /// The plugin that sources the events.
    pub origin: usize,
    pub rules: RuleSet,
    pub outputs: Weak<Outputs>,
    pub host: String,
    pub stop: Arc<AtomicBool>,
    pub stats: Arc<SourceStats>,
}

/// Gets the outputs back from the plugin threads' shares (each holds them for one alert).
pub fn unshare(mut o: Arc<Outputs>) -> Outputs {
    loop {
        match Arc::try_unwrap(o) {
            Ok(o) => return o,
            Err(back) => o = back,
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The pseudo event type of plugin events (rules of plugin sources match every type).
pub fn event_type() -> EventType {
    let k = PSEUDO_EVENTS.iter().position(|e| *e == "pluginevent").expect("pluginevent is a pseudo event");
    EventType(PSEUDO_BASE + k as u16)
}

/// A plugin event as the rules see it.
struct Ev<'a> {
    /// [`event_type`], found once per source: the rules ask it for every rule.
    ty: EventType,
    input: abi::EventInput,
    plugins: &'a [Option<Plugin>],
    origin: &'a Plugin,
    source: &'a str,
    host: &'a str,
    wall_ns: u64,
    scratch: &'a RefCell<String>,
}

impl Ev<'_> {
    fn text(&self, out: &mut dyn FnMut(Value<'_>) -> bool, f: impl FnOnce(&mut String)) {
        let mut s = self.scratch.borrow_mut();
        s.clear();
        f(&mut s);
        out(Value::Str(s.as_bytes()));
    }
    fn time(&self, out: &mut dyn FnMut(Value<'_>) -> bool, fmt: &str) {
        let t = chrono::DateTime::from_timestamp(
            (self.wall_ns / 1_000_000_000) as i64,
            (self.wall_ns % 1_000_000_000) as u32,
        )
        .unwrap_or_default();
        self.text(out, |s| {
            let _ = write!(s, "{}", t.format(fmt));
        });
    }
}

impl EventSource for Ev<'_> {
    fn event_type(&self) -> EventType {
        self.ty
    }
    fn extract(&self, field: Field, arg: &FieldArg, out: &mut dyn FnMut(Value<'_>) -> bool) {
        use Field::*;
        match (field, arg) {
            (PluginField, FieldArg::Plugin(sel)) => {
                if let Some(Some(p)) = self.plugins.get(sel.plugin as usize) {
                    p.extract(&self.input, sel, out);
                }
            }
            (EvtNum, _) => {
                out(Value::U64(self.input.evtnum));
            }
            (EvtTime, _) => self.time(out, "%H:%M:%S%.9f"),
            (EvtTimeS, _) => self.time(out, "%H:%M:%S"),
            (EvtTimeIso8601, _) => self.time(out, "%Y-%m-%dT%H:%M:%S%.9fZ"),
            (EvtDatetime, _) => self.time(out, "%Y-%m-%d %H:%M:%S%.9f"),
            (EvtRawtime, _) => {
                out(Value::U64(self.wall_ns));
            }
            (EvtRawtimeS, _) => {
                out(Value::U64(self.wall_ns / 1_000_000_000));
            }
            (EvtRawtimeNs, _) => {
                out(Value::U64(self.wall_ns % 1_000_000_000));
            }
            (EvtHostname, _) => {
                out(Value::str(self.host));
            }
            (EvtSource, _) => {
                out(Value::str(self.source));
            }
            (EvtPluginname, _) => {
                out(Value::str(self.origin.name()));
            }
            (EvtPlugininfo, _) => {
                if let Some(s) = self.origin.event_to_string(&self.input) {
                    out(Value::Str(s.to_bytes()));
                }
            }
            (EvtIsAsync, _) => {
                out(Value::Bool(false));
            }
            _ => {}
        }
    }
}

impl SourceRun {
    /// Runs until the plugin's end of stream, a failure or `stop`. Errors are one line,
    /// naming the plugin; they are also left in `stats.error`.
    pub fn run(self) -> anyhow::Result<()> {
        let r = self.run_inner();
        if let Err(e) = &r {
            *self.stats.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{e:#}"));
        }
        self.stats.done.store(true, Relaxed);
        r
    }

    fn run_inner(&self) -> anyhow::Result<()> {
        // This source's states: its own plugin, and those whose fields apply to it.
        let mut states = Vec::with_capacity(self.plugins.len());
        for (i, l) in self.plugins.iter().enumerate() {
            let wanted = i == self.origin || l.lib.extracts_from(&self.source);
            states.push(if wanted { Some(Plugin::init(l.lib.clone(), &l.init_config)?) } else { None });
        }
        fn origin(states: &mut [Option<Plugin>], i: usize) -> &mut Plugin {
            states[i].as_mut().expect("the source plugin was initialized")
        }
        let mut inst = origin(&mut states, self.origin).open(&self.plugins[self.origin].open_params)?;
        let src_c = CString::new(self.source.as_str())?;
        let ty = event_type();
        let scratch = RefCell::new(String::with_capacity(256));
        let mut num = 0u64;
        let result = loop {
            if self.stop.load(Relaxed) {
                break Ok(());
            }
            self.stats.in_call_ns.store(crate::monotonic_now(), Relaxed);
            let batch = origin(&mut states, self.origin).next_batch(&mut inst);
            self.stats.in_call_ns.store(0, Relaxed);
            // The events stay the plugin's until its next call: borrowed past `batch`.
            let (ptr, n, status) = match batch {
                Ok((e, status)) => (e.as_ptr(), e.len(), status),
                Err(e) => break Err(e),
            };
            if n == 0 && status == Batch::Timeout {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            for &ev in unsafe { std::slice::from_raw_parts(ptr, n) } {
                num += 1;
                let ts = unsafe { std::ptr::addr_of!((*ev).ts).read_unaligned() };
                // u64::MAX: the plugin leaves the time to the host.
                let wall_ns = if ts == u64::MAX { crate::clock::realtime_now() } else { ts };
                let e = Ev {
                    ty,
                    input: abi::EventInput { evt: ev, evtnum: num, evtsrc: src_c.as_ptr() },
                    plugins: &states,
                    origin: states[self.origin].as_ref().expect("the source plugin was initialized"),
                    source: &self.source,
                    host: &self.host,
                    wall_ns,
                    scratch: &scratch,
                };
                self.rules.evaluate(&e, |rule| {
                    self.stats.alerts.fetch_add(1, Relaxed);
                    let alert = crate::alert_of(rule, &e, wall_ns, &self.host);
                    if let Some(o) = self.outputs.upgrade() {
                        o.emit(Arc::new(alert));
                    }
                });
            }
            self.stats.events.store(num, Relaxed);
            let errors: u64 = states.iter().flatten().map(|p| p.malformed.get() + p.failed.get()).sum();
            self.stats.extract_errors.store(errors, Relaxed);
            if status == Batch::Eof {
                break Ok(());
            }
        };
        self.stats.events.store(num, Relaxed);
        origin(&mut states, self.origin).close(inst);
        result
    }
}
