//! `harrier-bench vs-falco` (`make bench-vs-falco`): `harrier run` side by
//! side with a real Falco (its binary and config given by path; Falco is
//! never part of the project), the same rule files for both, interleaved
//! with no sensor and with Harrier's attach plan running empty programs (the
//! floor), on four workloads (work.rs). Then a pass with BPF run-time stats
//! on (each sensor's own programs, found by owner), each sensor's highest
//! drop-free rate of the mix under a 1-CPU quota (rate.rs), and every stop
//! timed. Medians and ratios in a table and a PNG (report.rs).

mod rate;
mod report;
mod softirqd;
mod work;

use crate::rules_load::{interrupted, stable_rules};
use crate::sensor::{bpf, proc::Rss, Kind, Sensor, Spec, StopReport};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::time::{Duration, Instant};
pub use work::Workload;

#[derive(clap::Args)]
pub struct Args {
    /// The Falco binary (e.g. /opt/falco-ref/bin/falco); without it, Harrier only.
    #[arg(long)]
    falco: Option<PathBuf>,
    /// Falco's config (its engine and plugins; the container plugin for the stable rules).
    #[arg(long)]
    falco_config: Option<PathBuf>,
    /// Rule file for both sensors (repeatable; default: Falco's stable rules, see FALCO_RULES_DIR).
    #[arg(long = "rules", short = 'r')]
    rules: Vec<String>,
    /// The harrier binary (default: beside this one).
    #[arg(long)]
    harrier: Option<PathBuf>,
    /// More `harrier run` arguments, e.g. "--attach per-syscall".
    #[arg(long, allow_hyphen_values = true)]
    harrier_args: Option<String>,
    /// Interleaved rounds (medians of these).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Rounds of the pass with BPF run-time stats on (0: skip it).
    #[arg(long, default_value_t = 3)]
    bpf_rounds: usize,
    /// A short run (~3 min with Falco): 1 round, small workloads, two rate steps.
    #[arg(long)]
    quick: bool,
    /// Workloads: mix, redis, getpid, exec.
    #[arg(long, value_delimiter = ',', default_value = "mix,redis,getpid,exec")]
    workloads: Vec<String>,
    /// Seconds of the mix per run.
    #[arg(long, default_value_t = 10.0)]
    mix_secs: f64,
    /// The mix runs /bin/true every N iterations of 10 syscalls.
    #[arg(long, default_value_t = 200)]
    exec_every: u64,
    /// redis-benchmark -n (per test; 11 tests).
    #[arg(long, default_value_t = 100_000)]
    redis_requests: u64,
    #[arg(long, default_value_t = 10_000_000)]
    getpid_calls: u64,
    /// Iterations of the exec loop.
    #[arg(long, default_value_t = 3000)]
    execs: u64,
    /// Leave out the empty-program floor rows.
    #[arg(long)]
    no_floor: bool,
    /// Also `harrier run --no-entry-copies`: pointer arguments read at exit, as
    /// Falco reads them where its TOCTOU programs do not attach (this VM);
    /// compared with its own floor (empty programs, no sys_enter ones).
    #[arg(long)]
    no_entry_copies_row: bool,
    /// Also `harrier run --entry-copies-only`: the entry copies made, every
    /// other program returning once it has the task. The least a sensor with
    /// entry copies costs on this attach plan, against the same floor.
    #[arg(long)]
    entry_copies_row: bool,
    /// Also `harrier run` enforcing (kill) the stable rules the kernel decides
    /// (ENFORCED_RULES): enforcement's cost, in the same run.
    #[arg(long)]
    enforce_row: bool,
    /// Also `harrier run --no-dir-cache`: every path walked to the root.
    #[arg(long)]
    no_dir_cache_row: bool,
    /// Rate steps of the mix for the drop-free rate under 1 CPU ("max": unpaced; empty: skip).
    #[arg(long, value_delimiter = ',', default_value = "100000,150000,200000,250000,300000,max")]
    rate_steps: Vec<String>,
    /// Seconds per rate step.
    #[arg(long, default_value_t = 5.0)]
    rate_secs: f64,
    /// Where vs-falco.md and vs-falco.png go.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

/// A column of the comparison: no sensor, or a sensor and its arguments.
#[derive(Debug, Clone)]
pub struct Setup {
    pub label: String,
    pub kind: Option<Kind>,
    pub args: Vec<String>,
}

pub const NONE: &str = "no sensor";
pub const FALCO: &str = "Falco";
pub const HARRIER: &str = "harrier run";
pub const FLOOR: &str = "harrier run, empty programs";
pub const NO_ENTRY_COPIES: &str = "harrier run, no entry copies";
/// The floor of the attach without entry copies (no sys_enter programs).
pub const FLOOR_NO_ENTRY: &str = "harrier run, empty programs, no entry copies";
pub const COPIES_ONLY: &str = "harrier run, entry copies only";
pub const ENFORCING: &str = "harrier run, enforcing";
pub const NO_DIR_CACHE: &str = "harrier run, no path cache";
/// Falco's stable rules `harrier rules check --enforce` finds decided in the kernel.
pub const ENFORCED_RULES: [&str; 12] = [
    "Read sensitive file untrusted",
    "Read sensitive file trusted after startup",
    "Clear Log Activities",
    "Execution from /dev/shm",
    "Remove Bulk Data from Disk",
    "Fileless execution via memfd_create",
    "Search Private Keys or Passwords",
    "Find AWS Credentials",
    "Create Symlink Over Sensitive Files",
    "Create Hardlink Over Sensitive Files",
    "PTRACE attached to process",
    "PTRACE anti-debug attempt",
];

/// One run of one workload under one setup.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub done: work::Done,
    /// Sensor CPU (its process tree) while the workload ran, seconds.
    pub cpu_s: f64,
    pub rss: Rss,
    /// The sensor's peak RSS over its life (VmHWM).
    pub hwm_kb: u64,
    pub drops: u64,
    pub alerts: usize,
    pub stop: Option<StopReport>,
    pub startup: Duration,
    /// BPF pass: what each of its programs ran during the workload.
    pub progs: Vec<bpf::ProgStat>,
}

