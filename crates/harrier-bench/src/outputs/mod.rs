//! `harrier-bench outputs` (`make bench-outputs`): what Harrier's alert
//! outputs sustain and what they lose. In-process cases (each in a child
//! process, see case.rs) with alerts the size of Falco's stable rules':
//! every sink's sustained rate on one CPU (text and JSON; stdout to
//! /dev/null and to a pipe, a file, HTTP to the loopback receiver of
//! harrier-actions), a 20,000-alert burst to all three outputs, 200,000
//! Warnings then a Critical to a file, and 2,000,000 alerts to a dead HTTP
//! receiver that comes back at the end. Then floods through `harrier run`
//! with Falco's stable rules (e2e.rs). A Markdown table and a PNG chart.

pub mod case;
pub mod e2e;

use crate::report::{bar_chart, num, Table};
use crate::workload::median;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(clap::Args)]
pub struct Args {
    /// Rounds of each in-process case (interleaved); medians are reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Smaller counts and one round (a smoke run of a minute or so).
    #[arg(long)]
    quick: bool,
    /// Skip the floods through `harrier run` (they need root and BPF).
    #[arg(long)]
    no_e2e: bool,
    /// Only the floods through `harrier run` (e.g. to compare two harrier binaries).
    #[arg(long, conflicts_with = "no_e2e")]
    only_e2e: bool,
    /// Rule file for the floods through `harrier run` (default: Falco's stable rules).
    #[arg(long = "rules", short = 'r')]
    rules: Vec<String>,
    /// The harrier binary (default: beside this one).
    #[arg(long)]
    harrier: Option<PathBuf>,
    /// Also flood a Falco binary (e.g. /opt/falco-ref/bin/falco), with --falco-config.
    #[arg(long, requires = "falco_config")]
    falco: Option<PathBuf>,
    /// Falco's falco.yaml (engine, plugins) for --falco.
    #[arg(long, requires = "falco")]
    falco_config: Option<PathBuf>,
    /// Harrier's steady flood rates, alerts/s for 5 s each (default 50000,100000,150000,200000):
    /// higher ones find the rate past which it loses.
    #[arg(long, value_delimiter = ',')]
    rates: Vec<u64>,
    /// Falco's (default 5000,10000,20000,50000).
    #[arg(long, value_delimiter = ',', requires = "falco")]
    falco_rates: Vec<u64>,
    /// Where outputs.md and outputs.png go.
    #[arg(long, default_value = "docs/bench")]
    out: PathBuf,
}

/// Where a case's stdout goes.
#[derive(Clone, Copy, PartialEq)]
enum Dest {
    Null,
    /// A pipe this process reads and discards.
    Pipe,
}

struct Case {
    label: &'static str,
    kind: &'static str,
    sinks: &'static str,
    json: bool,
    dest: Dest,
    count: u64,
}

/// A scratch directory for alert files, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback port nothing listens on (bound, noted, closed).
fn dead_url() -> Result<String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    Ok(format!("http://127.0.0.1:{port}/"))
}

/// Runs one case in a child; its JSON results.
fn spawn(c: &Case, dir: &Path, url: &str) -> Result<Value> {
    let file = dir.join("alerts");
    let _ = std::fs::remove_file(&file);
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["outputs-case", c.kind, "--sinks", c.sinks, "--count", &c.count.to_string()]);
    cmd.arg("--file").arg(&file).args(["--url", url]);
    if c.json {
        cmd.arg("--json");
    }
    if c.kind == "rate" {
        // One CPU for the case, the last; the receiver and the pipe's reader use the others.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        cmd.args(["--cpu", &(cpus - 1).to_string()]);
    }
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    cmd.stdout(if c.dest == Dest::Pipe { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.spawn().context("starting harrier-bench outputs-case")?;
    let reader = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 20];
            let mut n = 0u64;
            while let Ok(k) = out.read(&mut buf) {
                if k == 0 {
                    break;
                }
                n += k as u64;
            }
            n
        })
    });
    let mut result = None;
    for line in BufReader::new(child.stderr.take().expect("piped")).lines() {
        let line = line?;
        match line.strip_prefix(case::PREFIX) {
            Some(r) => result = Some(serde_json::from_str::<Value>(r)?),
            None => eprintln!("  {line}"),
        }
    }
    let st = child.wait()?;
    if let Some(r) = reader {
        let _ = r.join();
    }
    match result {
        Some(r) if st.success() => Ok(r),
        _ => bail!("outputs-case {} failed: {st}", c.kind),
    }
}

fn out_of<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["outputs"].as_array().and_then(|v| v.iter().find(|o| o["name"] == name)).unwrap_or(&Value::Null)
}

fn by_priority(v: &Value) -> String {
    match v.as_object() {
        Some(m) if !m.is_empty() => m.iter().map(|(p, n)| format!("{p} {n}")).collect::<Vec<_>>().join(", "),
        _ => "0".into(),
    }
}

