//! `harrier-bench rules-load` (`make bench-rules`): Falco's performance-testing
//! method against `harrier run`. Alert-producing actions run as
//! event-generator's `bench --loop` runs them (see harrier_actions::generator)
//! and their alerts come back over Harrier's HTTP output; meanwhile a load
//! thread on the other core raises the rate of captured syscalls step by
//! step, and the sensor runs in a CPU-quota cgroup (0.5, 1, 2 CPUs) with
//! Falco's stable rules. One event-generator round per load step.

pub mod load;
mod report;

use crate::sensor::{self, Kind, Sensor};
use anyhow::{bail, Context, Result};
use harrier_actions::{Generator, Kit, Receiver, Tally};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use load::MAX as MAX_RATE;

#[derive(clap::Args)]
pub struct Args {
    /// A smoke run of under a minute (0.5 CPU, two load steps, 2 s rounds).
    #[arg(long)]
    quick: bool,
    /// Rule file (repeatable; default: Falco's stable rules, see FALCO_RULES_DIR).
    #[arg(long = "rules", short = 'r')]
    rules: Vec<String>,
    /// CPU limits of the sensor's cgroup.
    #[arg(long, value_delimiter = ',', default_value = "0.5,1,2")]
    cpus: Vec<f64>,
    /// Load steps, syscalls/s ("max": as fast as one CPU goes).
    #[arg(long, value_delimiter = ',', default_value = "100000,250000,500000,750000,1000000,max")]
    rates: Vec<String>,
    /// Seconds of actions per round (the rest after it lasts as long).
    #[arg(long, default_value_t = 5.0)]
    round: f64,
    /// Initial sleep before each action, ms (halved after each clean round).
    #[arg(long, default_value_t = 10.0)]
    sleep_ms: f64,
    /// A sensor variant: "LABEL=extra harrier run args" (repeatable; default: with and
    /// without kernel filtering when harrier run has --no-kernel-filter).
    #[arg(long = "variant")]
    variants: Vec<String>,
    /// The harrier binary (default: beside this one).
    #[arg(long)]
    harrier: Option<PathBuf>,
    /// Count every alert by rule name, as event-generator does, not only the generator's own.
    #[arg(long)]
    any_process: bool,
    /// Also run the actions left out by default (their rule cannot fire yet).
    #[arg(long)]
    all_actions: bool,
    /// Rounds of rules-cost's user-space ns/event measurement (0: skip).
    #[arg(long, default_value_t = 3)]
    cost_rounds: usize,
    /// Where the table and chart go.
    #[arg(long, default_value = "docs/bench")]
    out: PathBuf,
}

fn parse_rate(s: &str) -> Result<u64> {
    if s == "max" {
        return Ok(MAX_RATE);
    }
    s.parse::<u64>().map_err(|_| anyhow::anyhow!("a load step is a number of syscalls/s or 'max', not '{s}'"))
}

fn parse_variant(s: &str) -> Result<(String, Vec<String>)> {
    let (label, args) = s.split_once('=').unwrap_or((s, ""));
    anyhow::ensure!(!label.trim().is_empty(), "a variant needs a label: 'LABEL=ARGS', not '{s}'");
    Ok((label.trim().to_string(), args.split_whitespace().map(String::from).collect()))
}

fn secs(v: f64, what: &str) -> Result<Duration> {
    anyhow::ensure!((0.0..1e6).contains(&v), "{what} must be a number of seconds from 0, not {v}");
    Ok(Duration::from_secs_f64(v))
}

/// Checks the command line, then runs.
pub fn run_cli(a: Args) -> Result<()> {
    let round = secs(a.round, "--round")?;
    let sleep = secs(a.sleep_ms / 1000.0, "--sleep-ms")?;
    anyhow::ensure!(round > sleep, "--round must be longer than the sleep (as event-generator requires)");
    for &c in &a.cpus {
        anyhow::ensure!(c > 0.0 && c <= 1024.0, "a CPU limit must be above 0 and at most 1024, not {c}");
    }
    run(Opts {
        quick: a.quick,
        rules: a.rules,
        cpus: a.cpus,
        rates: a.rates.iter().map(|r| parse_rate(r)).collect::<Result<_>>()?,
        round,
        sleep,
        variants: a.variants.iter().map(|v| parse_variant(v)).collect::<Result<_>>()?,
        harrier: a.harrier,
        out: a.out,
        any_process: a.any_process,
        all_actions: a.all_actions,
        rules_cost_rounds: a.cost_rounds,
    })
}

