//! `harrier fswatch`: file-system events with paths resolved in the kernel.

use anyhow::{bail, Context, Result};
use harrier_fswatch::wire::{flag_names, FsEvent};
use harrier_fswatch::{parse_events, Config, Resolution, Watcher, Woke, DEFAULT_EVENTS};
use harrier_state::Users;
use serde_json::json;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct FswatchArgs {
    /// Watched paths (default: the whole system).
    paths: Vec<PathBuf>,
    /// Events: open, mkdir, link, rename, setattr, unlink, rmdir, modify
    /// (comma-separated or repeated; default: all but modify).
    #[arg(short = 'e', long = "events")]
    events: Vec<String>,
    /// Watch directories' descendants too (the default).
    #[arg(long, overrides_with = "no_recursive")]
    recursive: bool,
    /// Only the watched inodes and their directories' entries.
    #[arg(long)]
    no_recursive: bool,
    /// Keep watching entries renamed out of a watched tree (the default).
    #[arg(long, overrides_with = "no_follow")]
    follow: bool,
    #[arg(long)]
    no_follow: bool,
    /// Path resolution: fragments, single-fragment or ringbuf.
    #[arg(long, default_value = "ringbuf")]
    resolution: String,
    /// Output: table, json (one object per line) or none.
    #[arg(long, default_value = "table")]
    format: String,
    /// Write events to this file instead of stdout.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Size of each per-CPU ring, e.g. 8M (a power of two, 32K to 256M).
    #[arg(long, default_value = "8M")]
    buffer_size: String,
    /// Events held for output before a write to the output.
    #[arg(long, default_value_t = 1024)]
    queue_size: usize,
    /// Stop after this many seconds.
    #[arg(long, allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Only this process (thread group).
    #[arg(long)]
    pid: Option<u32>,
    /// Also write the final statistics as JSON to this file.
    #[arg(long)]
    stats_json: Option<PathBuf>,
    /// The reader's nice value (-20..19), e.g. -5: drains sooner on a busy machine.
    #[arg(long, allow_negative_numbers = true)]
    nice: Option<i32>,
    /// Kernel hooks: auto (the best this kernel has: tracepoints on 6.13+,
    /// else fentry, else kprobes), tracepoints, fentry or kprobes.
    #[arg(long, default_value = "auto")]
    hooks: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Table,
    Json,
    None,
}

fn config(a: &FswatchArgs) -> Result<(Config, Format)> {
    let events = if a.events.is_empty() { DEFAULT_EVENTS.to_string() } else { a.events.join(",") };
    let format = match a.format.as_str() {
        "table" => Format::Table,
        "json" => Format::Json,
        "none" => Format::None,
        f => bail!("unknown format '{f}' (expected table, json or none)"),
    };
    if let Some(d) = a.duration {
        if !(d > 0.0 && d.is_finite()) {
            bail!("duration must be a positive number of seconds, not {d}");
        }
    }
    if let Some(n) = a.nice {
        if !(-20..=19).contains(&n) {
            bail!("nice value {n} must be between -20 and 19");
        }
    }
    if a.queue_size == 0 {
        bail!("queue size must be at least 1");
    }
    let resolution: Resolution = a.resolution.parse()?;
    let hooks = match a.hooks.as_str() {
        "auto" => None,
        h => Some(h.parse()?),
    };
    let cfg = Config {
        paths: a.paths.clone(),
        events: parse_events(&events)?,
        recursive: !a.no_recursive,
        follow: !a.no_follow,
        resolution,
        buffer_size: harrier_capture::parse_size(&a.buffer_size)?,
        pid: a.pid,
        hooks,
        ..Config::default()
    };
    harrier_fswatch::validate(&cfg)?;
    for p in &cfg.paths {
        harrier_fswatch::watch_key(p)?;
    }
    Ok((cfg, format))
}

/// Process context user space adds: exe and container, per pid, cached
/// (bounded: cleared when it grows past a limit).
struct Context_ {
    procs: HashMap<u32, (Arc<str>, Arc<str>)>,
    users: Users,
}

