//! `harrier run`: the capture engine's event stream → state tables → Falco's
//! rules → alerts. The engine is one more sink on the capture stream: it sees
//! every event in time order, keeps the state tables current, and meets each
//! event with only the rules that can match its type.

pub mod clock;
pub mod collect;
pub mod drops;
pub mod enforce;
mod falco_args;
pub mod guard;
pub mod interest;
pub mod kfilter;
pub mod metrics;
pub mod plugins;
pub mod snapshot;
pub mod source;
pub mod state;
pub mod statsfile;
pub mod view;

pub use clock::{epoch_offset, monotonic_now};

use harrier_outputs::{Alert, Outputs};
use harrier_rules::events::{EventType, PSEUDO_BASE, PSEUDO_EVENTS};
use harrier_rules::memo::Memo;
use harrier_rules::output::OutputValue;
use harrier_rules::ruleset::{RuleMatching, RuleSet};
use harrier_schema::view::SyscallView;
use serde_json::{Map, Value as Json};
use source::Source;
use state::EngineState;
use std::cell::RefCell;
use std::sync::Arc;

/// Per-rule cost and hits (the profiler Falco never built).
#[derive(Debug, Clone, Default)]
pub struct RuleCounter {
    pub evaluations: u64,
    pub matches: u64,
    /// Time spent evaluating the condition, in TSC cycles.
    pub cycles: u64,
}

#[derive(Debug, Clone, Default)]
pub struct EngineCounters {
    pub events: u64,
    /// Events no rule could match (their type has no candidate rule).
    pub events_without_rules: u64,
    pub alerts: u64,
    pub decode_errors: u64,
    /// Rule sets swapped in by `replace_rules` (SIGHUP, watch_config_files).
    pub reloads: u64,
    pub per_rule: Vec<RuleCounter>,
}

/// Falco's `capture` config: which alerts start a capture file, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapturePolicy {
    /// mode all_rules (else only rules with `capture: true`).
    pub all_rules: bool,
    pub default_ns: u64,
}

pub struct Engine {
    rules: RuleSet,
    pub state: EngineState,
    outputs: Arc<Outputs>,
    host: String,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC: events carry monotonic time.
    epoch_offset: u64,
    /// The host's boot time, ns since the epoch (/proc/stat's btime).
    boot_epoch_ns: u64,
    capture_start_ns: u64,
    scratch: RefCell<String>,
    pub counters: EngineCounters,
    capture: Option<CapturePolicy>,
    /// A capture an alert asked for, until the caller takes it: (event time, duration) in ns.
    capture_request: Option<(u64, u64)>,
    procexit: EventType,
    all_matches: bool,
    /// Results of the checks rules share, for the event being evaluated.
    memo: Memo,
    /// The host's interface addresses at start (Falco's fd.l*/fd.r*).
    ifaddrs: Vec<std::net::IpAddr>,
    /// Rules whose alerts act on the process (`enforce`).
    enforcer: Option<enforce::Enforcer>,
    /// The latest syscall event's timestamp: held tasks older than it were judged.
    pub last_ts: u64,
}

/// x86_64 close(2) (checked against the syscall table in a test).
const CLOSE_NR: u32 = 3;

fn tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Whether an active rule's condition, output or appended output fields read
/// proc.env: only then do the state tables keep each process's environment.
pub fn needs_env(rules: &RuleSet) -> bool {
    rules.fields_used().contains(&harrier_rules::Field::ProcEnv)
}

/// This machine's interface addresses (getifaddrs), as Falco lists them at start.
pub fn interface_addrs() -> Vec<std::net::IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we only read and then free.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            match unsafe { (*ifa.ifa_addr).sa_family } as i32 {
                libc::AF_INET => {
                    let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                    out.push(std::net::IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()));
                }
                libc::AF_INET6 => {
                    let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                    out.push(std::net::IpAddr::from(a.sin6_addr.s6_addr));
                }
                _ => {}
            }
        }
        p = ifa.ifa_next;
    }
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The host's boot time in ns since the epoch, as Falco reads it (/proc/stat's
/// btime, whole seconds); 0 if unreadable.
pub fn boot_epoch_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let btime = stat.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok());
    btime.unwrap_or(0) * 1_000_000_000
}

impl Engine {
    pub fn new(rules: RuleSet, mut state: EngineState, outputs: Outputs, matching: RuleMatching) -> Engine {
        state.tables.keep_env = needs_env(&rules);
        let offset = epoch_offset();
        let per_rule = vec![RuleCounter::default(); rules.rules().len()];
        let procexit = PSEUDO_EVENTS.iter().position(|e| *e == "procexit").unwrap_or(0);
        // Names in conditions (fd.sip.name = x) resolve on a thread of their own,
        // now and periodically; until then their comparisons are false.
        rules.dns().spawn_refresher(harrier_rules::dns::REFRESH_PERIOD);
        Engine {
            state,
            outputs: Arc::new(outputs),
            host: harrier_outputs::hostname(),
            epoch_offset: offset,
            boot_epoch_ns: boot_epoch_ns(),
            capture_start_ns: offset + monotonic_now(),
            scratch: RefCell::new(String::with_capacity(4096)),
            counters: EngineCounters { per_rule, ..Default::default() },
            capture: None,
            capture_request: None,
            procexit: EventType(PSEUDO_BASE + procexit as u16),
            all_matches: matching == RuleMatching::All,
            memo: rules.memo(),
            ifaddrs: interface_addrs(),
            enforcer: None,
            last_ts: 0,
            rules,
        }
    }

