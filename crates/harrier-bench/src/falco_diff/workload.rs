//! What runs under both sensors: the battery, one behaviour after another
//! with a pause between them (each alert is attributed to the behaviour whose
//! window holds it), or a cargo build and test of a scratch clone of the
//! project (a busy real workload).

use anyhow::{bail, Context, Result};
use harrier_actions::battery::{self, Tools};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub struct Step {
    pub name: String,
    pub place: &'static str,
    pub rules: Vec<String>,
    pub start: u64,
    pub end: u64,
    pub error: Option<String>,
    /// Kernel drops of (Falco, Harrier) from its start to a little after its end
    /// (their stats lines come every second: an estimate).
    pub drops: (u64, u64),
}

pub struct Done {
    pub window: (u64, u64),
    pub steps: Vec<Step>,
}

pub fn now_ns() -> u64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    d.as_nanos() as u64
}

/// Cumulative kernel drops of (Falco, Harrier).
pub type Drops<'a> = &'a mut dyn FnMut() -> (u64, u64);

pub fn run(kind: &str, only: Option<&str>, repo: &Path, workdir: &Path, drops: Drops) -> Result<Done> {
    let start = now_ns();
    let steps = match kind {
        "battery" => run_battery(only, drops)?,
        "cargo" => vec![cargo(repo, workdir, drops)?],
        k => bail!("unknown workload '{k}' (battery or cargo)"),
    };
    Ok(Done { window: (start, now_ns()), steps })
}

fn run_battery(only: Option<&str>, drops: Drops) -> Result<Vec<Step>> {
    let behaviours = battery::select(only);
    if behaviours.is_empty() {
        bail!("no behaviour matches {:?}", only.unwrap_or(""));
    }
    let tools = Tools::new()?;
    let mut steps = Vec::new();
    for b in behaviours {
        let d0 = drops();
        let start = now_ns();
        let r = (b.run)(&tools);
        let end = now_ns();
        if let Err(e) = &r {
            eprintln!("falco-diff: behaviour {}: {e:#}", b.name);
        }
        steps.push(Step {
            name: b.name.to_string(),
            place: b.place.name(),
            rules: b.rules.iter().map(|r| r.to_string()).collect(),
            start,
            end,
            error: r.err().map(|e| format!("{e:#}")),
            drops: (0, 0),
        });
        // Apart, so that each alert falls in one behaviour's window.
        std::thread::sleep(Duration::from_millis(400));
        let d1 = drops();
        if let Some(s) = steps.last_mut() {
            s.drops = (d1.0 - d0.0.min(d1.0), d1.1 - d0.1.min(d1.1));
        }
    }
    Ok(steps)
}

/// `cargo build --release` and `cargo test --release --no-run` of a clone of
/// `repo` (HEAD), in `workdir/clone`, its target seeded from the repo's.
fn cargo(repo: &Path, workdir: &Path, drops: Drops) -> Result<Step> {
    let clone = workdir.join("clone");
    let _ = std::fs::remove_dir_all(&clone);
    let st =
        Command::new("git").arg("clone").arg("-q").arg(repo).arg(&clone).status().context("git clone")?;
    anyhow::ensure!(st.success(), "git clone {}: {st}", repo.display());
    let target = repo.join("target");
    if target.exists() {
        let st = Command::new("cp").arg("-a").arg(&target).arg(&clone).status()?;
        anyhow::ensure!(st.success(), "seeding the clone's target");
    }
    let d0 = drops();
    let start = now_ns();
    let mut err = None;
    for args in [&["build", "--release"][..], &["test", "--release", "--workspace", "--no-run"][..]] {
        let st = Command::new("cargo").args(args).current_dir(&clone).status().context("cargo")?;
        if !st.success() {
            err = Some(format!("cargo {}: {st}", args.join(" ")));
        }
    }
    let end = now_ns();
    let d1 = drops();
    let _ = std::fs::remove_dir_all(&clone);
    Ok(Step {
        drops: (d1.0 - d0.0.min(d1.0), d1.1 - d0.1.min(d1.1)),
        name: "cargo build + test --no-run".into(),
        place: "host",
        rules: Vec::new(),
        start,
        end,
        error: err,
    })
}