impl Context_ {
    fn proc(&mut self, pid: u32) -> (Arc<str>, Arc<str>) {
        if self.procs.len() > 4096 {
            self.procs.clear();
        }
        self.procs
            .entry(pid)
            .or_insert_with(|| {
                let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
                let id = cg
                    .lines()
                    .filter_map(|l| l.splitn(3, ':').nth(2))
                    .find_map(|p| {
                        harrier_state::container::id_from_cgroup(p).map(|(id, _)| id[..12].to_string())
                    })
                    .unwrap_or_else(|| "host".into());
                (Arc::from(exe), Arc::from(id))
            })
            .clone()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json_line(e: &FsEvent, ctx: &mut Context_, epoch_offset: u64) -> serde_json::Value {
    let (exe, container) = ctx.proc(e.pid);
    let user = ctx.users.user(e.uid).map(|u| u.name.to_string()).unwrap_or_default();
    let (major, minor) = e.dev_pair();
    let mut v = json!({
        "time": e.ts + epoch_offset,
        "event": e.kind_name(),
        "path": text(e.path),
        "pid": e.pid,
        "tid": e.tid,
        "comm": text(e.comm()),
        "exe": &*exe,
        "uid": e.uid,
        "gid": e.gid,
        "user": user,
        "inode": e.ino,
        "device": format!("{major}:{minor}"),
        "mount_id": e.mnt_id,
        "container_id": &*container,
        "ret": e.ret,
        "flags": flag_names(e.path_flags()).collect::<Vec<_>>(),
        "unresolved": e.unresolved(),
    });
    if let Some(s) = e.source {
        v["source_path"] = json!(text(s));
        v["source_flags"] = json!(flag_names(e.source_flags()).collect::<Vec<_>>());
    }
    v
}

fn table_line(e: &FsEvent) -> String {
    let mut s = format!("{:<8} {:>7} {:<16} ", e.kind_name(), e.pid, text(e.comm()));
    if let Some(src) = e.source {
        s += &format!("{} -> ", text(src));
    }
    s += &text(e.path);
    let flags: Vec<_> = flag_names(e.path_flags() | e.source_flags()).collect();
    if !flags.is_empty() {
        s += &format!(" [{}]", flags.join(","));
    }
    s
}

pub fn run(a: FswatchArgs) -> Result<()> {
    let (cfg, format) = config(&a)?;
    if unsafe { libc::geteuid() } != 0 {
        bail!("harrier fswatch needs root (CAP_BPF and CAP_PERFMON)");
    }
    let out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(File::create(p).with_context(|| format!("{}", p.display()))?),
        None => Box::new(std::io::stdout()),
    };
    // A RefCell: the event closure writes it, the loop flushes it.
    let out = std::cell::RefCell::new(BufWriter::with_capacity(a.queue_size.max(1) * 256, out));
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    let mut w = Watcher::start(&cfg)?;
    if let Some(n) = a.nice {
        harrier_fswatch::set_reader_nice(n)?;
    }
    say!("harrier fswatch: {}", w.hooks().describe());
    say!(
        "harrier fswatch: watching {} ({} resolution, {}recursive); Ctrl-C to stop",
        if cfg.paths.is_empty() {
            "the whole system".to_string()
        } else {
            cfg.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        },
        a.resolution,
        if cfg.recursive { "" } else { "not " }
    );
    let epoch_offset = harrier_engine::epoch_offset();
    let mut ctx = Context_ { procs: HashMap::new(), users: Users::default() };
    let failed = std::cell::Cell::new(false);
    let mut emit = |e: &FsEvent| {
        if failed.get() {
            return;
        }
        let mut out = out.borrow_mut();
        let r = match format {
            Format::Json => writeln!(out, "{}", json_line(e, &mut ctx, epoch_offset)),
            Format::Table => writeln!(out, "{}", table_line(e)),
            Format::None => Ok(()),
        };
        // A closed output (e.g. `| head`) ends the watch.
        failed.set(r.is_err());
    };
    let limit = a.duration.map(Duration::from_secs_f64);
    let mut pace = harrier_capture::Pace::new(cfg.buffer_size);
    while !stop.load(Ordering::Relaxed) && !failed.get() && limit.is_none_or(|l| w.uptime() < l) {
        // The timer, or sooner a ring's doorbell (a quarter full).
        let woke = w.wait(pace.interval.min(harrier_fswatch::max_wait(cfg.buffer_size)))?;
        let before = w.pace_bytes();
        w.drain(&mut emit)?;
        // After a doorbell less than the interval passed: bytes over the
        // interval would understate the rate.
        if woke == Woke::Timeout {
            pace.update(w.pace_bytes() - before, 1);
        }
        if format != Format::None && out.borrow_mut().flush().is_err() {
            break;
        }
    }
    let stats = w.stop(&mut emit)?;
    let _ = out.borrow_mut().flush();
    say!("{}", stats.report());
    if let Some(p) = &a.stats_json {
        std::fs::write(p, stats.to_json().to_string()).with_context(|| format!("{}", p.display()))?;
    }
    Ok(())
}
