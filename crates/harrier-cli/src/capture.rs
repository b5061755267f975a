//! `harrier capture`.

use crate::file_out::{self, FileOut};
use anyhow::{bail, Context, Result};
use harrier_capture::{parse_size, parse_syscalls, Config, Session, Stats};
use harrier_schema::decode::{decode, Event};
use harrier_state::ThreadTable;
use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct CaptureArgs {
    /// Comma-separated syscall names (default: every syscall with a typed event).
    #[arg(long, conflicts_with = "all")]
    syscalls: Option<String>,
    /// Every syscall this kernel can trace.
    #[arg(long)]
    all: bool,
    /// Stop after this many seconds.
    // Negative numbers reach our check (and its one-line error) instead of
    // being taken for an unknown flag.
    #[arg(long, allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Stop after this many syscall events.
    #[arg(long)]
    events: Option<u64>,
    /// Only this process.
    #[arg(long)]
    pid: Option<u32>,
    /// Bytes of data kept from read/write/send/recv buffers (max 4096).
    #[arg(long, default_value_t = harrier_capture::DEFAULT_SNAPLEN)]
    snaplen: u32,
    /// Size of each ring buffer, e.g. 8M (a power of two).
    #[arg(long, default_value = "8M")]
    buffer_size: String,
    /// CPUs sharing one ring buffer.
    #[arg(long, default_value_t = 1)]
    cpus_per_buffer: usize,
    /// One JSON object per event on stdout.
    #[arg(long)]
    json: bool,
    /// Also write the final statistics as JSON to this file.
    #[arg(long)]
    stats_json: Option<String>,
    /// How syscall exits reach the handlers: auto, per-syscall or dispatcher.
    #[arg(long, default_value = "auto")]
    attach: harrier_capture::AttachMode,
    /// Per-program BPF run counts and times. Costs ~57 ns per run of every
    /// BPF program on the machine while on, so it is off by default.
    #[arg(long)]
    bpf_stats: bool,
    /// Walk every path to the root: no path cache (benchmarks; it is on
    /// where the kernel has the hooks that keep it exact).
    #[arg(long)]
    no_dir_cache: bool,
    #[command(flatten)]
    write: crate::file_out::WriteArgs,
}

/// Turns raw events into JSON lines, resolving pid and comm.
struct JsonPrinter {
    out: BufWriter<std::io::Stdout>,
    threads: ThreadTable,
    epoch_offset: u64,
    printed: u64,
    limit: u64,
}

impl JsonPrinter {
    fn event(&mut self, bytes: &[u8]) {
        match decode(bytes) {
            Ok(Event::Meta(h, m)) => self.threads.apply(h.tid, &m),
            Ok(Event::Syscall(e)) if self.printed < self.limit => {
                let (pid, comm) = match self.threads.lookup(e.header.tid) {
                    Some(t) => (t.pid, t.comm.clone()),
                    None => (0, String::new()),
                };
                let line = e.to_json(pid, &comm, self.epoch_offset);
                // A closed stdout (e.g. `| head`) ends the capture via `limit`.
                if writeln!(self.out, "{line}").is_err() {
                    self.limit = 0;
                }
                self.printed += 1;
            }
            Ok(Event::Syscall(_)) => {}
            Err(e) => say!("harrier: skipping a malformed event: {e}"),
        }
    }

    /// Flushes a drained batch; a closed stdout (e.g. `| head -1`) ends the
    /// capture. Without this, lines would pile up in the buffer unnoticed
    /// until it filled, which for a quiet process may be never.
    fn end_batch(&mut self) {
        self.threads.end_batch();
        if self.out.flush().is_err() {
            self.limit = 0;
        }
    }
}

/// --duration, checked: positive and small enough for a Duration.
fn duration(a: &CaptureArgs) -> Result<Option<Duration>> {
    let Some(d) = a.duration else { return Ok(None) };
    if d.is_nan() || d <= 0.0 {
        bail!("duration must be a positive number of seconds, not {d}");
    }
    match Duration::try_from_secs_f64(d) {
        Ok(t) => Ok(Some(t)),
        Err(_) => bail!("duration {d} is too long"),
    }
}

/// The kernel filter reads pid 0 as "every process", and a thread id or a
/// gone process would match nothing: all mistakes, better said at once.
fn check_pid(pid: u32) -> Result<()> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let tgid = status.lines().find_map(|l| l.strip_prefix("Tgid:")).map(str::trim);
    match tgid {
        _ if pid == 0 => bail!("--pid 0 is not a process"),
        None => bail!("no process with pid {pid}"),
        Some(t) if t != pid.to_string() => bail!("{pid} is a thread of process {t}: pass the process id"),
        Some(_) => Ok(()),
    }
}

fn config(a: &CaptureArgs) -> Result<Config> {
    let mut cfg = match (&a.syscalls, a.all) {
        (Some(list), _) => Config::new(parse_syscalls(list)?),
        (None, true) => Config::all(),
        (None, false) => {
            Config::new(harrier_schema::SYSCALLS.iter().filter(|s| s.params.is_some()).collect())
        }
    };
    cfg.pid = a.pid;
    cfg.snaplen = a.snaplen;
    cfg.buffer_size = parse_size(&a.buffer_size)?;
    cfg.cpus_per_buffer = a.cpus_per_buffer;
    cfg.attach = a.attach;
    cfg.run_time_stats = a.bpf_stats;
    cfg.dir_cache = !a.no_dir_cache;
    if let Some(pid) = a.pid {
        check_pid(pid)?;
    }
    cfg.validate()?;
    Ok(cfg)
}

