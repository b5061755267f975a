//! Each sensor's highest drop-free rate of the mix with the sensor limited
//! to 1 CPU by a cgroup quota, as rules-load measures it: the load thread
//! pinned to the last CPU, stepped up; drops read from the sensor's stats
//! file before and after each step.

use crate::rules_load::interrupted;
use crate::rules_load::load::Load;
use crate::sensor::{Sensor, Spec};
use anyhow::Result;
use std::time::{Duration, Instant};

/// One step: its target (MAX: unpaced), the rate reached, the drops in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub target: u64,
    pub rate: f64,
    pub drops: u64,
}

#[derive(Debug, Clone)]
pub struct Rates {
    pub label: String,
    pub steps: Vec<Step>,
}

impl Rates {
    /// The highest rate reached in a step without drops.
    pub fn best(&self) -> Option<f64> {
        self.steps.iter().filter(|s| s.drops == 0).map(|s| s.rate).reduce(f64::max)
    }

    /// Whether every step was clean: the load, not the sensor, was the limit.
    pub fn load_bound(&self) -> bool {
        !self.steps.is_empty() && self.steps.iter().all(|s| s.drops == 0)
    }
}

/// Steps up through `targets` (stopping after two steps in a row with drops).
pub fn search(
    label: &str,
    mut spec: Spec,
    targets: &[u64],
    step: Duration,
    exec_every: u64,
) -> Result<Rates> {
    let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = Load::start((ncpus > 1).then_some(ncpus - 1), exec_every)?;
    spec.cpus = Some(1.0);
    eprintln!("vs-falco: highest drop-free rate of {label} under 1 CPU");
    let mut s = Sensor::start(&spec)?;
    // Its stats lines come every stats_interval: a step's drops are in the
    // line written after it ends.
    let lag = spec.stats_interval + Duration::from_millis(300);
    std::thread::sleep(lag);
    let mut steps = Vec::new();
    for &target in targets {
        interrupted()?;
        let c0 = s.counters();
        let (i0, t0) = (load.issued(), Instant::now());
        load.set_rate(target);
        std::thread::sleep(step);
        load.set_rate(0);
        let rate = (load.issued() - i0) as f64 / t0.elapsed().as_secs_f64();
        std::thread::sleep(lag);
        let drops = s.counters().drops.saturating_sub(c0.drops);
        eprintln!("vs-falco:   {label}, 1 CPU: {:.0} syscalls/s, {drops} drops", rate);
        steps.push(Step { target, rate, drops });
        if steps.len() >= 2 && steps.iter().rev().take(2).all(|s| s.drops > 0) {
            break;
        }
    }
    s.stop()?;
    load.finish()?;
    Ok(Rates { label: label.to_string(), steps })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_rate_is_the_highest_clean_step() {
        let step = |rate, drops| Step { target: 0, rate, drops };
        let r = Rates {
            label: "x".into(),
            steps: vec![step(1e5, 0), step(2e5, 0), step(2.5e5, 9), step(2.2e5, 0)],
        };
        assert_eq!(r.best(), Some(2.2e5));
        assert!(!r.load_bound());
        let all_dirty = Rates { label: "x".into(), steps: vec![step(1e5, 1)] };
        assert_eq!((all_dirty.best(), all_dirty.load_bound()), (None, false));
    }
}
