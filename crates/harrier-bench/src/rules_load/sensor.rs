//! `harrier run` as the benchmark runs it: in a CPU-quota cgroup, alerts by
//! HTTP to the bench's receiver, Falco-style stats lines every 100 ms, its
//! CPU time and RSS read from /proc.

use super::cgroup::CpuLimit;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::ffi::CString;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub struct Spec<'a> {
    pub harrier: &'a Path,
    pub rules: &'a [String],
    pub extra_args: &'a [String],
    /// The cgroup quota; only that limits it, as in Falco's guide (the
    /// scheduler places it; the load is pinned to the last CPU).
    pub cpus: f64,
    pub url: &'a str,
    pub workdir: &'a Path,
}

/// Cumulative kernel counters from the newest stats line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Syscalls of captured types seen in the kernel, before any kernel-side
    /// filter (`cur.syscalls` when harrier writes it, else `cur.events`).
    pub syscalls: u64,
    /// Events sent to user space (`cur.events`).
    pub events: u64,
    pub drops: u64,
}

/// Follows the stats file, keeping the newest complete line.
struct StatsTail {
    path: PathBuf,
    offset: u64,
    partial: String,
    last: Counters,
    /// Whether harrier's lines carry a pre-filter `syscalls` counter.
    pub has_syscalls: bool,
}

impl StatsTail {
    fn poll(&mut self) -> Counters {
        let Ok(mut f) = std::fs::File::open(&self.path) else { return self.last };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return self.last;
        }
        let mut s = String::new();
        if let Ok(n) = f.read_to_string(&mut s) {
            self.offset += n as u64;
        }
        self.partial.push_str(&s);
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
            let cur = &v["cur"];
            let get = |k: &str| cur.get(k).and_then(Value::as_u64);
            let events = get("events").unwrap_or(0);
            self.has_syscalls |= get("syscalls").is_some();
            self.last = Counters {
                syscalls: get("syscalls").unwrap_or(events),
                events,
                drops: get("drops").unwrap_or(0),
            };
        }
        self.last
    }
}

pub struct Sensor {
    child: Option<Child>,
    pub pid: u32,
    stats: StatsTail,
    stderr: Arc<(Mutex<Vec<String>>, Condvar)>,
    // Dropped after the child is stopped (fields drop after Drop::drop).
    pub cgroup: CpuLimit,
}

/// `pid` as decimal digits in `buf`, without allocating (runs after fork).
fn itoa(mut pid: u32, buf: &mut [u8; 12]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 {
            return &buf[i..];
        }
    }
}

