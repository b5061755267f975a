//! Falco event-generator's `bench --loop`, step for step: actions run one
//! after another with a sleep before each, for a round of fixed duration;
//! then a rest of the same duration in which no action runs and late alerts
//! still count; then per action expected (actions run) against actual
//! (alerts received), lost = 1 - mean(actual/expected), throughput =
//! actions started in the round / round duration. With `loop`, the sleep
//! halves after each round in which no action received more alerts than
//! expected (a "dirty" round keeps it).

use crate::actions::{Action, Kit};
use crate::receiver::Tally;
use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ActionStat {
    pub name: &'static str,
    pub expected: u64,
    pub actual: u64,
    /// actual / expected; 0 when nothing was expected (as event-generator).
    pub ratio: f64,
}

#[derive(Debug, Clone)]
pub struct Round {
    pub number: usize,
    /// The sleep before each action during this round.
    pub sleep: Duration,
    /// Actions started in the running half.
    pub actions: u64,
    /// Actions per second of the running half (event-generator's "EPS").
    pub throughput: f64,
    pub per_action: Vec<ActionStat>,
    pub lost: f64,
    /// Some action got more alerts than it ran (the sleep is kept).
    pub dirty: bool,
    /// Actions that failed (they still count as expected, as in event-generator).
    pub errors: u64,
    pub first_error: Option<String>,
    pub started: Instant,
}

impl Round {
    /// Actions that could not run at all this round ("cannot generate events").
    pub fn idle_actions(&self) -> Vec<&'static str> {
        self.per_action.iter().filter(|a| a.expected == 0).map(|a| a.name).collect()
    }
}

/// The figures of a round from expected and actual counts (event-generator's
/// logStats and reset): per-action ratios, lost and whether it was dirty.
pub fn tally_round(names: &[&'static str], expected: &[u64], actual: &[u64]) -> (Vec<ActionStat>, f64, bool) {
    let per: Vec<ActionStat> = names
        .iter()
        .zip(expected.iter().zip(actual))
        .map(|(&name, (&e, &a))| ActionStat {
            name,
            expected: e,
            actual: a,
            ratio: if e > 0 { a as f64 / e as f64 } else { 0.0 },
        })
        .collect();
    let lost = 1.0 - per.iter().map(|s| s.ratio).sum::<f64>() / per.len().max(1) as f64;
    let dirty = per.iter().any(|s| s.actual > s.expected);
    (per, lost, dirty)
}

/// event-generator's halving: only under `--loop`, only after a clean round.
pub fn next_sleep(sleep: Duration, looping: bool, dirty: bool) -> Duration {
    if looping && !dirty && !sleep.is_zero() {
        // Go halves an int64 of nanoseconds.
        Duration::from_nanos(sleep.as_nanos() as u64 / 2)
    } else {
        sleep
    }
}

pub struct Generator<'k> {
    actions: Vec<&'static Action>,
    kit: &'k Kit,
    tally: Arc<Tally>,
    sleep: Duration,
    looping: bool,
    rounds: usize,
    /// The next action in the cycle (event-generator's runner loops over all).
    next: usize,
}

impl<'k> Generator<'k> {
    /// `tally` must count the same actions in the same order.
    pub fn new(
        actions: Vec<&'static Action>,
        kit: &'k Kit,
        tally: Arc<Tally>,
        sleep: Duration,
        looping: bool,
    ) -> Self {
        assert_eq!(tally.names().len(), actions.len(), "the tally counts these actions");
        Generator { actions, kit, tally, sleep, looping, rounds: 0, next: 0 }
    }

    pub fn sleep(&self) -> Duration {
        self.sleep
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.actions.iter().map(|a| a.name).collect()
    }

    /// Runs the next action; Ok(index) or the index and its error.
    fn step(&mut self) -> (usize, Result<()>) {
        let i = self.next;
        self.next = (self.next + 1) % self.actions.len();
        (i, (self.actions[i].run)(self.kit))
    }

    /// One round: `duration` of actions, `duration` of rest, then the figures.
    /// Stops early (with the figures so far) when `stop` is set.
    pub fn round(&mut self, duration: Duration, stop: &AtomicBool) -> Round {
        self.rounds += 1;
        let started = Instant::now();
        let end = started + duration;
        let mut expected = vec![0u64; self.actions.len()];
        let (mut started_actions, mut errors, mut first_error) = (0u64, 0u64, None);
        while Instant::now() < end && !stop.load(Ordering::Relaxed) {
            started_actions += 1;
            if !self.sleep.is_zero() {
                std::thread::sleep(self.sleep);
            }
            let (i, r) = self.step();
            // PostRun counts the action whether or not it failed.
            expected[i] += 1;
            if let Err(e) = r {
                errors += 1;
                first_error.get_or_insert_with(|| format!("{}: {e:#}", self.actions[i].name));
            }
        }
        // The rest: late alerts still count. Checked often so Ctrl-C is quick.
        let rest_end = end + duration;
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= rest_end {
                break;
            }
            std::thread::sleep((rest_end - now).min(Duration::from_millis(50)));
        }
        let actual = self.tally.take();
        let (per_action, lost, dirty) = tally_round(&self.names(), &expected, &actual);
        let round = Round {
            number: self.rounds,
            sleep: self.sleep,
            actions: started_actions,
            throughput: started_actions as f64 / duration.as_secs_f64(),
            per_action,
            lost,
            dirty,
            errors,
            first_error,
            started,
        };
        self.sleep = next_sleep(self.sleep, self.looping, dirty);
        round
    }

    /// Each action `passes` times, no sleep: the expected count per action.
    /// (For tests: a fixed amount of work, no clock involved.)
    pub fn passes(&mut self, passes: usize) -> Result<Vec<u64>> {
        let mut expected = vec![0u64; self.actions.len()];
        self.next = 0;
        for _ in 0..passes * self.actions.len() {
            let (i, r) = self.step();
            r?;
            expected[i] += 1;
        }
        Ok(expected)
    }
}
