//! A sensor's CPU time and memory, read from /proc: its whole process tree
//! (a sensor may run helpers), and a sampler thread for RSS over time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// CPU time (user + system) and memory of a process or a process tree.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Seconds, including children already reaped.
    pub cpu_s: f64,
    pub rss_kb: u64,
    /// Peak RSS of the root process (VmHWM).
    pub hwm_kb: u64,
}

/// Fields of /proc/PID/stat after the comm (which may hold spaces): index 0
/// is the state (3rd field), so field N is at index N - 3.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(|v| v.parse().unwrap_or(0)).collect())
}

fn status_kb(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn clock_ticks() -> f64 {
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

/// `root` and its living descendants (by parent pid, from /proc).
pub fn tree(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            if let Some(f) = stat_fields(pid) {
                parents.push((pid, *f.get(1).unwrap_or(&0) as u32));
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// The tree under `root`: CPU of every living member plus the children
/// the root has reaped (cutime + cstime), RSS summed, the root's peak RSS.
pub fn tree_usage(root: u32) -> Usage {
    let hz = clock_ticks();
    let mut u = Usage { hwm_kb: status_kb(root, "VmHWM:"), ..Usage::default() };
    for pid in tree(root) {
        let Some(f) = stat_fields(pid) else { continue };
        let at = |i: usize| *f.get(i).unwrap_or(&0);
        let mut ticks = at(11) + at(12);
        if pid == root {
            ticks += at(13) + at(14);
        }
        u.cpu_s += ticks as f64 / hz;
        u.rss_kb += status_kb(pid, "VmRSS:");
    }
    u
}

/// RSS of a process tree sampled every `period` on a thread of its own.
pub struct RssSampler {
    samples: Arc<Mutex<Vec<(Instant, u64)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Median and peak of the RSS samples in a window, kB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rss {
    pub median_kb: u64,
    pub peak_kb: u64,
    pub samples: usize,
}

impl RssSampler {
    pub fn start(root: u32, period: Duration) -> RssSampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (samples.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                while !st.load(Ordering::Relaxed) {
                    let kb = tree(root).iter().map(|&p| status_kb(p, "VmRSS:")).sum::<u64>();
                    if kb > 0 {
                        s.lock().unwrap().push((Instant::now(), kb));
                    }
                    std::thread::sleep(period);
                }
            })
            .ok();
        RssSampler { samples, stop, thread }
    }

    /// The samples taken between `from` and `to`.
    pub fn window(&self, from: Instant, to: Instant) -> Rss {
        let mut v: Vec<u64> = self
            .samples
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| *t >= from && *t <= to)
            .map(|s| s.1)
            .collect();
        v.sort_unstable();
        Rss {
            median_kb: v.get(v.len() / 2).copied().unwrap_or(0),
            peak_kb: v.last().copied().unwrap_or(0),
            samples: v.len(),
        }
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    #[test]
    fn a_tree_holds_its_children_and_their_cpu() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5"])
            .spawn()
            .unwrap();
        let me = std::process::id();
        std::thread::sleep(Duration::from_millis(300));
        assert!(super::tree(me).contains(&child.id()), "the child is in the tree");
        let tree = super::tree_usage(me);
        let own_cpu = super::stat_fields(me).map(|f| f[11] + f[12] + f[13] + f[14]).unwrap() as f64
            / super::clock_ticks();
        assert!(tree.cpu_s > own_cpu, "the busy child's CPU counts: {tree:?} vs {own_cpu}");
        // Both memories count (this process's RSS moves with the other tests).
        let child_rss = super::status_kb(child.id(), "VmRSS:");
        assert!(child_rss > 0 && tree.rss_kb > child_rss && tree.hwm_kb > 0, "{tree:?}, child {child_rss}");
        let sampler = super::RssSampler::start(me, Duration::from_millis(20));
        // Polled, not one fixed sleep: a sample walks all of /proc, which takes
        // a while on a loaded machine and far longer emulated (the guests).
        let t0 = Instant::now();
        let mut w = sampler.window(t0, Instant::now());
        while w.samples < 2 && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
            w = sampler.window(t0, Instant::now());
        }
        assert!(w.samples >= 2 && w.peak_kb >= w.median_kb && w.median_kb > 0, "{w:?}");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
