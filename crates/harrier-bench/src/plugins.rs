//! Plugin sources side by side (make bench-plugins): Falco's k8saudit plugin (with json) read
//! by a Falco binary and by `harrier falco`, from a file and through its webhook on loopback.
//! Events per second, CPU seconds and peak RSS, interleaved rounds, medians and ratios.

use crate::report::{self, num, Table};
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// A Falco binary to compare with (never part of the project).
    #[arg(long)]
    falco: Option<String>,
    /// Where libk8saudit.so and libjson.so are.
    #[arg(long, default_value = "/usr/share/falco/plugins")]
    plugins_dir: PathBuf,
    #[arg(long, default_value = "../shared/data/falco-rules/k8s_audit_rules.yaml")]
    rules: PathBuf,
    /// Audit events to repeat (one JSON event per line per file).
    #[arg(long, default_value = "../shared/data/falco-trace-files/k8s_audit")]
    audit_dir: PathBuf,
    #[arg(long, default_value_t = 200_000)]
    events: usize,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// The plugins' async extraction (their default): a spinning Go worker per plugin, which
    /// a shared 2-CPU machine turns into waits of a time slice per field (both sensors).
    #[arg(long)]
    r#async: bool,
}

/// One run's figures.
#[derive(Clone, Copy)]
struct Run {
    /// Events per second: the events over the time from start (or first POST) to the end
    /// (or last alert).
    rate: f64,
    cpu_s: f64,
    rss_mb: f64,
    alerts: u64,
}

/// The audit events of `dir`, each one line, repeated to `n`.
fn events(dir: &Path, n: usize) -> Result<Vec<String>> {
    let mut base = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let text = std::fs::read_to_string(e?.path())?;
        base.extend(text.lines().filter(|l| l.contains("\"kind\":\"Event\"")).map(String::from));
    }
    if base.is_empty() {
        bail!("{}: no audit events", dir.display());
    }
    Ok(base.iter().cycle().take(n).cloned().collect())
}

