//! The kernel's deferred work during the mix: CPU time of the ksoftirqd
//! threads. The mix frees a UDP socket per iteration through RCU callbacks,
//! which the kernel runs in the mix's own softirqs (charged to its thread)
//! or in ksoftirqd (not charged to it, but taking its CPU: wall time). On
//! this host's 6.18 ksoftirqd ran them in every round of the mix with its
//! execs, whatever the setup; without the execs, only in some rounds, more
//! often the longer each syscall ran with preemption off (docs/bench/vs-falco.md).

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

    /// Their CPU time so far, seconds (schedstat's time on a CPU, in ns).
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
