//! Floods through the real `harrier run` with Falco's stable rules: a child
//! of this process reads /etc/shadow N times (Falco's "Read sensitive file
//! untrusted", Warning), then runs a binary from a memfd ("Fileless
//! execution via memfd_create", Critical). Outputs: a file and HTTP to
//! harrier-actions' receiver, default queue limits (stdout is in the
//! in-process cases: the sensor harness reads a sensor's stdout). The alerts
//! of that child are counted in the file and at the receiver against what
//! the engine raised. With `--falco`, the same floods through Falco (its
//! falco.yaml with the lineage fields appended), at rates of its own.

use crate::report::{num, Table};
use crate::sensor::{Kind, Sensor, Spec};
use anyhow::{Context, Result};
use harrier_actions::receiver::LINEAGE_FIELDS;
use harrier_actions::{Kit, Receiver, Tally, ACTIONS};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const READ: &str = "ReadSensitiveFileUntrusted";
const MEMFD: &str = "FilelessExecutionViaMemfdCreate";

/// The lineage fields the receiver attributes by, as an `append_output` item.
fn lineage_item() -> String {
    let mut s = "  - extra_fields:\n".to_string();
    for f in LINEAGE_FIELDS {
        s += &format!("      - {f}\n");
    }
    s
}

/// The sensor under test: harrier, or Falco with its falco.yaml.
#[derive(Clone)]
pub struct Sut {
    pub kind: Kind,
    pub binary: PathBuf,
    pub falco_config: Option<PathBuf>,
}

impl Sut {
    fn name(&self) -> &'static str {
        if self.kind == Kind::Falco {
            "falco"
        } else {
            "harrier run"
        }
    }

    /// Harrier: JSON alerts, no stdout, the lineage fields. Falco: its own
    /// falco.yaml with the lineage item first in its `append_output` list
    /// (the harness's -o options set the outputs).
    fn config_text(&self) -> Result<String> {
        let Some(path) = &self.falco_config else {
            return Ok(format!(
                "json_output: true\nstdout_output:\n  enabled: false\nappend_output:\n{}",
                lineage_item()
            ));
        };
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let key = "\nappend_output:\n";
        Ok(match text.find(key) {
            Some(i) => format!("{}{}{}", &text[..i + key.len()], lineage_item(), &text[i + key.len()..]),
            None => format!("{text}\nappend_output:\n{}", lineage_item()),
        })
    }

    /// Alerts raised, from the exit summary: harrier's "... N alerts, ...",
    /// Falco's "Events detected: N".
    fn raised(&self, lines: &[String]) -> Option<u64> {
        match self.kind {
            Kind::Harrier => figure(lines, " alerts,"),
            Kind::Falco => {
                lines.iter().rev().find_map(|l| l.split("Events detected: ").nth(1)?.trim().parse().ok())
            }
        }
    }
}

/// The number after `what` in harrier's exit summary ("... 1234 alerts, ...").
fn figure(lines: &[String], what: &str) -> Option<u64> {
    lines.iter().rev().find_map(|l| {
        let i = l.find(what)?;
        l[..i].trim_end().rsplit(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    })
}

struct Row {
    reads: u64,
    raised: Option<u64>,
    kernel_drops: Option<u64>,
    file: Vec<u64>,
    file_notices: usize,
    http: Vec<u64>,
    hwm_mb: f64,
    stop_s: f64,
    final_stats_s: f64,
    reads_per_s: f64,
    summary: Vec<String>,
}

/// Until the alerts file stopped growing for 2 s.
fn wait_until_settled(path: &Path) {
    let size = || std::fs::metadata(path).map_or(0, |m| m.len());
    let mut last = (size(), Instant::now());
    while last.1.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(100));
        let n = size();
        if n != last.0 {
            last = (n, Instant::now());
        }
    }
}

/// A flood: `reads` opens of /etc/shadow, paced at `rate` per second if
/// given (else as fast as this process goes), then the memfd exec.
struct Flood {
    reads: u64,
    rate: Option<f64>,
    with_http: bool,
}

