//! `harrier capture`.

use anyhow::{bail, Context, Result};
use harrier_capture::{parse_size, parse_syscalls, Config, Session, Stats};
use harrier_schema::decode::{decode, Event};
use harrier_state::ThreadTable;
use std::cell::RefCell;
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
    #[arg(long)]
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
            Err(e) => eprintln!("harrier: skipping a malformed event: {e}"),
        }
    }
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC (the events' clock), for wall-clock timestamps.
fn epoch_offset() -> u64 {
    let now = |clock| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    now(libc::CLOCK_REALTIME).saturating_sub(now(libc::CLOCK_MONOTONIC))
}

fn config(a: &CaptureArgs) -> Result<Config> {
    let mut cfg = match (&a.syscalls, a.all) {
        (Some(list), _) => Config::new(parse_syscalls(list)?),
        (None, true) => Config::all(),
        (None, false) => Config::new(harrier_schema::SYSCALLS.iter().filter(|s| s.params.is_some()).collect()),
    };
    cfg.pid = a.pid;
    cfg.snaplen = a.snaplen;
    cfg.buffer_size = parse_size(&a.buffer_size)?;
    cfg.cpus_per_buffer = a.cpus_per_buffer;
    if let Some(d) = a.duration {
        if !(d > 0.0 && d.is_finite()) {
            bail!("duration must be a positive number of seconds");
        }
    }
    cfg.validate()?;
    Ok(cfg)
}

pub fn run(a: CaptureArgs) -> Result<()> {
    let cfg = config(&a)?;
    if unsafe { libc::geteuid() } != 0 {
        bail!("harrier capture needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN)");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let printer = Rc::new(RefCell::new(JsonPrinter {
        out: BufWriter::with_capacity(1 << 16, std::io::stdout()),
        threads: ThreadTable::new(),
        epoch_offset: epoch_offset(),
        printed: 0,
        limit: a.events.unwrap_or(u64::MAX),
    }));
    let sink: harrier_capture::EventSink = if a.json {
        let p = printer.clone();
        Box::new(move |b| p.borrow_mut().event(b))
    } else {
        Box::new(|_| {})
    };
    let mut session = Session::start(&cfg, sink)?;
    eprintln!("harrier: capturing {} syscalls; Ctrl-C to stop", session.syscalls().len());

    let deadline = a.duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
    let limit = a.events.unwrap_or(u64::MAX);
    let mut last_report = Instant::now();
    let live = !a.json;
    session.run(Duration::from_millis(5), |s| {
        let mut p = printer.borrow_mut();
        p.threads.end_batch();
        let _ = p.out.flush();
        let u = s.user_counters();
        let syscall_events = u.events - u.meta_events;
        if live && last_report.elapsed() >= Duration::from_secs(1) {
            eprintln!("  {} events ({} syscalls), {} bytes", u.events, syscall_events, u.bytes);
            last_report = Instant::now();
        }
        stop.load(Ordering::Relaxed)
            || deadline.is_some_and(|d| Instant::now() >= d)
            || (a.json && p.limit == 0)
            || syscall_events >= limit
    })?;
    let stats = session.stop()?;
    let _ = printer.borrow_mut().out.flush();
    finish(&stats, a.stats_json.as_deref())
}

fn finish(stats: &Stats, stats_json: Option<&str>) -> Result<()> {
    eprint!("{}", stats.report());
    if let Some(path) = stats_json {
        let text = serde_json::to_string_pretty(&stats.to_json())?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {path}"))?;
    }
    Ok(())
}