struct Run {
    o: Opts,
    bench: work::Bench,
    workdir: PathBuf,
    started: usize,
}

pub struct Opts {
    pub falco: Option<(PathBuf, PathBuf)>,
    pub harrier: PathBuf,
    pub rules: Vec<String>,
    pub setups: Vec<Setup>,
    pub workloads: Vec<Workload>,
    pub rounds: usize,
    pub bpf_rounds: usize,
    pub rate_steps: Vec<u64>,
    pub rate_secs: Duration,
    pub exec_every: u64,
    pub out: PathBuf,
    /// Idle time after a sensor is ready, before measuring (its start-up work settles).
    pub settle: Duration,
}

fn secs(v: f64, what: &str) -> Result<Duration> {
    anyhow::ensure!(v > 0.0 && v < 1e6, "{what} must be a positive number of seconds, not {v}");
    Ok(Duration::from_secs_f64(v))
}

/// Checks the command line, then runs.
pub fn run_cli(a: Args) -> Result<()> {
    let falco = match (a.falco, a.falco_config) {
        (Some(f), Some(c)) => {
            anyhow::ensure!(f.is_file(), "--falco {}: no such file", f.display());
            anyhow::ensure!(c.is_file(), "--falco-config {}: no such file", c.display());
            Some((f, c))
        }
        (Some(_), None) => bail!("--falco needs --falco-config (its falco.yaml)"),
        (None, Some(_)) => bail!("--falco-config needs --falco"),
        (None, None) => None,
    };
    let harrier = match a.harrier {
        Some(h) => h,
        None => std::env::current_exe()?.with_file_name("harrier"),
    };
    anyhow::ensure!(
        harrier.is_file(),
        "{} not found (cargo build --release -p harrier-cli)",
        harrier.display()
    );
    let rules = if a.rules.is_empty() { vec![stable_rules()?] } else { a.rules };
    for r in &rules {
        anyhow::ensure!(std::path::Path::new(r).exists(), "rule file {r}: no such file");
    }
    let workloads = a.workloads.iter().map(|w| Workload::parse(w)).collect::<Result<Vec<_>>>()?;
    anyhow::ensure!(!workloads.is_empty(), "--workloads: name at least one");
    anyhow::ensure!(a.rounds >= 1, "--rounds must be at least 1");
    let rate_steps = a
        .rate_steps
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| match s.as_str() {
            "max" => Ok(crate::rules_load::MAX_RATE),
            n => n
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .context(format!("a rate step is syscalls/s or 'max', not '{s}'")),
        })
        .collect::<Result<Vec<_>>>()?;
    let harrier_args: Vec<String> =
        a.harrier_args.as_deref().unwrap_or("").split_whitespace().map(String::from).collect();
    let mut setups = vec![Setup { label: NONE.into(), kind: None, args: vec![] }];
    if falco.is_some() {
        setups.push(Setup { label: FALCO.into(), kind: Some(Kind::Falco), args: vec![] });
    }
    setups.push(Setup { label: HARRIER.into(), kind: Some(Kind::Harrier), args: harrier_args.clone() });
    if a.no_entry_copies_row {
        let mut args = harrier_args.clone();
        args.push("--no-entry-copies".into());
        setups.push(Setup { label: NO_ENTRY_COPIES.into(), kind: Some(Kind::Harrier), args });
    }
    if a.no_dir_cache_row {
        let mut args = harrier_args.clone();
        args.push("--no-dir-cache".into());
        setups.push(Setup { label: NO_DIR_CACHE.into(), kind: Some(Kind::Harrier), args });
    }
    if a.entry_copies_row {
        let mut args = harrier_args.clone();
        args.push("--entry-copies-only".into());
        setups.push(Setup { label: COPIES_ONLY.into(), kind: Some(Kind::Harrier), args });
    }
    if a.enforce_row {
        let mut args = harrier_args.clone();
        for r in ENFORCED_RULES {
            args.extend(["--enforce".to_string(), format!("{r}=kill")]);
        }
        setups.push(Setup { label: ENFORCING.into(), kind: Some(Kind::Harrier), args });
    }
    if !a.no_floor {
        let mut args = harrier_args;
        args.push("--empty-programs".into());
        setups.push(Setup { label: FLOOR.into(), kind: Some(Kind::Harrier), args: args.clone() });
        if a.no_entry_copies_row {
            args.push("--no-entry-copies".into());
            setups.push(Setup { label: FLOOR_NO_ENTRY.into(), kind: Some(Kind::Harrier), args });
        }
    }
    let mut sizes = work::Sizes {
        mix: secs(a.mix_secs, "--mix-secs")?,
        exec_every: a.exec_every,
        redis_requests: a.redis_requests.max(1),
        getpid_calls: a.getpid_calls.max(1),
        execs: a.execs.max(1),
    };
    let (mut rounds, mut bpf_rounds, mut rate_steps, mut rate_secs) =
        (a.rounds, a.bpf_rounds, rate_steps, secs(a.rate_secs, "--rate-secs")?);
    if a.quick {
        (rounds, bpf_rounds) = (1, bpf_rounds.min(1));
        sizes.mix = sizes.mix.min(Duration::from_secs(3));
        sizes.redis_requests = sizes.redis_requests.min(10_000);
        sizes.getpid_calls = sizes.getpid_calls.min(1_000_000);
        sizes.execs = sizes.execs.min(300);
        if rate_steps.len() > 2 {
            rate_steps = vec![200_000, crate::rules_load::MAX_RATE];
        }
        rate_secs = rate_secs.min(Duration::from_secs(2));
    }
    let o = Opts {
        falco,
        harrier,
        rules,
        setups,
        workloads,
        rounds,
        bpf_rounds,
        rate_steps,
        rate_secs,
        exec_every: a.exec_every,
        out: a.out,
        settle: Duration::from_secs(1),
    };
    run(o, sizes)
}

