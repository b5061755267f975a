//! Falco's syscall_event_drops: once a second (by event time), the drops since the last
//! check against the events; over the threshold, an occurrence, and (as a token bucket
//! allows) the actions: log, alert (Falco's "Falco internal: syscall event drop"), exit.
//! `simulate_drops` adds one drop to every check, as Falco's does, to try the actions.

use harrier_outputs::Alert;
use serde_json::{Map, Value};

/// What to do on drops, Falco's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DropAction {
    Ignore,
    Log,
    Alert,
    Exit,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DropPolicy {
    /// Sorted, no repeats; empty means ignore.
    pub actions: Vec<DropAction>,
    /// Drops over events above which a second counts (0-1).
    pub threshold: f64,
    /// Actions allowed per second, and the burst.
    pub rate: f64,
    pub max_burst: f64,
    pub simulate: bool,
}

impl Default for DropPolicy {
    fn default() -> DropPolicy {
        DropPolicy {
            actions: vec![DropAction::Ignore],
            threshold: 0.1,
            rate: 0.03333,
            max_burst: 1.0,
            simulate: false,
        }
    }
}

const SECOND: u64 = 1_000_000_000;

/// The monitor's state: call [`DropMonitor::check`] for each event (or batch).
pub struct DropMonitor {
    policy: DropPolicy,
    next_check: u64,
    last: (u64, u64),
    tokens: f64,
    last_claim: Option<u64>,
    /// Seconds over the threshold, and actions taken (Falco's closing figures).
    pub occurrences: u64,
    pub actions_taken: u64,
}

/// What a check asks the caller to do.
pub enum DropVerdict {
    Continue,
    /// Emit this alert, then continue.
    Alert(Box<Alert>),
    Exit,
}

impl DropMonitor {
    pub fn new(mut policy: DropPolicy) -> DropMonitor {
        if policy.simulate {
            policy.threshold = 0.0;
        }
        let tokens = policy.max_burst;
        DropMonitor {
            policy,
            next_check: 0,
            last: (0, 0),
            tokens,
            last_claim: None,
            occurrences: 0,
            actions_taken: 0,
        }
    }

    fn claim(&mut self, now: u64) -> bool {
        if let Some(prev) = self.last_claim {
            let gained = now.saturating_sub(prev) as f64 / SECOND as f64 * self.policy.rate;
            self.tokens = (self.tokens + gained).min(self.policy.max_burst);
        }
        self.last_claim = Some(now);
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }

    /// At event time `ts` (ns), with `events` and `drops` counted since the start.
    pub fn check(&mut self, ts: u64, events: u64, drops: u64, host: &str) -> DropVerdict {
        if self.next_check == 0 {
            self.next_check = ts + SECOND;
        }
        if self.next_check >= ts {
            return DropVerdict::Continue;
        }
        self.next_check = ts + SECOND;
        let (n_evts, mut n_drops) = (events - self.last.0, drops - self.last.1);
        self.last = (events, drops);
        if self.policy.simulate {
            n_drops += 1;
        }
        if n_drops == 0 || (n_drops as f64 / n_evts.max(1) as f64) <= self.policy.threshold {
            return DropVerdict::Continue;
        }
        self.occurrences += 1;
        if !self.claim(ts) {
            return DropVerdict::Continue;
        }
        self.actions_taken += 1;
        let msg =
            format!("Falco internal: syscall event drop. {n_drops} system calls dropped in last second.");
        let mut verdict = DropVerdict::Continue;
        for a in &self.policy.actions {
            match a {
                DropAction::Ignore => {}
                DropAction::Log => eprintln!("{msg}"),
                DropAction::Alert => {
                    verdict = DropVerdict::Alert(Box::new(alert(ts, &msg, n_evts, n_drops, host)))
                }
                DropAction::Exit => {
                    eprintln!("{msg}");
                    eprintln!("Exiting.");
                    return DropVerdict::Exit;
                }
            }
        }
        verdict
    }

    /// Falco's closing lines (stderr).
    pub fn report(&self) -> String {
        format!(
            "Syscall event drop monitoring:\n   - event drop detected: {} occurrences\n   - num times actions taken: {}",
            self.occurrences, self.actions_taken
        )
    }
}

fn alert(ts: u64, msg: &str, n_evts: u64, n_drops: u64, host: &str) -> Alert {
    let mut f = Map::new();
    f.insert("n_evts".into(), Value::String(n_evts.to_string()));
    f.insert("n_drops".into(), Value::String(n_drops.to_string()));
    f.insert("n_drops_buffer_total".into(), Value::String(n_drops.to_string()));
    Alert {
        time_ns: ts,
        rule: "Falco internal: syscall event drop".into(),
        priority: "Debug",
        output: msg.to_string(),
        output_fields: f,
        tags: Vec::new(),
        source: "syscall".into(),
        hostname: host.to_string(),
        uuid: harrier_outputs::new_uuid(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_drops_count_once_a_second_and_the_bucket_limits_actions() {
        let p = DropPolicy {
            actions: vec![DropAction::Alert],
            max_burst: 2.0,
            rate: 0.0,
            simulate: true,
            ..Default::default()
        };
        let mut m = DropMonitor::new(p);
        let mut alerts = 0;
        // An event each 1.1 s: every one after the first is past its check time.
        for i in 0..10u64 {
            if let DropVerdict::Alert(_) = m.check(SECOND + i * 1_100_000_000, i + 1, 0, "h") {
                alerts += 1;
            }
        }
        assert_eq!((m.occurrences, m.actions_taken, alerts), (9, 2, 2));
        let mut m = DropMonitor::new(DropPolicy {
            actions: vec![DropAction::Exit],
            simulate: true,
            ..Default::default()
        });
        assert!(matches!(m.check(1, 1, 0, "h"), DropVerdict::Continue));
        assert!(matches!(m.check(3 * SECOND, 2, 0, "h"), DropVerdict::Exit));
        let mut quiet = DropMonitor::new(DropPolicy::default());
        assert!(matches!(quiet.check(1, 1, 0, "h"), DropVerdict::Continue));
        assert!(
            matches!(quiet.check(3 * SECOND, 100, 5, "h"), DropVerdict::Continue),
            "5% is under the 10% threshold"
        );
        assert_eq!(quiet.occurrences, 0);
    }
}
