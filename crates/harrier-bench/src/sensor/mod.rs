//! A sensor under test, `harrier run` or a Falco binary, started and measured
//! the same way for both: the benchmarks (rules-load, vs-falco) and the
//! differential-alert harness use it.
//!
//! ```ignore
//! use crate::sensor::{Kind, Sensor, Spec};
//! let mut spec = Spec::new(Kind::Falco, "/opt/falco-ref/bin/falco", workdir, "falco-1");
//! spec.config = Some("/opt/falco-ref/etc/falco-stable.yaml".into()); // Falco: required
//! spec.rules = vec![crate::rules_load::stable_rules()?];            // the same files for both
//! let mut s = Sensor::start(&spec)?;  // returns once attached and processing events
//! let u0 = s.usage();                 // CPU (whole process tree) and RSS, from /proc
//! /* ... behaviours or load ... */
//! let c = s.counters();               // kernel events / drops from its stats file
//! let bpf = s.bpf();                  // ids of the BPF programs and links it holds
//! let stop = s.stop()?;               // SIGINT: time to its final stats line, to exit, left attached
//! let alerts = s.alerts()?;           // its JSON file output: one serde_json::Value per alert
//! ```
//!
//! Each sensor writes into `workdir`: `<name>-alerts.json` (JSON alerts,
//! Falco's shape for both), `<name>-stats.jsonl` (harrier `--stats-file`,
//! Falco `metrics.output_file` with kernel event counters), and for harrier
//! without a config of its own `<name>.yaml` (stdout output off). Falco gets
//! its config plus `-o` overrides (file and JSON output on; stdout, syslog,
//! HTTP webserver off; metrics to the file) and `-v` for its exit counters.
//! Falco is never part of the project: the caller names its binary and config.

pub mod bpf;
pub mod cgroup;
pub mod proc;
pub mod stats;

use anyhow::{bail, Context, Result};
use cgroup::CpuLimit;
use std::ffi::CString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub use stats::Counters;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Harrier,
    Falco,
}

/// How to start a sensor. Fields are public; [`Spec::new`] fills the defaults.
#[derive(Debug, Clone)]
pub struct Spec {
    pub kind: Kind,
    pub binary: PathBuf,
    /// Falco: its falco.yaml (engine, plugins), required. Harrier: a config
    /// of its own (e.g. HTTP output and extra fields); default: stdout off.
    pub config: Option<PathBuf>,
    /// Rule files (`-r`, repeated); empty: the sensor's defaults.
    pub rules: Vec<String>,
    /// More arguments, after the ones the spec makes.
    pub args: Vec<String>,
    /// Where its alert, stats and config files go.
    pub workdir: PathBuf,
    /// Names its files; unique per sensor started in `workdir`.
    pub name: String,
    /// Run in a CPU-quota cgroup of this many CPUs, joined before exec.
    pub cpus: Option<f64>,
    /// Also POST alerts as JSON here.
    pub http_url: Option<String>,
    /// Alerts to `<name>-alerts.json` (default); off: only where its config
    /// or `http_url` sends them.
    pub file_output: bool,
    /// Period of the stats lines (Falco's metrics take at least 100 ms).
    pub stats_interval: Duration,
    pub ready_timeout: Duration,
    /// Period of the RSS sampler.
    pub rss_period: Duration,
    /// Ready only once it holds BPF links (off: a stand-in without BPF).
    pub ready_needs_bpf: bool,
}

impl Spec {
    pub fn new(kind: Kind, binary: impl Into<PathBuf>, workdir: impl Into<PathBuf>, name: &str) -> Spec {
        Spec {
            kind,
            binary: binary.into(),
            config: None,
            rules: Vec::new(),
            args: Vec::new(),
            workdir: workdir.into(),
            name: name.to_string(),
            cpus: None,
            http_url: None,
            file_output: true,
            stats_interval: Duration::from_secs(1),
            ready_timeout: Duration::from_secs(180),
            rss_period: Duration::from_millis(200),
            ready_needs_bpf: true,
        }
    }