impl Run {
    fn spec(&mut self, setup: &Setup) -> Spec {
        self.started += 1;
        let kind = setup.kind.expect("a sensor");
        let name = format!("{}-{}", if kind == Kind::Falco { "falco" } else { "harrier" }, self.started);
        let binary = match (kind, &self.o.falco) {
            (Kind::Falco, Some((f, _))) => f.clone(),
            _ => self.o.harrier.clone(),
        };
        let mut spec = Spec::new(kind, binary, &self.workdir, &name);
        if kind == Kind::Falco {
            spec.config = self.o.falco.as_ref().map(|f| f.1.clone());
        }
        spec.rules = self.o.rules.clone();
        spec.args = setup.args.clone();
        spec
    }

    /// One workload under one setup; with `bpf_stats` (held by the caller),
    /// what the sensor's own programs ran.
    fn measure(&mut self, w: Workload, setup: &Setup, bpf_stats: bool) -> Result<Sample> {
        interrupted()?;
        if setup.kind.is_none() {
            return Ok(Sample { done: self.bench.run(w)?, ..Sample::default() });
        }
        let spec = self.spec(setup);
        let mut s = Sensor::start(&spec)?;
        std::thread::sleep(self.o.settle);
        let owned = s.bpf();
        let p0 = if bpf_stats { bpf::stats(&owned) } else { Vec::new() };
        let (u0, t0) = (s.usage(), Instant::now());
        let done = self.bench.run(w);
        let (u1, t1) = (s.usage(), Instant::now());
        let progs = if bpf_stats { bpf::delta(&p0, &bpf::stats(&owned)) } else { Vec::new() };
        let rss = s.rss(t0, t1);
        let stop = s.stop()?;
        let done = done?;
        if !stop.status.success() {
            eprintln!("vs-falco: warning: {} exited with {}", setup.label, stop.status);
        }
        Ok(Sample {
            done,
            cpu_s: u1.cpu_s - u0.cpu_s,
            rss,
            hwm_kb: u1.hwm_kb,
            drops: stop.counters.drops,
            alerts: s.alerts()?.len(),
            startup: s.startup,
            stop: Some(stop),
            progs,
        })
    }
}

