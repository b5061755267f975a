//! The kernel's deferred work during the mix: CPU time of the ksoftirqd
//! threads. The mix frees a UDP socket per iteration through RCU callbacks;
//! on this kernel their processing flips, from round to round, between the
//! mix's own softirqs (charged to its thread) and ksoftirqd (charged to
//! nobody the mix thread's clock sees, but taking its CPU: wall time). The
//! more time each syscall spends with preemption off, the likelier the flip,
//! so a sensor's rounds may land there more often than its floor's.

use anyhow::{Context, Result};

/// The ksoftirqd threads (one per CPU), found once.
pub struct Softirqd {
    pids: Vec<u32>,
}

impl Softirqd {
    pub fn find() -> Softirqd {
        let pids = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.starts_with("ksoftirqd/"))
            })
            .collect();
        Softirqd { pids }
    }

    /// Their CPU time so far, seconds (schedstat's time on a CPU, in ns);
    /// 0 without any (then no figure is reported).
    pub fn cpu_s(&self) -> Result<f64> {
        let mut ns = 0u64;
        for pid in &self.pids {
            let path = format!("/proc/{pid}/schedstat");
            let s = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
            ns += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .with_context(|| format!("{path}: {s:?} has no run time"))?;
        }
        Ok(ns as f64 * 1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cpu_has_a_ksoftirqd_whose_time_only_grows() {
        let d = Softirqd::find();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(d.pids.len() >= cpus, "{} ksoftirqd threads for {cpus} CPUs", d.pids.len());
        let (a, b) = (d.cpu_s().unwrap(), d.cpu_s().unwrap());
        assert!(a > 0.0 && b >= a, "{a} then {b}");
    }
}