    pub fn alerts_path(&self) -> PathBuf {
        self.workdir.join(format!("{}-alerts.json", self.name))
    }

    pub fn stats_path(&self) -> PathBuf {
        self.workdir.join(format!("{}-stats.jsonl", self.name))
    }

    /// The command line after the binary.
    pub fn command_args(&self) -> Result<Vec<String>> {
        let path = |p: &Path| p.display().to_string();
        let (alerts, stats) = (path(&self.alerts_path()), path(&self.stats_path()));
        let mut a = Vec::new();
        match self.kind {
            Kind::Harrier => {
                let config = match &self.config {
                    Some(c) => c.clone(),
                    None => {
                        let c = self.workdir.join(format!("{}.yaml", self.name));
                        std::fs::write(&c, "stdout_output:\n  enabled: false\njson_output: true\n")
                            .with_context(|| format!("writing {}", c.display()))?;
                        c
                    }
                };
                a.extend(["run".into(), "--config".into(), path(&config)]);
                for r in &self.rules {
                    a.extend(["-r".into(), r.clone()]);
                }
                if self.file_output {
                    a.extend(["--json".into(), "--file-output".into(), alerts]);
                }
                a.extend(["--stats-file".into(), stats]);
                a.extend(["--stats-interval".into(), self.stats_interval.as_millis().to_string()]);
                if let Some(u) = &self.http_url {
                    a.extend(["--http-output".into(), u.clone()]);
                }
            }
            Kind::Falco => {
                let Some(config) = &self.config else { bail!("Falco needs its config file (falco.yaml)") };
                a.extend(["-c".into(), path(config), "-v".into()]);
                for r in &self.rules {
                    a.extend(["-r".into(), r.clone()]);
                }
                let ms = self.stats_interval.as_millis().max(100);
                let mut o = vec![
                    "json_output=true".to_string(),
                    format!("file_output.enabled={}", self.file_output),
                    format!("file_output.filename={alerts}"),
                    "file_output.keep_alive=true".into(),
                    "stdout_output.enabled=false".into(),
                    "syslog_output.enabled=false".into(),
                    "log_syslog=false".into(),
                    "log_stderr=true".into(),
                    "webserver.enabled=false".into(),
                    "metrics.enabled=true".into(),
                    format!("metrics.interval={ms}ms"),
                    "metrics.output_rule=false".into(),
                    format!("metrics.output_file={stats}"),
                    "metrics.kernel_event_counters_enabled=true".into(),
                    "metrics.rules_counters_enabled=false".into(),
                    "metrics.resource_utilization_enabled=false".into(),
                    "metrics.state_counters_enabled=false".into(),
                    "metrics.libbpf_stats_enabled=false".into(),
                ];
                if let Some(u) = &self.http_url {
                    o.extend(["http_output.enabled=true".into(), format!("http_output.url={u}")]);
                }
                for opt in o {
                    a.extend(["-o".into(), opt]);
                }
            }
        }
        a.extend(self.args.iter().cloned());
        Ok(a)
    }
}

/// Output lines of the sensor (stderr and stdout), each with its arrival
/// time; `closed` counts the streams at EOF.
#[derive(Default)]
struct Lines {
    lines: Vec<(Instant, String)>,
    closed: u8,
}

type Shared = Arc<(Mutex<Lines>, Condvar)>;

fn follow(stream: impl Read + Send + 'static, out: Shared) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            out.0.lock().unwrap().lines.push((Instant::now(), line));
            out.1.notify_all();
        }
        out.0.lock().unwrap().closed += 1;
        out.1.notify_all();
    });
}