/// Samples per workload and setup, in `o.workloads` × `o.setups` order.
pub type Samples = Vec<Vec<Vec<Sample>>>;

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn version(binary: &std::path::Path, arg: &str) -> String {
    std::process::Command::new(binary)
        .arg(arg)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

pub fn run(o: Opts, sizes: work::Sizes) -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("vs-falco needs root (it runs the sensors and creates a cgroup)");
    }
    crate::rules_load::catch_signals();
    let t_start = Instant::now();
    let load_before = loadavg();
    let workdir = PathBuf::from(format!("/var/tmp/.harrier-bench-vsfalco-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    let _cleanup = RemoveDir(workdir.clone());
    eprintln!("vs-falco: counting each workload's syscalls per op (no sensor)");
    let bench = work::Bench::new(sizes.clone(), &o.workloads)?;
    let mut r = Run { o, bench, workdir, started: 0 };
    let (nw, ns) = (r.o.workloads.len(), r.o.setups.len());
    let mut samples: Samples = vec![vec![Vec::new(); ns]; nw];
    let setups = r.o.setups.clone();
    let workloads = r.o.workloads.clone();
    for round in 0..r.o.rounds {
        for (wi, &w) in workloads.iter().enumerate() {
            // Each round starts the order one setup later: no setup always
            // runs right after another one's stop.
            for k in 0..ns {
                let si = (k + round) % ns;
                eprintln!(
                    "vs-falco: round {}/{}: {} under {}",
                    round + 1,
                    r.o.rounds,
                    w.name(),
                    setups[si].label
                );
                let s = r.measure(w, &setups[si], false)?;
                eprintln!("vs-falco:   {}", report::sample_line(w, &s));
                samples[wi][si].push(s);
            }
        }
    }
    let mut bpf_samples: Samples = vec![vec![Vec::new(); ns]; nw];
    if r.o.bpf_rounds > 0 {
        // Process-scoped BPF_ENABLE_STATS: every program on the machine is
        // timed while this fd is held, the sensors' own included.
        let _stats = harrier_capture::enable_run_time_stats()?;
        for round in 0..r.o.bpf_rounds {
            for (wi, &w) in workloads.iter().enumerate() {
                for (si, setup) in setups.iter().enumerate().filter(|(_, s)| s.kind.is_some()) {
                    eprintln!(
                        "vs-falco: BPF stats {}/{}: {} under {}",
                        round + 1,
                        r.o.bpf_rounds,
                        w.name(),
                        setup.label
                    );
                    bpf_samples[wi][si].push(r.measure(w, setup, true)?);
                }
            }
        }
    }
    let mut rates = Vec::new();
    if !r.o.rate_steps.is_empty() {
        for setup in setups.iter().filter(|s| {
            s.kind.is_some() && !s.args.iter().any(|a| a == "--empty-programs" || a == "--entry-copies-only")
        }) {
            interrupted()?;
            let spec = r.spec(setup);
            rates.push(rate::search(&setup.label, spec, &r.o.rate_steps, r.o.rate_secs, r.o.exec_every)?);
        }
    }
    let meta = report::Meta {
        // "Falco version: 0.44.1" → "Falco 0.44.1"
        falco_version: r.o.falco.as_ref().map(|(f, _)| version(f, "--version").replace("version: ", "")),
        harrier_version: version(&r.o.harrier, "--version"),
        load_before,
        load_after: loadavg(),
        minutes: t_start.elapsed().as_secs_f64() / 60.0,
        sizes,
        per_op: r.bench.per_op.to_vec(),
    };
    report::write(&r.o, &meta, &samples, &bpf_samples, &rates)
}

struct RemoveDir(PathBuf);
impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::ENFORCED_RULES;
    use harrier_engine::guard::{compile, Exempt};
    use harrier_rules::ruleset::{LoadOptions, RuleSet};

    /// The enforcing row enforces exactly the stable rules the kernel decides
    /// (a lowering that decides more, or less, changes this list).
    #[test]
    fn the_enforcing_row_is_what_the_kernel_decides_of_the_stable_rules() {
        let path = crate::rules_load::stable_rules().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let rules = RuleSet::load(&[(path.as_str(), text)], &LoadOptions::default()).unwrap();
        let interest = harrier_engine::interest::interest(&rules);
        let active: Vec<u32> =
            (0..rules.rules().len() as u32).filter(|&i| rules.rule(i).is_active()).collect();
        let plan = compile(&rules, &active, &Exempt::default(), &interest.syscalls, 1, true).unwrap();
        let mut decided: Vec<&str> =
            plan.decisions.iter().filter(|d| d.user_space.is_none()).map(|d| d.rule.as_str()).collect();
        let mut want = ENFORCED_RULES.to_vec();
        decided.sort_unstable();
        want.sort_unstable();
        assert_eq!(decided, want);
    }
}
