//! What an enforced rule's alert did: read from the kernel's log when the
//! kernel decided (guard.rs), else a kill from user space after the full
//! evaluation, or, in dry-run, what would have been done.

use crate::guard::{Decision, Exempt};
use harrier_capture::guard::{LogEntry, Outcome};
use harrier_rules::events::EventType;
use std::time::{Duration, Instant};

/// How long an alert waits for the kernel's verdict on its event. The record
/// is published before the guard program reads it and logs its verdict, so
/// user space can read an event first: microseconds on hardware, up to a
/// time slice where the vCPU that published was descheduled (the TCG guests).
const VERDICT_WAIT: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Kill,
    DryRun,
}

/// The kernel's log of actions, by thread (the session's guard_log map).
pub type KernelLog = Box<dyn Fn(u32) -> Option<LogEntry>>;

/// What happened, for the alert's output fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// "killed", "would kill", "not killed", "failed".
    pub action: &'static str,
    /// "kernel" or "user space".
    pub by: &'static str,
    /// From the syscall's exit to the signal.
    pub latency_ns: u64,
    /// Why not, or how it failed.
    pub detail: String,
}

/// Per enforced rule: how many of each result.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub killed: u64,
    pub would_kill: u64,
    pub not_killed: u64,
    pub failed: u64,
    /// Tasks the kernel held and user space let go on (the rule did not match).
    pub resumed: u64,
    /// Alerts on an event type the kernel decides whose verdict was not
    /// logged within [`VERDICT_WAIT`]: user space acted instead.
    pub kernel_late: u64,
}

pub struct Enforcer {
    /// By rule index: the rule's guard id and action.
    by_rule: Vec<Option<(u16, Action)>>,
    pub decisions: Vec<Decision>,
    /// By guard id: the event types whose events the kernel decides.
    kernel_types: Vec<Vec<EventType>>,
    pub counts: Vec<Counts>,
    exempt: Exempt,
    kernel_log: Option<KernelLog>,
    self_pid: u32,
    /// User-space kills per rule per second, as the kernel's guard_rate.
    rate: u32,
    windows: Vec<(u64, u32)>,
    /// Held tasks user space killed, (tid, event ts), until their hold is released.
    killed_held: Vec<(u32, u64)>,
}

/// The process an alert is about, as the state knows it.
pub struct Target<'a> {
    pub tid: u32,
    pub pid: u32,
    pub comm: &'a [u8],
    pub uid: Option<u32>,
}

impl Enforcer {
    /// `enforced`: (rule index, action), in guard id order.
    pub fn new(
        rules: usize,
        enforced: &[(u32, Action)],
        decisions: Vec<Decision>,
        exempt: Exempt,
        rate: u32,
    ) -> Enforcer {
        let mut by_rule = vec![None; rules];
        for (id, &(r, a)) in enforced.iter().enumerate() {
            by_rule[r as usize] = Some((id as u16, a));
        }
        let kernel_types = decisions
            .iter()
            .map(|d| d.syscalls.iter().filter_map(|s| EventType::from_name(s)).collect())
            .collect();
        Enforcer {
            by_rule,
            counts: vec![Counts::default(); enforced.len()],
            decisions,
            kernel_types,
            exempt,
            kernel_log: None,
            self_pid: std::process::id(),
            rate,
            windows: vec![(0, 0); enforced.len()],
            killed_held: Vec::new(),
        }
    }

    pub fn set_kernel_log(&mut self, log: KernelLog) {
        self.kernel_log = Some(log);
    }

    /// For an alert of rule `rule` on an event of type `ty` at `ts`
    /// (monotonic ns); None: the rule is not enforced.
    pub fn act(&mut self, rule: u32, t: &Target, ty: EventType, ts: u64, now: u64) -> Option<Done> {
        let (id, action) = (*self.by_rule.get(rule as usize)?)?;
        let done = self.decide(id, action, t, ty, ts, now);
        let c = &mut self.counts[id as usize];
        match done.action {
            "killed" => c.killed += 1,
            "would kill" => c.would_kill += 1,
            "failed" => c.failed += 1,
            _ => c.not_killed += 1,
        }
        Some(done)
    }

    fn decide(&mut self, id: u16, action: Action, t: &Target, ty: EventType, ts: u64, now: u64) -> Done {
        let done =
            |action, by, latency_ns, detail: &str| Done { action, by, latency_ns, detail: detail.into() };
        if let Some(why) = self.protected(t) {
            return done("not killed", "user space", 0, why);
        }
        if action == Action::DryRun {
            return done("would kill", "user space", 0, "");
        }
        let (logged, late) = self.kernel_verdict(id, ty, t.tid, ts);
        self.counts[id as usize].kernel_late += late as u64;
        // Killed by the kernel for another enforced rule (the alert names the first match).
        if let Some(l) = logged.filter(|l| l.rule != id && l.outcome == Outcome::Killed) {
            let other = self.decisions.get(l.rule as usize).map_or("?", |d| d.rule.as_str());
            return done("killed", "kernel", l.acted_ns.saturating_sub(ts), &format!("for rule '{other}'"));
        }
        let logged = logged.filter(|l| l.rule == id);
        let held = logged.is_some_and(|l| l.outcome == Outcome::Held);
        match logged.map(|l| (l.outcome, l)) {
            Some((Outcome::Killed, l)) => return done("killed", "kernel", l.acted_ns.saturating_sub(ts), ""),
            Some((Outcome::Failed, l)) => return done("failed", "kernel", 0, &format!("error {}", l.err)),
            Some((Outcome::RateLimited, _)) => {
                return done("not killed", "kernel", 0, "over the rule's rate")
            }
            Some((Outcome::Protected, _)) => return done("not killed", "kernel", 0, "protected process"),
            Some((Outcome::Deferred | Outcome::Held, _)) | None => {}
        }
        let w = &mut self.windows[id as usize];
        if w.0 != now / 1_000_000_000 {
            *w = (now / 1_000_000_000, 0);
        }
        w.1 += 1;
        if w.1 > self.rate {
            return done("not killed", "user space", 0, "over the rule's rate");
        }
        match kill(t) {
            Ok(()) if held => {
                self.killed_held.push((t.tid, ts));
                let latency = crate::monotonic_now().saturating_sub(ts);
                done("killed", "user space", latency, "held by the kernel since the syscall's exit")
            }
            Ok(()) => done("killed", "user space", crate::monotonic_now().saturating_sub(ts), ""),
            Err(e) => done("failed", "user space", 0, &e),
        }
    }