/// What stopping with SIGINT took.
#[derive(Debug, Clone)]
pub struct StopReport {
    pub status: ExitStatus,
    /// SIGINT to the line with the final kernel counters (None: never printed).
    pub final_stats: Option<Duration>,
    /// SIGINT to exit.
    pub gone: Duration,
    /// Still running after the grace period: killed.
    pub killed: bool,
    /// Its BPF programs, links and maps that still existed after it exited.
    pub left_progs: usize,
    pub left_links: usize,
    pub left_maps: usize,
    /// Counters from its exit summary (else its last stats line).
    pub counters: Counters,
}

pub struct Sensor {
    child: Option<Child>,
    pub pid: u32,
    pub spec: Spec,
    out: Shared,
    stats: stats::StatsTail,
    rss: proc::RssSampler,
    /// Start to ready.
    pub startup: Duration,
    // Dropped after the child is stopped (fields drop after Drop::drop).
    pub cgroup: Option<CpuLimit>,
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

/// In the child, before exec: join the cgroup, so the sensor never runs
/// unlimited. Only async-signal-safe calls.
fn join_cgroup_before_exec(cmd: &mut Command, procs: &Path) -> Result<()> {
    let procs = CString::new(procs.as_os_str().as_encoded_bytes()).context("cgroup path")?;
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
    Ok(())
}

/// In the child, before exec: SIGINT's default action back. A shell starts
/// background jobs with SIGINT ignored, and a sensor that inherits that (a
/// shell script's trap cannot undo it) would not stop on the SIGINT the
/// benchmark's stop sends. Only async-signal-safe calls.
fn default_sigint_before_exec(cmd: &mut Command) {
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
}

impl Sensor {
    /// Starts the sensor and waits until it is ready: harrier's start line
    /// (rules loaded, attached), or Falco's first metrics line (its capture
    /// has started and events flow).
    pub fn start(spec: &Spec) -> Result<Sensor> {
        std::fs::create_dir_all(&spec.workdir)
            .with_context(|| format!("creating {}", spec.workdir.display()))?;
        for p in [spec.alerts_path(), spec.stats_path()] {
            let _ = std::fs::remove_file(p);
        }
        let cgroup = match spec.cpus {
            Some(c) => {
                Some(CpuLimit::create(&format!("harrier-bench-{}-{}", std::process::id(), spec.name), c)?)
            }
            None => None,
        };
        let mut cmd = Command::new(&spec.binary);
        cmd.args(spec.command_args()?);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        default_sigint_before_exec(&mut cmd);
        if let Some(cg) = &cgroup {
            join_cgroup_before_exec(&mut cmd, &cg.procs)?;
        }
        let t0 = Instant::now();
        let mut child = cmd.spawn().with_context(|| format!("starting {}", spec.binary.display()))?;
        let pid = child.id();
        let out: Shared = Arc::default();
        follow(child.stderr.take().expect("stderr is piped"), out.clone());
        follow(child.stdout.take().expect("stdout is piped"), out.clone());
        let mut s = Sensor {
            child: Some(child),
            pid,
            spec: spec.clone(),
            out,
            stats: stats::StatsTail::new(spec.stats_path()),
            rss: proc::RssSampler::start(pid, spec.rss_period),
            startup: Duration::ZERO,
            cgroup,
        };
        s.wait_ready(t0 + spec.ready_timeout)?;
        s.startup = t0.elapsed();
        Ok(s)
    }

    fn ready(&mut self, lines: &Lines) -> bool {
        match self.spec.kind {
            Kind::Harrier => lines.lines.iter().any(|(_, l)| l.contains(" rules loaded, ")),
            // Its first metrics line comes from the event loop, after
            // start_capture attached its programs.
            Kind::Falco => {
                self.stats.poll();
                self.stats.lines > 0
                    && (!self.spec.ready_needs_bpf || !bpf::owned(&[self.pid]).links.is_empty())
            }
        }
    }

