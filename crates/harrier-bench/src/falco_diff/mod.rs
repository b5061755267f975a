//! `harrier-bench falco-diff`: Falco and `harrier run` attached at the same
//! time with the same rule files and config, one workload (the battery of
//! behaviours, or a cargo build and test of the project), then every alert
//! compared: matched by rule, process and time, or only one sensor's; each
//! output field of a matched pair compared. The report (a table per rules
//! file and per rule, every difference with its explanation) is written as
//! markdown, with the alerts themselves as JSON for the expected data of
//! Harrier's tests.
//!
//! Falco is never part of the project: its binary and config are given by path.

mod compare;
mod config;
mod expected;
mod explain;
mod report;
mod workload;

use crate::sensor::{Kind, Sensor, Spec};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The Falco binary (e.g. /opt/falco-ref/bin/falco).
    #[arg(long)]
    falco: PathBuf,
    /// Falco's config (engine, container plugin, append_output): both sensors read it.
    #[arg(long)]
    falco_config: PathBuf,
    /// Rule files for both (default: Falco's stable, incubating and sandbox files, see FALCO_RULES_DIR).
    #[arg(long = "rules", short = 'r')]
    rules: Vec<String>,
    /// The harrier binary (default: beside this one).
    #[arg(long)]
    harrier: Option<PathBuf>,
    /// What runs under both: `battery` or `cargo` (a build and test of a scratch clone).
    #[arg(long, default_value = "battery")]
    workload: String,
    /// Only the battery's behaviours whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// The git checkout the cargo workload clones (default: the current directory).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Leave the memory cgroup this process is in (this VM's /process_api/<id>, which
    /// Falco's container plugin takes for a container): run where Falco sees the host.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    host_cgroup: bool,
    /// Falco's engine.modern_ebpf.buf_size_preset for the run (its config's 4 is 8 MB; 6 is
    /// 32 MB, one buffer for this VM's two CPUs); harrier gets 16 MB per CPU.
    #[arg(long, default_value_t = 6)]
    falco_buffer_preset: u32,
    /// The report (markdown); the alerts go beside it as <name>.json.
    #[arg(long, default_value = "docs/falco-diff.md")]
    out: PathBuf,
    /// Also write Falco's alerts of the battery here, as the expected data of
    /// Harrier's test (crates/harrier-engine/tests/data/falco-battery.json).
    #[arg(long)]
    expected: Option<PathBuf>,
    /// Sensor files (alerts, stats, the derived config).
    #[arg(long)]
    workdir: Option<PathBuf>,
}

/// What both sensors said, and when the workload ran.
pub struct Capture {
    pub falco: Vec<Value>,
    pub harrier: Vec<Value>,
    /// Wall-clock ns: the workload's start and end.
    pub window: (u64, u64),
    /// Each behaviour: (name, place, rules it is about, start ns, end ns, error).
    pub steps: Vec<workload::Step>,
    /// The pid whose descendants are the workload's processes.
    pub root_pid: u32,
}

pub fn run_cli(a: Args) -> Result<()> {
    if !a.falco.exists() {
        bail!("no Falco binary at {}", a.falco.display());
    }
    if a.expected.is_some() && (a.workload != "battery" || a.only.is_some()) {
        bail!("--expected records the whole battery: not with --workload {} or --only", a.workload);
    }
    let rules = if a.rules.is_empty() { default_rules()? } else { a.rules.clone() };
    let harrier = match &a.harrier {
        Some(h) => h.clone(),
        None => std::env::current_exe()?.with_file_name("harrier"),
    };
    let workdir = a.workdir.clone().unwrap_or_else(|| {
        PathBuf::from(format!("/var/tmp/.harrier-bench-falco-diff-{}", std::process::id()))
    });
    std::fs::create_dir_all(&workdir).with_context(|| format!("creating {}", workdir.display()))?;
    let cfg = config::derive(&a.falco_config, &workdir)?;
    let cgroups = if a.host_cgroup { Some(config::HostCgroups::enter()?) } else { None };

    let mut h = Spec::new(Kind::Harrier, &harrier, &workdir, "harrier");
    h.config = Some(cfg.clone());
    h.rules = rules.clone();
    // As much ring as Falco gets (two CPUs: 2 x 16 MB), for the same reason.
    h.args = vec!["--buffer-size".into(), "16M".into()];
    let mut f = Spec::new(Kind::Falco, &a.falco, &workdir, "falco");
    f.config = Some(cfg);
    f.rules = rules.clone();
    // Falco drops events under this machine's load with its default 8 MB buffer; a
    // larger one keeps the comparison about alerts (drops are still counted).
    f.args = vec!["-o".into(), format!("engine.modern_ebpf.buf_size_preset={}", a.falco_buffer_preset)];
    say(&format!("starting harrier run and Falco ({} rule files)", rules.len()));
    let mut hs = Sensor::start(&h)?;
    let mut fs = Sensor::start(&f)?;
    // Start-up settles (each sees the other load its BPF programs: before the window).
    std::thread::sleep(Duration::from_secs(2));
    let mut drops = || (fs.counters().drops, hs.counters().drops);
    let work = workload::run(&a.workload, a.only.as_deref(), &a.repo, &workdir, &mut drops)?;
    // Late events drained and alerts written.
    std::thread::sleep(Duration::from_secs(3));
    let fstop = fs.stop()?;
    let hstop = hs.stop()?;
    drop(cgroups);
    let cap = Capture {
        falco: fs.alerts()?,
        harrier: hs.alerts()?,
        window: work.window,
        steps: work.steps,
        root_pid: std::process::id(),
    };
    say(&format!(
        "Falco: {} alerts, {} drops; harrier: {} alerts, {} drops",
        cap.falco.len(),
        fstop.counters.drops,
        cap.harrier.len(),
        hstop.counters.drops
    ));
    let diff = compare::compare(&cap, &rules)?;
    report::write(&a.out, &a.workload, &cap, &diff, (fstop.counters.drops, hstop.counters.drops))?;
    if let Some(p) = &a.expected {
        expected::write(p, &cap, &diff)?;
        say(&format!("expected data: {}", p.display()));
    }
    // A scratch workdir of our own goes (the report keeps the alerts); a given one stays.
    if a.workdir.is_none() {
        let _ = std::fs::remove_dir_all(&workdir);
    }
    say(&format!("report: {}", a.out.display()));
    println!("{}", report::summary(&diff));
    Ok(())
}

/// Falco's three rule files (FALCO_RULES_DIR or where the project's machines keep them).
fn default_rules() -> Result<Vec<String>> {
    let stable = crate::rules_load::stable_rules()?;
    let dir = std::path::Path::new(&stable).parent().context("rules dir")?.to_path_buf();
    Ok(["falco_rules.yaml", "falco-incubating_rules.yaml", "falco-sandbox_rules.yaml"]
        .iter()
        .map(|f| dir.join(f).display().to_string())
        .collect())
}

fn say(s: &str) {
    eprintln!("falco-diff: {s}");
}
