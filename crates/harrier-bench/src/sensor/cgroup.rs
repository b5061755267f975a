//! A CPU-quota cgroup for a sensor: cgroup v1 `cpu.cfs_quota_us` where the
//! cpu controller is mounted as v1 (these machines), else v2 `cpu.max`.
//! Created by the bench and removed on drop, also after an error or Ctrl-C.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PERIOD_US: u64 = 100_000;

pub struct CpuLimit {
    pub dir: PathBuf,
    /// The file a pid is written to, to move that process in.
    pub procs: PathBuf,
    pub version: u8,
}

/// The mount point of the v1 cpu controller, or of cgroup2, from mountinfo.
fn mounts() -> Result<(Option<PathBuf>, Option<PathBuf>)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let (mut v1, mut v2) = (None, None);
    for line in info.lines() {
        // id parent dev root mountpoint opts... - fstype source superopts
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let mountpoint = left.split(' ').nth(4).unwrap_or("");
        let mut r = right.split(' ');
        let (fstype, superopts) = (r.next().unwrap_or(""), r.nth(1).unwrap_or(""));
        if fstype == "cgroup" && superopts.split(',').any(|o| o == "cpu") {
            v1 = Some(PathBuf::from(mountpoint));
        } else if fstype == "cgroup2" && v2.is_none() {
            v2 = Some(PathBuf::from(mountpoint));
        }
    }
    Ok((v1, v2))
}

fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).with_context(|| format!("writing '{value}' to {}", path.display()))
}

impl CpuLimit {
    /// A new cgroup limited to `cpus` CPUs (0.5 = half of one).
    pub fn create(name: &str, cpus: f64) -> Result<CpuLimit> {
        if !(cpus > 0.0 && cpus <= 1024.0) {
            bail!("a CPU limit must be between 0 and 1024 CPUs, not {cpus}");
        }
        let quota = (cpus * PERIOD_US as f64).round() as u64;
        let (v1, v2) = mounts()?;
        if let Some(root) = v1 {
            let dir = root.join(name);
            std::fs::create_dir(&dir).with_context(|| format!("creating cgroup {}", dir.display()))?;
            let cg = CpuLimit { procs: dir.join("cgroup.procs"), dir, version: 1 };
            write(&cg.dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
            write(&cg.dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
            return Ok(cg);
        }
        let Some(root) = v2 else { bail!("no cgroup cpu controller is mounted (v1 cpu or cgroup2)") };
        let enabled = std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
        if !enabled.split_whitespace().any(|c| c == "cpu") {
            bail!(
                "the cgroup2 cpu controller is not enabled for children of {} (echo +cpu > {}/cgroup.subtree_control)",
                root.display(),
                root.display()
            );
        }
        let dir = root.join(name);
        std::fs::create_dir(&dir).with_context(|| format!("creating cgroup {}", dir.display()))?;
        let cg = CpuLimit { procs: dir.join("cgroup.procs"), dir, version: 2 };
        write(&cg.dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;
        Ok(cg)
    }

    /// Times the group was throttled so far (cpu.stat nr_throttled).
    pub fn throttled(&self) -> u64 {
        let stat = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
        stat.lines()
            .find_map(|l| l.strip_prefix("nr_throttled ").and_then(|v| v.trim().parse().ok()))
            .unwrap_or(0)
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        // The sensor has been reaped by now; its removal from the group can
        // lag a moment, so retry rmdir briefly.
        let end = Instant::now() + Duration::from_secs(5);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < end && self.dir.exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.dir.exists() {
            eprintln!("harrier-bench: warning: could not remove cgroup {}", self.dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CpuLimit;

    #[test]
    fn a_quota_group_is_made_and_removed() {
        if unsafe { libc::geteuid() } != 0 {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "CI runs as root");
            eprintln!("note: not root, skipping the cgroup test");
            return;
        }
        let name = format!("harrier-bench-test-{}", std::process::id());
        let cg = CpuLimit::create(&name, 0.5).unwrap();
        let dir = cg.dir.clone();
        let quota = if cg.version == 1 {
            std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap()
        } else {
            std::fs::read_to_string(dir.join("cpu.max")).unwrap()
        };
        assert!(quota.starts_with("50000"), "{quota}");
        assert!(cg.procs.exists());
        drop(cg);
        assert!(!dir.exists(), "{} removed", dir.display());
        assert!(CpuLimit::create(&name, 0.0).is_err(), "no zero quota");
    }
}