pub fn run(a: CaptureArgs) -> Result<()> {
    let cfg = config(&a)?;
    let duration = duration(&a)?;
    if unsafe { libc::geteuid() } != 0 {
        bail!("capturing needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN)");
    }
    // Created now: a bad path should fail before the capture, not cost its figures.
    let stats_file = match &a.stats_json {
        Some(path) => Some((File::create(path).with_context(|| format!("creating {path}"))?, path.as_str())),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let settings = serde_json::json!({
        "command": "capture",
        "syscalls": cfg.syscalls.iter().map(|s| s.name).collect::<Vec<_>>(),
        "pid": a.pid,
        "snaplen": a.snaplen,
        "buffer_size": cfg.buffer_size,
        "attach": a.attach.to_string(),
        "start_mono_ns": harrier_engine::monotonic_now(),
    });
    let epoch_offset = harrier_engine::epoch_offset();
    let file = FileOut::create(&a.write, &file_out::live_info(epoch_offset, settings))?
        .map(|f| Rc::new(RefCell::new(f)));
    let printer = Rc::new(RefCell::new(JsonPrinter {
        out: BufWriter::with_capacity(1 << 16, std::io::stdout()),
        threads: ThreadTable::new(),
        epoch_offset,
        printed: 0,
        limit: a.events.unwrap_or(u64::MAX),
    }));
    // The summary only counts: no per-event call into a sink at all.
    let mut session = if a.json || file.is_some() {
        let (p, f, json) = (printer.clone(), file.clone(), a.json);
        let session = Session::start(
            &cfg,
            Box::new(move |b| {
                if json {
                    p.borrow_mut().event(b);
                }
                if let Some(f) = &f {
                    f.borrow_mut().event(b);
                }
            }),
        )?;
        if a.json {
            printer.borrow_mut().threads.scan_proc(a.pid);
        }
        if let Some(f) = &file {
            // The state the file's reader starts from: taken after attaching,
            // before the first drain, as the live engine does.
            let mut st = harrier_state::State::new();
            st.scan_proc(a.pid);
            f.borrow_mut().snapshot(st.snapshot());
        }
        session
    } else {
        Session::start_counting(&cfg)?
    };
    let choice = session.attach_choice();
    say!(
        "harrier: capturing {} syscalls, {} attach ({}); Ctrl-C to stop",
        session.syscalls().len(),
        choice.mode,
        choice.reason
    );
    say!("harrier: {}", session.dir_cache().describe());
    say!("harrier: {}", session.user_reads().describe());
    say!("harrier: {}", session.current_reads().describe());
    if choice.tracepoints > harrier_capture::attach::MAX_PER_SYSCALL_TRACEPOINTS {
        say!(
            "harrier: note: {} tracepoints take ~{:.1} s to detach when stopping (--attach auto avoids this)",
            choice.tracepoints,
            choice.tracepoints as f64 * 0.05
        );
    }

    // Too far to represent: no deadline.
    let deadline = duration.and_then(|d| Instant::now().checked_add(d));
    let limit = a.events.unwrap_or(u64::MAX);
    let mut last_report = Instant::now();
    let live = !a.json;
    let mut kernel_drops = 0;
    session.run(|s| {
        let mut p = printer.borrow_mut();
        p.end_batch();
        let file_failed = file.as_ref().is_some_and(|f| {
            let mut f = f.borrow_mut();
            kernel_drops = pass_drops(s, &mut f, kernel_drops);
            f.send();
            f.failed()
        });
        let u = s.user_counters();
        let syscall_events = u.events - u.meta_events;
        if live && last_report.elapsed() >= Duration::from_secs(1) {
            say!("  {} events ({} syscalls), {} bytes", u.events, syscall_events, u.bytes);
            last_report = Instant::now();
        }
        stop.load(Ordering::Relaxed)
            || file_failed
            || deadline.is_some_and(|d| Instant::now() >= d)
            || (a.json && p.limit == 0)
            || syscall_events >= limit
    })?;
    let stats = session.stop()?;
    let _ = printer.borrow_mut().out.flush();
    let file = file.map(|f| Rc::try_unwrap(f).ok().expect("the session released the sink").into_inner());
    let outcome = file.map(|mut f| {
        f.add_drops(stats.total_drops().saturating_sub(kernel_drops));
        let path = f.path().to_string();
        (path, f.finish())
    });
    finish(&stats, stats_file)?;
    if let Some((path, o)) = outcome {
        say!("{}", file_out::report(&path, &o));
        if let Some(e) = o.error {
            bail!("{e}");
        }
    }
    Ok(())
}

/// Hands the kernel drops counted since `seen` to the file; returns the new total.
pub(crate) fn pass_drops(s: &Session, f: &mut FileOut, seen: u64) -> u64 {
    let total = s.kernel_stats().map_or(seen, |k| k.iter().map(|c| c.dropped()).sum());
    f.add_drops(total.saturating_sub(seen));
    total.max(seen)
}

fn finish(stats: &Stats, stats_json: Option<(File, &str)>) -> Result<()> {
    say!("{}", stats.report().trim_end());
    if let Some((mut file, path)) = stats_json {
        let text = serde_json::to_string_pretty(&stats.to_json())?;
        file.write_all((text + "\n").as_bytes()).with_context(|| format!("writing {path}"))?;
    }
    Ok(())
}