    fn wait_ready(&mut self, end: Instant) -> Result<()> {
        let out = self.out.clone();
        let (lock, cv) = &*out;
        let mut lines = lock.lock().unwrap();
        loop {
            if self.ready(&lines) {
                return Ok(());
            }
            let exited = lines.closed == 2;
            let now = Instant::now();
            if exited || now >= end {
                let why = if exited { "exited" } else { "did not start in time" };
                let tail: Vec<&str> =
                    lines.lines.iter().rev().take(30).rev().map(|(_, l)| l.as_str()).collect();
                bail!("{} {why}; its output:\n  {}", self.spec.binary.display(), tail.join("\n  "));
            }
            // Falco's readiness is a file: look again every 50 ms.
            lines = cv.wait_timeout(lines, (end - now).min(Duration::from_millis(50))).unwrap().0;
        }
    }

    /// Counters of its newest stats line.
    pub fn counters(&mut self) -> Counters {
        self.stats.poll()
    }

    /// Whether its stats lines carry a pre-filter syscall counter (harrier).
    pub fn has_syscalls_counter(&self) -> bool {
        self.stats.has_syscalls
    }

    /// CPU and RSS of its process tree now.
    pub fn usage(&self) -> proc::Usage {
        proc::tree_usage(self.pid)
    }

    /// Median and peak RSS of its tree between two instants (sampled).
    pub fn rss(&self, from: Instant, to: Instant) -> proc::Rss {
        self.rss.window(from, to)
    }

    /// The BPF programs and links its processes hold now.
    pub fn bpf(&self) -> bpf::Owned {
        bpf::owned(&proc::tree(self.pid))
    }

    /// Its output lines so far (stderr and stdout, in arrival order).
    pub fn output(&self) -> Vec<String> {
        self.out.0.lock().unwrap().lines.iter().map(|(_, l)| l.clone()).collect()
    }

    /// Its alerts so far (the JSON file output), one value per line; lines
    /// that are not JSON are an error (a sensor writing half a line is a bug).
    pub fn alerts(&self) -> Result<Vec<serde_json::Value>> {
        read_alerts(&self.spec.alerts_path())
    }

    /// SIGINT, then wait (SIGKILL after `grace`); timed, and checked for
    /// BPF programs and links left behind.
    pub fn stop_within(&mut self, grace: Duration) -> Result<StopReport> {
        let Some(mut child) = self.child.take() else { bail!("already stopped") };
        let held = self.bpf();
        let before = self.counters();
        let t0 = Instant::now();
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let mut killed = false;
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if t0.elapsed() >= grace {
                killed = true;
                let _ = child.kill();
                break child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let gone = t0.elapsed();
        // Its last lines are read by the output threads: wait for both EOFs.
        let (lock, cv) = &*self.out;
        let lines = lock.lock().unwrap();
        let lines = cv.wait_timeout_while(lines, Duration::from_secs(2), |l| l.closed < 2).unwrap().0;
        let final_stats = lines
            .lines
            .iter()
            .find(|(t, l)| *t >= t0 && stats::is_final_stats_line(l))
            .map(|(t, _)| t.duration_since(t0));
        let text: Vec<String> =
            lines.lines.iter().filter(|(t, _)| *t >= t0).map(|(_, l)| l.clone()).collect();
        drop(lines);
        let counters = stats::final_counters(&text).unwrap_or_else(|| {
            let last = self.stats.poll();
            if last == Counters::default() {
                before
            } else {
                last
            }
        });
        // Freeing waits for RCU and workqueues: harrier's maps take up to
        // ~2 s on a loaded machine; what is still there after 5 s stays.
        let (left_progs, left_links, left_maps) = bpf::left_after_exit(&held, Duration::from_secs(5));
        Ok(StopReport { status, final_stats, gone, killed, left_progs, left_links, left_maps, counters })
    }

    pub fn stop(&mut self) -> Result<StopReport> {
        self.stop_within(Duration::from_secs(15))
    }
}

impl Drop for Sensor {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.stop();
        }
    }
}

/// A JSON-lines alert file; missing: none yet.
pub fn read_alerts(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{}:{}: not a JSON alert", path.display(), i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests;
