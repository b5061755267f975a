//! `harrier-bench outputs-case` (internal): one in-process outputs case, run
//! in a child of `harrier-bench outputs` so that its stdout can be /dev/null
//! or a pipe, its peak RSS is its own and it can be pinned to one CPU. Its
//! results are one JSON line on stderr after [`PREFIX`].

use crate::sensor::proc::tree_usage as usage;
use anyhow::{bail, Context, Result};
use harrier_outputs::sinks::{FileSink, Http, Stdout, IN_FLIGHT};
use harrier_outputs::testing::{falco_sized, CRITICAL_RULE, RULE};
use harrier_outputs::{JsonShape, Limits, OutputStats, Outputs};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub const PREFIX: &str = "outputs-case: ";

#[derive(clap::Args, Debug, Clone)]
pub struct CaseArgs {
    /// rate: COUNT copies of 1,024 alerts into unbounded queues (the sinks'
    /// sustained rate); burst: COUNT new Warnings back to back; flood: COUNT
    /// new Warnings then a Critical; dead: COUNT new alerts (every 1000th
    /// Critical) while the HTTP receiver is down, then it comes up.
    pub kind: String,
    /// Outputs: stdout, file, http.
    #[arg(long, value_delimiter = ',', default_value = "stdout")]
    pub sinks: Vec<String>,
    #[arg(long)]
    pub json: bool,
    #[arg(long)]
    pub count: u64,
    #[arg(long)]
    pub file: Option<PathBuf>,
    #[arg(long)]
    pub url: Option<String>,
    /// Pin the process (its lanes included) to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
}

fn pin(cpu: usize) -> Result<()> {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
        bail!("pinning to CPU {cpu}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn stats_json(s: &OutputStats) -> Value {
    let by = |b: &harrier_outputs::ByPriority| {
        Value::Object(b.nonzero().map(|(p, n)| (p.to_string(), n.into())).collect())
    };
    json!({
        "name": s.name, "sent": s.sent.total(), "sent_by": by(&s.sent), "shed": by(&s.shed),
        "failed": by(&s.failed), "lost": s.lost(), "notices": s.notices, "peak_mb": s.peak_bytes as f64 / 1e6,
    })
}

/// The priority of alert `i` of the dead-receiver flood: every 1000th
/// Critical, the others Warning and Notice in turn.
fn dead_priority(i: u64) -> &'static str {
    match i {
        i if i % 1000 == 999 => "Critical",
        i if i % 2 == 0 => "Warning",
        _ => "Notice",
    }
}

pub fn run(a: CaseArgs) -> Result<()> {
    if let Some(cpu) = a.cpu {
        pin(cpu)?;
    }
    let shape = JsonShape::default();
    let json = a.json.then_some(shape);
    // rate: nothing is shed, so the figure is the sink's own.
    let limits = match a.kind.as_str() {
        "rate" => Limits { capacity: 0, max_bytes: 0, ..Limits::default() },
        "burst" | "flood" | "dead" => Limits::default(),
        k => bail!("unknown case '{k}'"),
    };
    let mut outs = Outputs::new(limits);
    for s in &a.sinks {
        match s.as_str() {
            "stdout" => outs.add("stdout", Box::new(Stdout::new(json)?)),
            "file" => {
                let p = a.file.as_ref().context("--file is needed")?;
                outs.add("file", Box::new(FileSink::open(&p.display().to_string(), json)?));
            }
            "http" => {
                let url = a.url.as_deref().context("--url is needed")?;
                outs.add_lanes("http", Http::new(url, shape)?.lanes(IN_FLIGHT));
            }
            s => bail!("unknown sink '{s}'"),
        }
    }
    let pool: Vec<_> =
        if a.kind == "rate" { (0..1024).map(|i| falco_sized(i, "Warning")).collect() } else { vec![] };
    let me = std::process::id();
    let rss0 = usage(me).rss_kb;
    let (cpu0, allocs0) = (cpu_seconds(), crate::alloc_count::totals().1);
    let t0 = Instant::now();
    for i in 0..a.count {
        match a.kind.as_str() {
            "rate" => outs.emit(pool[i as usize % pool.len()].clone()),
            "dead" => outs.emit(falco_sized(i, dead_priority(i))),
            _ => outs.emit(falco_sized(i, "Warning")),
        }
    }
    if a.kind == "flood" {
        outs.emit(falco_sized(a.count, "Critical"));
    }
    let emit_s = t0.elapsed().as_secs_f64();
    // The peak while the alerts came (for dead: with the receiver still down).
    let hwm_kb = usage(me).hwm_kb;
    let mut revived = None;
    let t_revive = Instant::now();
    if a.kind == "dead" {
        let url = a.url.as_deref().context("--url is needed")?;
        let addr = url.trim_start_matches("http://").trim_end_matches('/');
        let names = [harrier_actions::normalise(RULE), harrier_actions::normalise(CRITICAL_RULE)];
        let tally = harrier_actions::Tally::new(&[names[0].as_str(), names[1].as_str()], None);
        revived = Some((harrier_actions::Receiver::start_at(addr, tally.clone())?, tally));
    }
    let stats = outs.close(Duration::from_secs(120));
    let elapsed = t0.elapsed().as_secs_f64();
    let allocs = crate::alloc_count::totals().1 - allocs0;
    let mut r = json!({
        "kind": a.kind, "count": a.count, "elapsed_s": elapsed, "emit_s": emit_s,
        "cpu_s": cpu_seconds() - cpu0, "allocs_per_alert": allocs as f64 / a.count.max(1) as f64,
        "rss0_mb": rss0 as f64 / 1024.0, "hwm_mb": hwm_kb as f64 / 1024.0,
        "outputs": stats.iter().map(stats_json).collect::<Vec<_>>(),
    });
    if let Some((_receiver, tally)) = revived {
        let got = tally.actual();
        r["drain_s"] = t_revive.elapsed().as_secs_f64().into();
        r["received"] = json!({"warning_notice": got[0], "critical": got[1], "other": tally.unmatched.load(std::sync::atomic::Ordering::Relaxed)});
        r["criticals"] = (a.count / 1000).into();
    }
    eprintln!("{PREFIX}{r}");
    Ok(())
}