    /// The addresses that count as this host's interfaces when fd.lport and
    /// fd.rport pick the local end (default: this machine's, read at start).
    pub fn set_interface_addrs(&mut self, addrs: Vec<std::net::IpAddr>) {
        self.ifaddrs = addrs;
    }

    /// For events from a capture file: the captured host's name and clock
    /// offset, so alerts read as the live run's would have.
    pub fn set_clock(&mut self, host: &str, epoch_offset: u64, capture_start_ns: u64) {
        self.host = host.to_string();
        self.epoch_offset = epoch_offset;
        self.capture_start_ns = capture_start_ns;
    }

    /// CLOCK_REALTIME - CLOCK_MONOTONIC as this engine uses it.
    pub fn epoch_offset(&self) -> u64 {
        self.epoch_offset
    }

    pub fn capture_start_ns(&self) -> u64 {
        self.capture_start_ns
    }

    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// New rules (SIGHUP), same state tables; per-rule counters start over.
    pub fn replace_rules(&mut self, rules: RuleSet) {
        self.counters.reloads += 1;
        self.counters.per_rule = vec![RuleCounter::default(); rules.rules().len()];
        // Processes seen before keep what they had: an environment starts
        // being kept from their next exec (or /proc read) on.
        self.state.tables.keep_env = needs_env(&rules);
        // The old rules' resolver thread ends with them.
        rules.dns().spawn_refresher(harrier_rules::dns::REFRESH_PERIOD);
        self.memo = rules.memo();
        self.rules = rules;
    }

    pub fn outputs(&self) -> &Outputs {
        &self.outputs
    }

    /// Turns on Falco's capture on alert.
    pub fn set_capture(&mut self, policy: CapturePolicy) {
        self.capture = Some(policy);
    }

    /// The capture the last alerts asked for, if any: (event time, duration), monotonic ns.
    pub fn take_capture_request(&mut self) -> Option<(u64, u64)> {
        self.capture_request.take()
    }

    /// One drop check at event time `ts` (monotonic ns, as the events'): an alert it asks
    /// for goes to the outputs; false means its exit action fired.
    pub fn check_drops(&mut self, m: &mut drops::DropMonitor, ts: u64, events: u64, dropped: u64) -> bool {
        match m.check(ts + self.epoch_offset, events, dropped, &self.host) {
            drops::DropVerdict::Continue => true,
            drops::DropVerdict::Alert(a) => {
                self.outputs.emit(Arc::new(*a));
                true
            }
            drops::DropVerdict::Exit => false,
        }
    }

    /// The active rules with their counters (metrics, snapshots).
    pub fn active_rules(&self) -> impl Iterator<Item = (&harrier_rules::ruleset::Rule, &RuleCounter)> {
        self.rules.rules().iter().zip(&self.counters.per_rule).filter(|(r, _)| r.is_active())
    }

    pub fn set_enforcer(&mut self, e: enforce::Enforcer) {
        self.enforcer = Some(e);
    }

    pub fn enforcer_mut(&mut self) -> Option<&mut enforce::Enforcer> {
        self.enforcer.as_mut()
    }

    /// The outputs, for other sources' threads (plugins): they hold them only while they
    /// hand an alert over, so `into_outputs` gets them back once those threads are stopped.
    pub fn shared_outputs(&self) -> std::sync::Weak<Outputs> {
        Arc::downgrade(&self.outputs)
    }

    /// Hands the outputs over for closing (flush with a deadline).
    pub fn into_outputs(self) -> Outputs {
        plugins::unshare(self.outputs)
    }

    /// One event from the capture stream (bytes as the rings hold them).
    pub fn on_event(&mut self, bytes: &[u8]) {
        self.counters.events += 1;
        let view = match SyscallView::new(bytes) {
            Ok(v) => v,
            Err(_) => {
                self.counters.decode_errors += 1;
                return;
            }
        };
        let Some(view) = view else {
            // A life-cycle event: state first; a process exit is Falco's procexit.
            let exit = self.state.apply_meta(bytes);
            if let Some(tid) = exit {
                let ts = u64::from_le_bytes(bytes[..8].try_into().unwrap());
                self.evaluate(None, self.procexit, tid, ts);
            }
            return;
        };
        let ty = EventType(view.syscall.nr as u16);
        self.last_ts = self.last_ts.max(view.header.ts);
        // A close is judged with the fd it closes still in the table.
        let close = view.syscall.nr == CLOSE_NR;
        if !close {
            self.state.apply(&view);
        } else {
            self.state.tables.fd_name_changed = false; // a close renames nothing
        }
        self.evaluate(Some(&view), ty, view.header.tid, view.header.ts);
        if close {
            self.state.apply(&view);
        }
    }