impl Sensor {
    pub fn start(spec: &Spec, tag: &str) -> Result<Sensor> {
        let cgroup = CpuLimit::create(&format!("harrier-bench-{}-{tag}", std::process::id()), spec.cpus)?;
        let config = spec.workdir.join(format!("harrier-{tag}.yaml"));
        std::fs::write(&config, harrier_actions::receiver::harrier_config(spec.url))
            .with_context(|| format!("writing {}", config.display()))?;
        let stats_path = spec.workdir.join(format!("stats-{tag}.jsonl"));
        let _ = std::fs::remove_file(&stats_path);
        let mut cmd = Command::new(spec.harrier);
        cmd.arg("run").arg("--config").arg(&config);
        for r in spec.rules {
            cmd.arg("-r").arg(r);
        }
        cmd.arg("--stats-file").arg(&stats_path).args(["--stats-interval", "100"]);
        cmd.args(spec.extra_args);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        // In the child, before exec: join the cgroup, so the sensor never runs
        // unlimited. Only async-signal-safe calls here.
        let procs = CString::new(cgroup.procs.as_os_str().as_encoded_bytes()).context("cgroup path")?;
        unsafe {
            cmd.pre_exec(move || {
                let mut buf = [0u8; 12];
                let digits = itoa(libc::getpid() as u32, &mut buf);
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 || libc::write(fd, digits.as_ptr().cast(), digits.len()) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
                Ok(())
            });
        }
        let mut child = cmd.spawn().with_context(|| format!("starting {}", spec.harrier.display()))?;
        let pid = child.id();
        let stderr = Arc::new((Mutex::new(Vec::<String>::new()), Condvar::new()));
        let pipe = child.stderr.take().expect("stderr is piped");
        let lines = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                lines.0.lock().unwrap().push(line);
                lines.1.notify_all();
            }
            // EOF: the sensor exited; wake anyone waiting for a line.
            lines.0.lock().unwrap().push(String::new());
            lines.1.notify_all();
        });
        let stats = StatsTail {
            path: stats_path,
            offset: 0,
            partial: String::new(),
            last: Counters::default(),
            has_syscalls: false,
        };
        let mut s = Sensor { child: Some(child), pid, stats, stderr, cgroup };
        s.wait_ready(Duration::from_secs(180))?;
        Ok(s)
    }

    /// Until harrier prints its start line (rules loaded, attached, /proc read).
    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let end = Instant::now() + timeout;
        let (lock, cv) = &*self.stderr;
        let mut lines = lock.lock().unwrap();
        loop {
            if lines.iter().any(|l| l.contains(" rules loaded, ")) {
                return Ok(());
            }
            let exited = lines.last().is_some_and(|l| l.is_empty());
            let now = Instant::now();
            if exited || now >= end {
                let why = if exited { "exited" } else { "did not start in time" };
                let tail = lines.iter().filter(|l| !l.is_empty()).cloned().collect::<Vec<_>>().join("\n  ");
                bail!("harrier run {why}; its stderr:\n  {tail}");
            }
            lines = cv.wait_timeout(lines, end - now).unwrap().0;
        }
    }

    pub fn counters(&mut self) -> Counters {
        self.stats.poll()
    }

    pub fn has_syscalls_counter(&self) -> bool {
        self.stats.has_syscalls
    }

    /// The stderr lines so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.0.lock().unwrap().iter().filter(|l| !l.is_empty()).cloned().collect()
    }

    /// SIGINT, then wait (SIGKILL after 15 s); the exit status.
    pub fn stop(&mut self) -> Result<std::process::ExitStatus> {
        let Some(mut child) = self.child.take() else { bail!("already stopped") };
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(st) = child.try_wait()? {
                // Its last lines (final counts) are read by the stderr thread.
                let (lock, cv) = &*self.stderr;
                let lines = lock.lock().unwrap();
                let _ = cv.wait_timeout_while(lines, Duration::from_secs(2), |l| {
                    !l.last().is_some_and(|l| l.is_empty())
                });
                return Ok(st);
            }
            if Instant::now() >= end {
                let _ = child.kill();
                return Ok(child.wait()?);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Sensor {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.stop();
        }
    }
}

/// A process's CPU time (user + system) and RSS / peak RSS, from /proc.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub cpu_s: f64,
    pub rss_kb: u64,
    pub hwm_kb: u64,
}

pub fn usage(pid: u32) -> Usage {
    let mut u = Usage::default();
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Fields after the comm (which may hold spaces) start at state (3rd).
        if let Some((_, rest)) = stat.rsplit_once(')') {
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
            // utime and stime are fields 14 and 15: indices 11 and 12 here.
            u.cpu_s = (ticks(11) + ticks(12)) as f64 / hz;
        }
    }
    if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        u.rss_kb = kb("VmRSS:");
        u.hwm_kb = kb("VmHWM:");
    }
    u
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    #[test]
    fn pids_format_without_allocation() {
        let mut b = [0u8; 12];
        assert_eq!(super::itoa(0, &mut b), b"0");
        assert_eq!(super::itoa(4194304, &mut b), b"4194304");
        assert_eq!(super::itoa(u32::MAX, &mut b), b"4294967295");
    }

    #[test]
    fn the_stats_tail_reads_whole_lines_and_prefers_a_pre_filter_counter() {
        let path = std::env::temp_dir().join(format!("harrier-stats-tail-{}", std::process::id()));
        let line = |e: u64, d: u64| format!("{{\"sample\":1,\"cur\":{{\"events\":{e},\"drops\":{d}}}}}\n");
        std::fs::write(&path, line(10, 1) + &line(20, 2) + "{\"sample\":3,\"cur\"").unwrap();
        let mut t = super::StatsTail {
            path: path.clone(),
            offset: 0,
            partial: String::new(),
            last: Default::default(),
            has_syscalls: false,
        };
        let c = t.poll();
        assert_eq!(
            (c.syscalls, c.events, c.drops, t.has_syscalls),
            (20, 20, 2, false),
            "the partial line waits"
        );
        let rest = ":{\"events\":30,\"drops\":3,\"syscalls\":90}}\n";
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(rest.as_bytes()).unwrap();
        let c = t.poll();
        assert_eq!((c.syscalls, c.events, c.drops, t.has_syscalls), (90, 30, 3, true));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn own_usage_is_read() {
        let u = super::usage(std::process::id());
        assert!(u.rss_kb > 0 && u.hwm_kb >= u.rss_kb, "{u:?}");
    }
}