fn config(dir: &Path, plugins: &Path, open: &str, sync: bool) -> Result<PathBuf> {
    let init = if sync { r#"{\"useAsync\": false}"# } else { "" };
    let p = dir.join(format!("plugins-{}.yaml", if open.starts_with("http") { "webhook" } else { "file" }));
    let text = format!(
        "json_output: true\nstdout_output:\n  enabled: true\nplugins:\n  - name: k8saudit\n    library_path: {}\n    \
         init_config: \"{init}\"\n    open_params: \"{open}\"\n  - name: json\n    library_path: {}\n    init_config: \"{init}\"\n\
         load_plugins: [k8saudit, json]\n",
        plugins.join("libk8saudit.so").display(),
        plugins.join("libjson.so").display()
    );
    std::fs::write(&p, text)?;
    Ok(p)
}

/// CPU seconds of a reaped child. (Its ru_maxrss would count this process's memory: exec
/// keeps the high-water mark of the image it replaces.)
fn reap(pid: i32) -> f64 {
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The child's VmHWM (MB), read every 20 ms while it lives: the peak of its own image.
fn peak_rss(pid: i32) -> std::thread::JoinHandle<f64> {
    std::thread::spawn(move || {
        let mut peak = 0.0f64;
        while let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            let kb = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse::<f64>().ok());
            match kb {
                Some(kb) => peak = peak.max(kb / 1024.0),
                None => break, // a zombie has no memory lines
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        peak
    })
}

/// `cmd ARGS -c CFG ...`: until `alerts` alert lines (or the end), fed by `feed` once started.
fn run(
    cmd: &[String],
    cfg: &Path,
    rules: &Path,
    events: usize,
    want: Option<u64>,
    feed: Option<&dyn Fn() -> Result<()>>,
) -> Result<Run> {
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..]).arg("-c").arg(cfg).arg("-r").arg(rules);
    c.args(["--enable-source", "k8s_audit", "-o", "append_output.suggested_output=false"]);
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {}", cmd[0]))?;
    let pid = child.id() as i32;
    let rss = peak_rss(pid);
    let out = BufReader::new(child.stdout.take().expect("piped"));
    // Alerts are counted as they come, on a thread of their own: a sensor whose stdout is not
    // read stalls, and with it the webhook being fed.
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let reader = std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if line.starts_with('{') && tx.send(Instant::now()).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let fed = feed.is_some();
    if let Some(f) = feed {
        f()?;
    }
    let (mut alerts, mut last) = (0u64, start);
    let limit = Duration::from_secs(300);
    loop {
        match rx.recv_timeout(limit.saturating_sub(start.elapsed())) {
            Ok(t) => {
                alerts += 1;
                last = t;
                if want == Some(alerts) {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                unsafe { libc::kill(pid, libc::SIGKILL) };
                bail!("{}: {alerts} alerts of {want:?} after {} s", cmd[0], limit.as_secs());
            }
        }
    }
    if fed {
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    drop(rx);
    let _ = reader.join();
    let rss_mb = rss.join().unwrap_or(f64::NAN);
    let cpu_s = reap(pid);
    std::mem::forget(child); // reaped above
    let secs = if fed { last.duration_since(start) } else { start.elapsed() }.as_secs_f64();
    Ok(Run { rate: events as f64 / secs, cpu_s, rss_mb, alerts })
}

/// POSTs `events` to the webhook at `port` as EventLists of `batch`, once it listens.
fn post_all(port: u16, events: &[String], batch: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut s = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => bail!("the webhook on port {port} never listened: {e}"),
        }
    };
    let mut buf = [0u8; 4096];
    for chunk in events.chunks(batch) {
        let body = format!(
            "{{\"kind\":\"EventList\",\"apiVersion\":\"audit.k8s.io/v1\",\"items\":[{}]}}",
            chunk.join(",")
        );
        write!(
            s,
            "POST /k8s-audit HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )?;
        // One response per request (keep-alive): its status line is enough.
        let n = s.read(&mut buf)?;
        if !buf[..n].starts_with(b"HTTP/1.1 200") {
            bail!("the webhook answered {}", String::from_utf8_lossy(&buf[..n.min(80)]));
        }
    }
    Ok(())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_or(9765, |a| a.port())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

pub fn run_cli(a: Args) -> Result<()> {
    let harrier = std::env::current_exe()?.with_file_name("harrier").display().to_string();
    let mut sensors = vec![("harrier".to_string(), vec![harrier, "falco".into()])];
    if let Some(f) = &a.falco {
        sensors.insert(0, ("falco".to_string(), vec![f.clone()]));
    }
    let evs = events(&a.audit_dir, a.events)?;
    let dir = std::env::temp_dir().join(format!("harrier-bench-plugins-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("audit.jsonl");
    std::fs::write(&file, evs.join("\n") + "\n")?;
    let file_cfg = config(&dir, &a.plugins_dir, &file.display().to_string(), !a.r#async)?;
    // (sensor, mode) → runs
    let mut runs: Vec<(String, &str, Run)> = Vec::new();
    for round in 0..a.rounds {
        let order: Vec<_> =
            if round % 2 == 0 { sensors.clone() } else { sensors.iter().rev().cloned().collect() };
        for (name, cmd) in &order {
            let r = run(cmd, &file_cfg, &a.rules, a.events, None, None)?;
            eprintln!(
                "harrier-bench: round {} {name} file: {:.0} events/s, {} alerts",
                round + 1,
                r.rate,
                r.alerts
            );
            let want = r.alerts;
            runs.push((name.clone(), "file", r));
            let port = free_port();
            let hook_cfg =
                config(&dir, &a.plugins_dir, &format!("http://127.0.0.1:{port}/k8s-audit"), !a.r#async)?;
            let feed = || post_all(port, &evs, 500);
            let r = run(cmd, &hook_cfg, &a.rules, a.events, Some(want), Some(&feed))?;
            eprintln!(
                "harrier-bench: round {} {name} webhook: {:.0} events/s, {} alerts",
                round + 1,
                r.rate,
                r.alerts
            );
            runs.push((name.clone(), "webhook", r));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut table = Table {
        header: ["source", "sensor", "events/s (median)", "CPU s", "peak RSS MB", "alerts", "vs Falco"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
    let mut bars = Vec::new();
    for mode in ["file", "webhook"] {
        let falco_rate =
            median(runs.iter().filter(|r| r.0 == "falco" && r.1 == mode).map(|r| r.2.rate).collect());
        for (name, _) in &sensors {
            let mine: Vec<Run> = runs.iter().filter(|r| &r.0 == name && r.1 == mode).map(|r| r.2).collect();
            let rate = median(mine.iter().map(|r| r.rate).collect());
            table.rows.push(vec![
                format!("k8saudit {mode}"),
                name.clone(),
                num(rate, 0),
                num(median(mine.iter().map(|r| r.cpu_s).collect()), 2),
                num(median(mine.iter().map(|r| r.rss_mb).collect()), 1),
                mine.first().map_or(0, |r| r.alerts).to_string(),
                format!("{}×", num(rate / falco_rate, 2)),
            ]);
            bars.push((format!("{name} {mode}"), rate));
        }
    }
    let md = format!(
        "# Plugin sources: k8saudit + json ({} extraction), {} events, {} interleaved rounds\n\n{}",
        if a.r#async { "async" } else { "sync" },
        a.events,
        a.rounds,
        table.markdown()
    );
    println!("{md}");
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("plugins.md"), &md)?;
    report::bar_chart(
        &a.out.join("plugins.png"),
        "k8saudit events per second (median)",
        "events/s",
        &bars,
        None,
    )?;
    eprintln!("harrier-bench: wrote {}/plugins.md and plugins.png", a.out.display());
    Ok(())
}