    fn evaluate(&mut self, view: Option<&SyscallView>, ty: EventType, tid: u32, ts: u64) {
        let candidates = self.rules.candidates(ty);
        if candidates.is_empty() {
            self.counters.events_without_rules += 1;
            return;
        }
        self.memo.next_event();
        let src = Source {
            view,
            ty,
            tid,
            num: self.counters.events,
            wall_ns: ts + self.epoch_offset,
            epoch_offset: self.epoch_offset,
            boot_epoch_ns: self.boot_epoch_ns,
            capture_start_ns: self.capture_start_ns,
            host: &self.host,
            state: &self.state,
            scratch: &self.scratch,
            cache: Default::default(),
            dns: Some(self.rules.dns()),
            ifaddrs: &self.ifaddrs,
        };
        // One clock read per rule, not two: each rule's time ends where the next one's begins.
        let mut t0 = tsc();
        for &i in candidates {
            let hit = self.rules.rule_matches_memo(i, &src, &self.memo);
            let t1 = tsc();
            let c = &mut self.counters.per_rule[i as usize];
            c.cycles += t1.wrapping_sub(t0);
            t0 = t1;
            c.evaluations += 1;
            if !hit {
                continue;
            }
            c.matches += 1;
            self.counters.alerts += 1;
            let rule = self.rules.rule(i);
            if let Some(p) = self.capture.filter(|p| p.all_rules || rule.capture) {
                let ns = rule.capture_duration.map_or(p.default_ns, |ms| ms * 1_000_000);
                let want = self.capture_request.map_or(ns, |(_, d)| d.max(ns));
                self.capture_request = Some((ts, want));
            }
            let mut alert = alert_of(rule, &src, src.wall_ns, &self.host);
            if let Some(en) = self.enforcer.as_mut() {
                use crate::view::StateView;
                let p = self.state.process(tid);
                let target = enforce::Target {
                    tid,
                    pid: p.as_ref().map_or(tid, |p| p.pid),
                    comm: p.as_ref().map_or(&b""[..], |p| p.comm),
                    uid: p.as_ref().and_then(|p| p.euid),
                };
                if let Some(done) = en.act(i, &target, ty, ts, monotonic_now()) {
                    enforce::describe(&done, &mut alert.output, &mut alert.output_fields);
                }
            }
            self.outputs.emit(Arc::new(alert));
            if !self.all_matches {
                break;
            }
            t0 = tsc(); // the alert's formatting is not the next rule's cost
        }
    }

    /// After each drained batch: forget what exited a batch ago.
    pub fn end_batch(&mut self) {
        self.state.end_batch();
    }
}

/// The alert of `rule` on the event `src` (at `wall_ns`): Falco's text and output_fields.
pub fn alert_of<S: harrier_rules::EventSource + ?Sized>(
    rule: &harrier_rules::ruleset::Rule,
    src: &S,
    wall_ns: u64,
    host: &str,
) -> Alert {
    let (mut output, fields) = rule.format_output(src);
    // A queued alert's memory is what bounds an output's queue: no slack.
    output.shrink_to_fit();
    let mut output_fields = Map::with_capacity(fields.len() + 1);
    for (name, v) in fields {
        output_fields.insert(name, json_value(v));
    }
    // Falco adds its text prefix's field (the event time, in ns) to every alert's fields.
    output_fields.insert("evt.time".into(), wall_ns.into());
    Alert {
        time_ns: wall_ns,
        rule: rule.name.clone(),
        priority: rule.priority.as_str(),
        output,
        output_fields,
        tags: rule.tags.clone(),
        source: rule.source.clone(),
        hostname: host.to_string(),
        uuid: harrier_outputs::new_uuid(),
    }
}

fn json_value(v: OutputValue) -> Json {
    match v {
        OutputValue::Null => Json::Null,
        OutputValue::Str(s) => Json::String(s),
        OutputValue::U64(n) => n.into(),
        OutputValue::S64(n) => n.into(),
        OutputValue::Bool(b) => b.into(),
        OutputValue::List(vs) => Json::Array(vs.into_iter().map(json_value).collect()),
    }
}

/// TSC cycles per ns, measured over `window` (for per-rule times).
pub fn tsc_per_ns(window: std::time::Duration) -> f64 {
    let (c0, t0) = (tsc(), std::time::Instant::now());
    std::thread::sleep(window);
    (tsc() - c0) as f64 / t0.elapsed().as_nanos().max(1) as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn close_is_syscall_3() {
        assert_eq!(harrier_schema::syscall_by_name("close").unwrap().nr, super::CLOSE_NR);
    }
}