    /// The kernel's log of this event. Where the kernel decides the rule on
    /// this event type, it waits for a verdict the guard has yet to log,
    /// sleeping: spinning would keep the CPU the guard may need. It gives up
    /// once the thread's log is of a later event, or after [`VERDICT_WAIT`]
    /// (the kernel found no match, or logged none: then true, it was late).
    fn kernel_verdict(&self, id: u16, ty: EventType, tid: u32, ts: u64) -> (Option<LogEntry>, bool) {
        let Some(log) = self.kernel_log.as_ref() else { return (None, false) };
        let wait = self.kernel_types.get(id as usize).is_some_and(|t| t.contains(&ty));
        let until = Instant::now() + VERDICT_WAIT;
        loop {
            let l = log(tid);
            match l {
                Some(l) if l.ts == ts => return (Some(l), false),
                Some(l) if l.ts > ts => return (None, false),
                _ if !wait => return (None, false),
                _ if Instant::now() >= until => return (None, true),
                _ => std::thread::sleep(Duration::from_micros(50)),
            }
        }
    }

    /// Whether user space killed the task held for this event (and forget
    /// it); false: it is to be resumed.
    pub fn take_killed(&mut self, tid: u32, ts: u64) -> bool {
        match self.killed_held.iter().position(|k| *k == (tid, ts)) {
            Some(i) => {
                self.killed_held.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Per enforced rule: its name and counts, as metrics' Sample wants them.
    pub fn sample(&self) -> Vec<(String, [u64; 6])> {
        self.decisions
            .iter()
            .zip(&self.counts)
            .map(|(d, c)| {
                (d.rule.clone(), [c.killed, c.would_kill, c.not_killed, c.failed, c.resumed, c.kernel_late])
            })
            .collect()
    }

    /// A held task let go on: its rule did not match.
    pub fn resumed(&mut self, rule: u16) {
        if let Some(c) = self.counts.get_mut(rule as usize) {
            c.resumed += 1;
        }
    }

    fn protected(&self, t: &Target) -> Option<&'static str> {
        if t.pid <= 1 || t.pid == self.self_pid || t.pid == 2 {
            return Some("protected process");
        }
        if self.exempt.comms.iter().any(|c| &c[..] == t.comm)
            || t.uid.is_some_and(|u| self.exempt.uids.contains(&u))
        {
            return Some("exempt");
        }
        None
    }
}

/// The alert says what was done: `enforce.*` output fields, and a note at
/// the end of its text.
pub fn describe(d: &Done, output: &mut String, fields: &mut serde_json::Map<String, serde_json::Value>) {
    fields.insert("enforce.action".into(), d.action.into());
    fields.insert("enforce.by".into(), d.by.into());
    fields.insert("enforce.latency_ns".into(), d.latency_ns.into());
    if !d.detail.is_empty() {
        fields.insert("enforce.detail".into(), d.detail.clone().into());
    }
    output.push_str(" | enforce=");
    output.push_str(&d.action.replace(' ', "_"));
    output.push_str(" by=");
    output.push_str(&d.by.replace(' ', "_"));
    if d.action == "killed" {
        use std::fmt::Write;
        let _ = write!(output, " latency_us={}", d.latency_ns / 1000);
    }
    if !d.detail.is_empty() {
        output.push_str(" (");
        output.push_str(&d.detail);
        output.push(')');
    }
}

/// SIGKILL through a pidfd of the thread group, opened only if the thread
/// still has the name the event had (a reused pid is left alone).
fn kill(t: &Target) -> Result<(), String> {
    let comm = std::fs::read(format!("/proc/{}/task/{}/comm", t.pid, t.tid))
        .map_err(|_| "already gone".to_string())?;
    if comm.strip_suffix(b"\n").unwrap_or(&comm) != t.comm {
        return Err("already gone".into());
    }
    // SAFETY: plain syscalls on integers; the fd is closed below.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, t.pid, 0);
        if fd < 0 {
            return Err("already gone".into());
        }
        let r = libc::syscall(libc::SYS_pidfd_send_signal, fd, libc::SIGKILL, std::ptr::null::<u8>(), 0);
        let err = std::io::Error::last_os_error();
        libc::close(fd as i32);
        if r < 0 {
            return Err(err.to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