pub struct Opts {
    pub quick: bool,
    pub rules: Vec<String>,
    pub cpus: Vec<f64>,
    /// Load steps in syscalls/s (MAX_RATE: as fast as one CPU goes).
    pub rates: Vec<u64>,
    pub round: Duration,
    pub sleep: Duration,
    /// (label, extra `harrier run` arguments); empty: detected.
    pub variants: Vec<(String, Vec<String>)>,
    pub harrier: Option<PathBuf>,
    pub out: PathBuf,
    pub any_process: bool,
    pub all_actions: bool,
    pub rules_cost_rounds: usize,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// SIGINT and SIGTERM set a flag that [`interrupted`] turns into an error
/// between steps, so the bench stops its sensors and removes its cgroups.
pub(crate) fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        unsafe { libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
}

pub(crate) fn interrupted() -> Result<()> {
    if STOP.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(())
}

/// FALCO_RULES_DIR, else `shared/data/falco-rules` above the current
/// directory, else /work/shared/data/falco-rules (where the project's
/// machines keep Falco's files; they are not in the repository).
pub fn stable_rules() -> Result<String> {
    let name = "falco_rules.yaml";
    if let Some(d) = std::env::var_os("FALCO_RULES_DIR") {
        return Ok(Path::new(&d).join(name).display().to_string());
    }
    let mut p = std::env::current_dir()?;
    loop {
        let c = p.join("shared/data/falco-rules").join(name);
        if c.exists() {
            return Ok(c.display().to_string());
        }
        if !p.pop() {
            break;
        }
    }
    let fixed = Path::new("/work/shared/data/falco-rules").join(name);
    if fixed.exists() {
        return Ok(fixed.display().to_string());
    }
    bail!("Falco's stable rules not found: set FALCO_RULES_DIR or pass --rules FILE")
}

/// `files` loaded as `harrier run` loads them (its engine's fields).
pub fn load_rules(files: &[String]) -> Result<harrier_rules::ruleset::RuleSet> {
    let mut texts = Vec::new();
    for f in files {
        texts.push((f.clone(), std::fs::read_to_string(f).with_context(|| format!("reading rules {f}"))?));
    }
    let opts = harrier_rules::ruleset::LoadOptions {
        supported: Arc::new(harrier_engine::source::supported),
        ..Default::default()
    };
    harrier_rules::ruleset::RuleSet::load(&texts, &opts)
        .map_err(|d| anyhow::anyhow!("{}", d.last().map(|d| d.to_string()).unwrap_or_default()))
}

/// The names of the rules `harrier run` will evaluate from `files`.
fn active_rules(files: &[String]) -> Result<Vec<String>> {
    let rules = load_rules(files)?;
    Ok(rules.rules().iter().filter(|r| r.is_active()).map(|r| r.name.clone()).collect())
}

/// With vs without kernel-side filtering, when this `harrier run` has the flag.
fn detect_variants(harrier: &Path) -> Vec<(String, Vec<String>)> {
    let help = std::process::Command::new(harrier).args(["run", "--help"]).output();
    let has = help.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--no-kernel-filter"));
    let mut v = vec![("default".to_string(), Vec::new())];
    if has {
        v[0].0 = "kernel filter".into();
        v.push(("no kernel filter".into(), vec!["--no-kernel-filter".into()]));
    }
    v
}

/// One load step's round, as measured.
pub struct Row {
    pub variant: String,
    pub cpus: f64,
    pub target: u64,
    pub load_rate: f64,
    pub syscalls_rate: f64,
    pub events_rate: f64,
    pub drops: u64,
    pub cpu_pct: f64,
    pub rss_mb: f64,
    pub hwm_mb: f64,
    pub throttled: u64,
    pub round: harrier_actions::Round,
}

impl Row {
    /// No action got fewer alerts than it ran.
    pub fn no_lost_alert(&self) -> bool {
        self.round.per_action.iter().all(|a| a.actual >= a.expected && a.expected > 0)
    }
}

pub fn run(mut o: Opts) -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("rules-load needs root (it runs harrier run and creates a cgroup)");
    }
    if o.quick {
        o.cpus = vec![0.5];
        o.rates = vec![200_000, MAX_RATE];
        o.round = Duration::from_secs(2);
        // rules-cost records and replays a workload: a minute on a slow machine.
        o.rules_cost_rounds = 0;
    }
    let harrier = match o.harrier.clone() {
        Some(h) => h,
        None => std::env::current_exe()?.with_file_name("harrier"),
    };
    anyhow::ensure!(
        harrier.exists(),
        "{} not found (cargo build --release -p harrier-cli)",
        harrier.display()
    );
    if o.rules.is_empty() {
        o.rules = vec![stable_rules()?];
    }
    if o.variants.is_empty() {
        o.variants = detect_variants(&harrier);
    }
    catch_signals();

    let active = active_rules(&o.rules)?;
    let actions = harrier_actions::actions::select(active.iter().map(String::as_str), o.all_actions);
    anyhow::ensure!(!actions.is_empty(), "no action has a rule among the loaded rules");
    let names: Vec<&str> = actions.iter().map(|a| a.name).collect();
    eprintln!("rules-load: {} actions: {}", names.len(), names.join(", "));
    for a in harrier_actions::ACTIONS.iter().filter(|a| !names.contains(&a.name)) {
        match a.disabled {
            Some(why)
                if active.iter().any(|r| harrier_actions::normalise(r).eq_ignore_ascii_case(a.name)) =>
            {
                eprintln!("rules-load: {} left out (--all-actions runs it): {why}", a.name)
            }
            _ => eprintln!("rules-load: {}: its rule is not loaded", a.name),
        }
    }

    // User-space cost per event first, on a machine without the load.
    let cost = if o.rules_cost_rounds > 0 {
        crate::rules::measure(&o.rules[0], o.rules_cost_rounds, None)?
    } else {
        Vec::new()
    };
    interrupted()?;

    let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_cpu = (ncpus > 1).then_some(ncpus - 1);
    let kit = Kit::new()?;
    let generator_pid = (!o.any_process).then_some(std::process::id());
    let tally = Tally::new(&names, generator_pid);
    let receiver = Receiver::start(tally.clone())?;
    let load = load::Load::start(load_cpu, load::EXEC_EVERY)?;
    let workdir = PathBuf::from(format!("/var/tmp/.harrier-bench-rules-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    let _cleanup = RemoveDir(workdir.clone());

    // What the load thread can issue with no sensor attached: the ceiling of
    // the load steps on this machine.
    load.set_rate(MAX_RATE);
    let (i0, t0) = (load.issued(), Instant::now());
    std::thread::sleep(if o.quick { Duration::from_secs(1) } else { Duration::from_secs(3) });
    let capacity = (load.issued() - i0) as f64 / t0.elapsed().as_secs_f64();
    load.set_rate(0);
    eprintln!("rules-load: the load thread alone (no sensor) issues {capacity:.0} syscalls/s");
    interrupted()?;

    let total = (o.variants.len() * o.cpus.len() * o.rates.len()) as u64;
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} rounds {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    say(&pb, report::round_header());
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut pre_filter_counter = true;
    for (label, extra) in &o.variants {
        for &cpus in &o.cpus {
            pb.set_message(format!("{label}, {cpus} CPU: starting harrier run"));
            let tag = format!("{}-{}", rows.len(), (cpus * 100.0) as u32);
            let config = workdir.join(format!("harrier-{tag}.yaml"));
            std::fs::write(&config, harrier_actions::receiver::harrier_config(&receiver.url))
                .with_context(|| format!("writing {}", config.display()))?;
            let mut spec = sensor::Spec::new(Kind::Harrier, &harrier, &workdir, &tag);
            spec.config = Some(config);
            spec.rules = o.rules.clone();
            spec.args = extra.clone();
            spec.cpus = Some(cpus);
            spec.file_output = false; // alerts come by HTTP, as event-generator counts them
            spec.stats_interval = Duration::from_millis(100);
            let mut s = Sensor::start(&spec)?;
            let cg = s.cgroup.as_ref().expect("the sensor runs in a quota cgroup");
            if rows.is_empty() {
                let how = if cg.version == 1 { "v1 cpu.cfs_quota_us" } else { "v2 cpu.max" };
                notes.push(format!("CPU limits by cgroup {how}"));
            }
            let mut generator = Generator::new(actions.clone(), &kit, tally.clone(), o.sleep, true);
            tally.take(); // alerts from before this sensor do not count
            for &rate in &o.rates {
                pb.set_message(format!("{label}, {cpus} CPU, load {}", report::rate_label(rate)));
                load.set_rate(rate);
                let throttled = |s: &Sensor| s.cgroup.as_ref().map_or(0, |c| c.throttled());
                let (c0, u0, t0, i0, th0) =
                    (s.counters(), s.usage(), Instant::now(), load.issued(), throttled(&s));
                let round = generator.round(o.round, &STOP);
                let (c1, u1, secs, i1) = (s.counters(), s.usage(), t0.elapsed().as_secs_f64(), load.issued());
                interrupted()?;
                pre_filter_counter &= s.has_syscalls_counter();
                let row = Row {
                    variant: label.clone(),
                    cpus,
                    target: rate,
                    load_rate: (i1 - i0) as f64 / secs,
                    syscalls_rate: (c1.syscalls.saturating_sub(c0.syscalls)) as f64 / secs,
                    events_rate: (c1.events.saturating_sub(c0.events)) as f64 / secs,
                    drops: c1.drops.saturating_sub(c0.drops),
                    cpu_pct: (u1.cpu_s - u0.cpu_s) / secs * 100.0,
                    rss_mb: u1.rss_kb as f64 / 1024.0,
                    hwm_mb: u1.hwm_kb as f64 / 1024.0,
                    throttled: throttled(&s) - th0,
                    round,
                };
                say(&pb, report::round_line(&row));
                let off: Vec<String> = row
                    .round
                    .per_action
                    .iter()
                    .filter(|a| a.actual != a.expected)
                    .map(|a| format!("{} {}/{}", a.name, a.actual, a.expected))
                    .collect();
                if !off.is_empty() {
                    say(&pb, format!("  alerts/actions off: {}", off.join(", ")));
                }
                if let Some(e) = &row.round.first_error {
                    say(&pb, format!("  {} action errors; first: {e}", row.round.errors));
                }
                pb.inc(1);
                // Every step runs even after drops: on a shared machine a
                // drop can come from the sensor being starved for a moment.
                rows.push(row);
            }
            load.set_rate(0);
            pb.set_message(format!("{label}, {cpus} CPU: stopping harrier run"));
            let st = s.stop()?.status;
            for l in s.output().iter().filter(|l| {
                l.contains(" events, ") || l.contains("output http") || l.contains(" rules loaded, ")
            }) {
                notes.push(format!("{label}, {cpus} CPU: {}", l.trim_start_matches("harrier: ")));
            }
            if !st.success() {
                bail!("harrier run ({label}, {cpus} CPU) exited with {st}: {}", s.output().join("\n"));
            }
            interrupted()?;
        }
    }
    pb.finish_and_clear();
    load.finish()?;
    drop(receiver);
    if !pre_filter_counter {
        notes.push(
            "harrier run's stats file has no pre-filter `cur.syscalls` counter: syscalls/s is its `cur.events` \
             (events sent to user space), which kernel-side filtering would lower"
                .into(),
        );
    }
    if cost.is_empty() {
        notes.push(
            "user-space ns/event not measured (--quick or --cost-rounds 0): harrier-bench rules-cost".into(),
        );
    }
    let tally_notes = format!(
        "alerts received: {} ({} from other processes, {} for rules no action has, {} bad requests)",
        tally.received.load(Ordering::Relaxed),
        tally.foreign.load(Ordering::Relaxed),
        tally.unmatched.load(Ordering::Relaxed),
        tally.bad_requests.load(Ordering::Relaxed)
    );
    notes.push(tally_notes);
    let summary = report::Summary {
        rows: &rows,
        cost: &cost,
        notes: &notes,
        opts: &o,
        load_cpu,
        names: &names,
        capacity,
    };
    summary.write(&o.out)
}

/// A line above the progress bar, or on stderr when there is no terminal
/// (indicatif then hides the bar and drops its println).
fn say(pb: &ProgressBar, line: impl AsRef<str>) {
    if pb.is_hidden() {
        eprintln!("{}", line.as_ref());
    } else {
        pb.println(line);
    }
}

struct RemoveDir(PathBuf);
impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