fn flood(sut: &Sut, rules: &[String], dir: &Path, f: &Flood, tag: &str) -> Result<Row> {
    let Flood { reads, rate, with_http } = *f;
    let me = std::process::id();
    let http = Tally::new(&[READ, MEMFD], Some(me));
    let receiver = Receiver::start(http.clone())?;
    let config = dir.join(format!("{tag}.yaml"));
    std::fs::write(&config, sut.config_text()?)?;
    let mut spec = Spec::new(sut.kind, &sut.binary, dir, tag);
    spec.config = Some(config);
    spec.rules = rules.to_vec();
    spec.http_url = with_http.then(|| receiver.url.clone());
    let mut sensor = Sensor::start(&spec)?;
    // The reads from a process started once the sensor is ready: Falco
    // here knows no process that ran before it (its /proc scan leaves them
    // out: no proc.name, no proc.ppid), and alerts on none of them. Its
    // alerts count by proc.pid, the memfd binary's by proc.ppid.
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["outputs-flood", "--reads", &reads.to_string()]);
    if let Some(r) = rate {
        cmd.args(["--rate", &r.to_string()]);
    }
    let child =
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().context("running outputs-flood")?;
    let generator = child.id();
    http.set_generator(generator);
    let out = child.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "outputs-flood: {}", out.status);
    let reads_per_s: f64 =
        String::from_utf8_lossy(&out.stdout).trim().parse().context("outputs-flood's rate")?;
    // Until the receiver has them all, or nothing more comes for 3 s; with
    // no HTTP, until the file stops growing.
    let mut last = (u64::MAX, Instant::now());
    if !with_http {
        wait_until_settled(&spec.alerts_path());
    }
    while with_http && !http.wait_until(Duration::from_millis(500), |a| a[0] >= reads && a[1] >= 1) {
        let n = http.received.load(std::sync::atomic::Ordering::Relaxed);
        if n != last.0 {
            last = (n, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    let hwm_mb = sensor.usage().hwm_kb as f64 / 1024.0;
    let stop = sensor.stop()?;
    let lines = sensor.output();
    let in_file = Tally::new(&[READ, MEMFD], Some(generator));
    let mut file_notices = 0;
    for v in sensor.alerts()? {
        if v["rule"] == harrier_outputs::notice::RULE {
            file_notices += 1;
        }
        in_file.record(&v);
    }
    Ok(Row {
        reads,
        raised: sut.raised(&lines),
        kernel_drops: Some(stop.counters.drops),
        file: in_file.actual(),
        file_notices,
        http: http.actual(),
        hwm_mb,
        stop_s: stop.gone.as_secs_f64(),
        final_stats_s: stop.final_stats.map_or(f64::NAN, |d| d.as_secs_f64()),
        reads_per_s,
        summary: lines.into_iter().filter(|l| l.contains("harrier: output ")).collect(),
    })
}

/// `harrier-bench outputs-flood`: one flood's reads, then the memfd exec.
#[derive(clap::Args)]
pub struct FloodArgs {
    #[arg(long)]
    reads: u64,
    /// Reads per second (default: as fast as this process goes).
    #[arg(long)]
    rate: Option<f64>,
}

/// Prints the reads per second it reached.
pub fn flood_child(a: FloodArgs) -> Result<()> {
    let kit = Kit::new()?;
    let action = |name: &str| ACTIONS.iter().find(|x| x.name == name).expect("a known action");
    let read = action(READ);
    let t = Instant::now();
    let period = a.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    for i in 0..a.reads {
        if let Some(p) = period {
            while t.elapsed() < p * i as u32 {
                std::hint::spin_loop();
            }
        }
        (read.run)(&kit)?;
    }
    let reads_per_s = a.reads as f64 / t.elapsed().as_secs_f64();
    (action(MEMFD).run)(&kit)?;
    println!("{reads_per_s}");
    Ok(())
}

/// The steady rates tried, reads (alerts) per second, 5 s each; Falco's
/// lower (it sheds a burst: Falco delivered 31% of 200,000 here).
const RATES: [u64; 4] = [50_000, 100_000, 150_000, 200_000];
const FALCO_RATES: [u64; 4] = [5_000, 10_000, 20_000, 50_000];

pub fn run(
    rules: &[String],
    harrier: Option<PathBuf>,
    falco: Option<Sut>,
    (rates, falco_rates): (&[u64], &[u64]),
    dir: &Path,
    quick: bool,
) -> Result<String> {
    let rules = match rules {
        [] => vec![crate::rules_load::stable_rules()?],
        r => r.to_vec(),
    };
    let harrier = match harrier {
        Some(h) => h,
        None => std::env::current_exe()?.with_file_name("harrier"),
    };
    anyhow::ensure!(
        harrier.exists(),
        "{} not found (cargo build --release -p harrier-cli)",
        harrier.display()
    );
    let rates = if rates.is_empty() { &RATES[..] } else { rates };
    let falco_rates = if falco_rates.is_empty() { &FALCO_RATES[..] } else { falco_rates };
    let mut suts = vec![(Sut { kind: Kind::Harrier, binary: harrier, falco_config: None }, rates)];
    suts.extend(falco.map(|f| (f, falco_rates)));
    // Bursts with HTTP beside the file and the file alone, then the file alone
    // at steady rates for 5 s each: the highest rate delivered whole.
    let burst = |reads, with_http| Flood { reads, rate: None, with_http };
    let mut rows = Vec::new();
    let mut notes = String::new();
    for (sut, rates) in &suts {
        let mut cases = vec![burst(20_000, true)];
        if !quick {
            cases.extend([burst(200_000, true), burst(200_000, false)]);
            for &rate in rates.iter() {
                cases.push(Flood { reads: rate * 5, rate: Some(rate as f64), with_http: false });
            }
        }
        for (i, case) in cases.iter().enumerate() {
            let tag = format!("e2e-{}{i}", if sut.kind == Kind::Falco { "falco" } else { "harrier" });
            let r = run_case(sut, &rules, dir, case, &tag)?;
            rows.extend(r.rows(sut.name(), case.with_http));
            notes += &format!(
                "- {}, {} reads: {} loss notice(s) in the file; exit summary: {}\n",
                sut.name(),
                num(r.reads as f64, 0),
                r.file_notices,
                r.summary.join(" / ")
            );
        }
    }
    let t = Table {
        header: [
            "sensor, Falco's stable rules",
            "flood",
            "output",
            "alerts the engine raised (all processes)",
            "delivered: reads + Critical (the flood process's)",
            "drops (kernel, full backlog)",
            "peak RSS MB",
            "SIGINT to final stats / to exit, s",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    };
    Ok(format!(
        "\nThrough the sensor (outputs: a file and HTTP, or the file alone; default limits): the \
         reads are a tight loop of open(\"/etc/shadow\") in a child started once the sensor is ready, the Critical a binary run \
         from a memfd right after.\n\n{}\n{notes}",
        t.markdown()
    ))
}

fn run_case(sut: &Sut, rules: &[String], dir: &Path, case: &Flood, tag: &str) -> Result<Row> {
    eprintln!(
        "bench-outputs: {}: {} reads of /etc/shadow{}, then a memfd binary ({})",
        sut.name(),
        num(case.reads as f64, 0),
        case.rate.map_or(String::new(), |r| format!(" at {}/s", num(r, 0))),
        if case.with_http { "file and HTTP" } else { "file only" }
    );
    flood(sut, rules, dir, case, tag)
}

impl Row {
    /// One table row per output this flood had.
    fn rows(&self, sensor: &str, with_http: bool) -> Vec<Vec<String>> {
        let opt = |v: Option<u64>| v.map_or("-".into(), |v| num(v as f64, 0));
        let outputs: &[(&str, &Vec<u64>)] = if with_http {
            &[("file", &self.file), ("http", &self.http)]
        } else {
            &[("file (alone)", &self.file)]
        };
        outputs
            .iter()
            .map(|&(out, got)| {
                vec![
                    sensor.to_string(),
                    format!(
                        "{} reads ({}/s) + 1 memfd exec",
                        num(self.reads as f64, 0),
                        num(self.reads_per_s, 0)
                    ),
                    out.into(),
                    opt(self.raised),
                    format!("{} + {}", num(got[0] as f64, 0), got[1]),
                    opt(self.kernel_drops),
                    num(self.hwm_mb, 1),
                    format!("{} / {}", num(self.final_stats_s, 2), num(self.stop_s, 2)),
                ]
            })
            .collect()
    }
}