/// What a queued JSON line of a Falco-sized alert costs.
fn json_line_bytes() -> usize {
    let a = harrier_outputs::testing::falco_sized(0, "Warning");
    let mut line = Vec::new();
    a.write_json(harrier_outputs::JsonShape::default(), &mut line);
    let q = harrier_outputs::Queued { rank: 4, time_ns: 0, item: harrier_outputs::Item::Line(line.into()) };
    q.bytes()
}

/// The Falco under test, if any (both paths checked).
fn falco(a: &Args) -> Result<Option<e2e::Sut>> {
    let (Some(f), Some(c)) = (&a.falco, &a.falco_config) else { return Ok(None) };
    anyhow::ensure!(f.is_file(), "--falco {}: no such file", f.display());
    anyhow::ensure!(c.is_file(), "--falco-config {}: no such file", c.display());
    Ok(Some(e2e::Sut { kind: crate::sensor::Kind::Falco, binary: f.clone(), falco_config: Some(c.clone()) }))
}

pub fn run(a: Args) -> Result<()> {
    let rounds = if a.quick { 1 } else { a.rounds.max(1) };
    let k = |n: u64| if a.quick { n / 10 } else { n };
    let dir = Scratch(PathBuf::from(format!("/var/tmp/harrier-bench-outputs-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0)?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    if a.only_e2e {
        let md = format!(
            "load average at the start: {load}\n{}",
            e2e::run(&a.rules, a.harrier.clone(), falco(&a)?, (&a.rates, &a.falco_rates), &dir.0, a.quick)?
        );
        println!("{md}");
        return Ok(());
    }
    let tally = harrier_actions::Tally::new(&[], None);
    let receiver = harrier_actions::Receiver::start(tally.clone())?;
    let rate = |label, sinks, json, dest, count| Case { label, kind: "rate", sinks, json, dest, count };
    let rates = [
        rate("stdout → /dev/null, text", "stdout", false, Dest::Null, k(1_000_000)),
        rate("stdout → /dev/null, JSON", "stdout", true, Dest::Null, k(1_000_000)),
        rate("stdout → pipe, JSON", "stdout", true, Dest::Pipe, k(1_000_000)),
        rate("file, text", "file", false, Dest::Null, k(1_000_000)),
        rate("file, JSON", "file", true, Dest::Null, k(1_000_000)),
        rate("HTTP → loopback receiver, JSON", "http", true, Dest::Null, k(100_000)),
    ];
    let mut runs: Vec<Vec<Value>> = rates.iter().map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for (i, c) in rates.iter().enumerate() {
            eprintln!("bench-outputs: round {}/{rounds}: {}", r + 1, c.label);
            runs[i].push(spawn(c, &dir.0, &receiver.url)?);
        }
    }
    let mut rows = Vec::new();
    let mut bars = Vec::new();
    for (c, rs) in rates.iter().zip(&runs) {
        let f = |key: &str| -> f64 {
            let mut v: Vec<f64> = rs.iter().map(|r| r[key].as_f64().unwrap_or(f64::NAN)).collect();
            median(&mut v)
        };
        let per_s = c.count as f64 / f("elapsed_s");
        let per_cpu_s = c.count as f64 / f("cpu_s");
        let target = if c.sinks == "http" {
            "≥ 10,000/s"
        } else if c.json {
            "≥ 200,000/s"
        } else {
            ""
        };
        bars.push((c.label.to_string(), per_s));
        rows.push(vec![
            c.label.to_string(),
            num(c.count as f64, 0),
            num(per_s, 0),
            num(per_cpu_s, 0),
            num(f("allocs_per_alert"), 2),
            target.to_string(),
        ]);
    }
    let sinks = Table {
        header: [
            "sink (one CPU)",
            "alerts",
            "alerts/s",
            "alerts per CPU-second",
            "allocations/alert",
            "target",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    };

    let mut md = format!(
        "# Outputs\n\n`make bench-outputs` (harrier-bench outputs), load average at the start: {}\n\n\
         Alerts are the size of Falco's stable rule \"Read sensitive file untrusted\"'s ({} bytes \
         of heap as an alert, {} as a queued JSON line). Sustained rate: {} copies of 1,024 such alerts through \
         one sink, queue unbounded, the process pinned to one CPU (its emitting thread and the sink's \
         lanes share it); from the first alert to the last delivered, median of {rounds}.\n\n{}",
        load,
        harrier_outputs::testing::falco_sized(0, "Warning").heap_bytes(),
        json_line_bytes(),
        num(k(1_000_000) as f64, 0),
        sinks.markdown()
    );
    md += &pressure(&a, rounds, &k, &dir.0, &receiver.url)?;
    if !a.no_e2e {
        md +=
            &e2e::run(&a.rules, a.harrier.clone(), falco(&a)?, (&a.rates, &a.falco_rates), &dir.0, a.quick)?;
    }
    println!("{md}");
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("outputs.md"), &md)?;
    bar_chart(
        &a.out.join("outputs.png"),
        "Alerts/s a sink sustains on one CPU",
        "alerts per second",
        &bars,
        Some(200_000.0),
    )?;
    eprintln!("bench-outputs: wrote {}/outputs.md and outputs.png", a.out.display());
    Ok(())
}

/// The burst, the flood and the dead receiver (default queue limits).
fn pressure(a: &Args, rounds: usize, k: &dyn Fn(u64) -> u64, dir: &Path, url: &str) -> Result<String> {
    let _ = a;
    let burst = Case {
        label: "burst",
        kind: "burst",
        sinks: "stdout,file,http",
        json: true,
        dest: Dest::Null,
        count: 20_000,
    };
    let flood = Case {
        label: "flood",
        kind: "flood",
        sinks: "file",
        json: true,
        dest: Dest::Null,
        count: k(200_000),
    };
    let dead = Case {
        label: "dead",
        kind: "dead",
        sinks: "stdout,http",
        json: true,
        dest: Dest::Null,
        count: k(2_000_000),
    };
    let mut rows = Vec::new();
    let mut bursts = Vec::new();
    let mut floods = Vec::new();
    for r in 0..rounds {
        eprintln!("bench-outputs: round {}/{rounds}: burst and flood", r + 1);
        bursts.push(spawn(&burst, dir, url)?);
        floods.push(spawn(&flood, dir, url)?);
    }
    for (i, b) in bursts.iter().enumerate() {
        for name in ["stdout", "file", "http"] {
            let o = out_of(b, name);
            rows.push(vec![
                format!("{} Warnings back to back, round {}", num(burst.count as f64, 0), i + 1),
                name.to_string(),
                num(o["sent"].as_f64().unwrap_or(f64::NAN), 0),
                by_priority(&o["shed"]),
                by_priority(&o["failed"]),
                num(o["peak_mb"].as_f64().unwrap_or(f64::NAN), 1),
                num(b["hwm_mb"].as_f64().unwrap_or(f64::NAN), 1),
            ]);
        }
    }
    for (i, f) in floods.iter().enumerate() {
        let o = out_of(f, "file");
        rows.push(vec![
            format!("{} Warnings then 1 Critical, round {}", num(flood.count as f64, 0), i + 1),
            "file".into(),
            format!(
                "{} (Critical {})",
                num(o["sent"].as_f64().unwrap_or(f64::NAN), 0),
                o["sent_by"]["Critical"]
            ),
            by_priority(&o["shed"]),
            by_priority(&o["failed"]),
            num(o["peak_mb"].as_f64().unwrap_or(f64::NAN), 1),
            num(f["hwm_mb"].as_f64().unwrap_or(f64::NAN), 1),
        ]);
    }
    eprintln!("bench-outputs: {} alerts to a dead HTTP receiver", num(dead.count as f64, 0));
    let d = spawn(&dead, dir, &dead_url()?)?;
    let o = out_of(&d, "http");
    let growth = d["hwm_mb"].as_f64().unwrap_or(f64::NAN) - d["rss0_mb"].as_f64().unwrap_or(f64::NAN);
    let accounted = o["sent"].as_u64().unwrap_or(0) + o["lost"].as_u64().unwrap_or(0);
    rows.push(vec![
        format!("{} alerts, receiver down, up at the end", num(dead.count as f64, 0)),
        "http".into(),
        format!("{} (Critical {} of {})", o["sent"], d["received"]["critical"], d["criticals"]),
        by_priority(&o["shed"]),
        by_priority(&o["failed"]),
        num(o["peak_mb"].as_f64().unwrap_or(f64::NAN), 1),
        format!("{} (grew {})", num(d["hwm_mb"].as_f64().unwrap_or(f64::NAN), 1), num(growth, 1)),
    ]);
    let t = Table {
        header: [
            "test (default queue limits)",
            "output",
            "delivered",
            "shed",
            "failed",
            "queue peak MB",
            "process peak RSS MB",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    };
    Ok(format!(
        "\nBursts and floods, new alerts made and emitted back to back (far faster than the engine \
         raises them), default limits ({} MiB per output, Criticals kept). The dead receiver: \
         every 1000th alert Critical, the rest Warning and Notice in turn; the receiver comes up \
         after the last one, and the queue drains to it in {} s, its loss notice last; {} of {} \
         alerts accounted for (delivered + shed + failed). The stdout of these cases is /dev/null.\n\n{}",
        harrier_outputs::queue::DEFAULT_MAX_BYTES >> 20,
        num(d["drain_s"].as_f64().unwrap_or(f64::NAN), 2),
        accounted,
        dead.count,
        t.markdown()
    ))
}
