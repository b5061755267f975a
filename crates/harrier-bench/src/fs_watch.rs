//! bench-fs's watcher processes (`harrier-bench fs-watch KIND PATH`): one
//! process per watcher, so its CPU time and memory are its own. Protocol:
//! "ready" on stdout once watching; any line (or EOF) on stdin stops it;
//! it then drains what is queued and prints one JSON line of results.

use anyhow::{bail, Context, Result};
use harrier_fswatch::Resolution;
use std::ffi::CString;
use std::io::{BufRead, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a watcher reports at the end.
#[derive(Default)]
struct Out {
    events: u64,
    /// Lost as the watcher itself knows it: ring-full drops, queue overflows.
    lost: u64,
    /// BPF programs' run count and ns (fswatch with --bpf-stats).
    bpf_runs: u64,
    bpf_ns: u64,
    /// fswatch's sys_exit program alone: where the walk and the filter run.
    exit_runs: u64,
    exit_ns: u64,
    /// Every fswatch program: (name, runs, ns).
    progs: Vec<(String, u64, u64)>,
    bytes: u64,
    /// The allocator's (bytes, count) totals when the reading loop ended,
    /// and the events it had handed out then (alloc_count.rs).
    alloc_end: (u64, u64),
    loop_events: u64,
    /// fswatch: waits its doorbell ended (a ring half full).
    wakeups: u64,
}

impl Out {
    /// Marks the end of the reading loop: allocations after it (closing
    /// reports, stats) are not the reader's per-event work.
    fn loop_done(&mut self) {
        self.alloc_end = crate::alloc_count::totals();
        self.loop_events = self.events;
    }
}

/// How a bench-fs watcher runs: what it watches for, and fswatch's buffers.
#[derive(Clone, Copy)]
pub struct Opts {
    /// Opens only (FSProbe's scenarios: each operation an open and a close).
    pub opens: bool,
    pub buffer_size: usize,
    /// fswatch's verdict and path caches (Config::verdict_cache).
    pub cache: bool,
    /// fswatch: the reader's nice value (harrier fswatch --nice).
    pub nice: Option<i32>,
}

/// `pid`: fswatch reports only this process (the benchmark's workload).
pub fn run(kind: &str, path: &Path, pid: Option<u32>, bpf_stats: bool, o: Opts) -> Result<()> {
    match kind {
        "fswatch" | "fswatch-unwatched" => fswatch(path, pid, bpf_stats, true, Resolution::Ringbuf, o),
        // The verdict and path caches off: what they save, in the same run.
        "fswatch-nocache" | "fswatch-unwatched-nocache" => {
            fswatch(path, pid, bpf_stats, true, Resolution::Ringbuf, Opts { cache: false, ..o })
        }
        "fswatch-unwatched-walk" => fswatch(path, pid, bpf_stats, false, Resolution::Ringbuf, o),
        "fswatch-single-fragment" => fswatch(path, pid, bpf_stats, true, Resolution::SingleFragment, o),
        "fswatch-fragments" => fswatch(path, pid, bpf_stats, true, Resolution::Fragments, o),
        "inotify" => inotify(path, o),
        "fanotify" => fanotify(path, o),
        _ => bail!(
            "unknown watcher '{kind}' (expected fswatch, fswatch-single-fragment, fswatch-fragments, \
             fswatch-unwatched, fswatch-unwatched-walk, fswatch-nocache, fswatch-unwatched-nocache, \
             inotify or fanotify)"
        ),
    }
}

fn cpu_ms() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 * 1e3 + tv.tv_usec as f64 / 1e3;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Says ready, runs `wait` (which returns when stdin says stop), reports.
fn serve(wait: impl FnOnce() -> Result<Out>) -> Result<()> {
    println!("ready");
    std::io::stdout().flush()?;
    let cpu0 = cpu_ms();
    let alloc0 = crate::alloc_count::totals();
    let o = wait()?;
    let v = serde_json::json!({
        "alloc_bytes": o.alloc_end.0.saturating_sub(alloc0.0),
        "allocs": o.alloc_end.1.saturating_sub(alloc0.1),
        "loop_events": o.loop_events,
        "events": o.events, "lost": o.lost, "cpu_ms": cpu_ms() - cpu0, "rss_kib": rss_kib(),
        "bpf_runs": o.bpf_runs, "bpf_ns": o.bpf_ns, "exit_runs": o.exit_runs, "exit_ns": o.exit_ns,
        "progs": o.progs, "bytes": o.bytes, "wakeups": o.wakeups,
    });
    println!("{v}");
    Ok(())
}

/// Whether stdin has a line (or EOF) within `ms`, or -1 to block.
fn stdin_ready(extra: Option<i32>, ms: i32) -> Result<(bool, bool)> {
    let mut fds = [
        libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: extra.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
    ];
    let n = if extra.is_some() { 2 } else { 1 };
    if unsafe { libc::poll(fds.as_mut_ptr(), n, ms) } < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e.into());
        }
    }
    Ok((fds[0].revents != 0, fds[1].revents != 0))
}

/// `prefilter`: false measures the walk every event paid before the watch
/// check moved in front of it.
fn fswatch(
    path: &Path,
    pid: Option<u32>,
    bpf_stats: bool,
    prefilter: bool,
    res: Resolution,
    opts: Opts,
) -> Result<()> {
    let mut cfg = harrier_fswatch::Config::default();
    cfg.paths.push(path.to_path_buf());
    cfg.pid = pid;
    cfg.prefilter = prefilter;
    cfg.verdict_cache = opts.cache;
    cfg.resolution = res;
    cfg.buffer_size = opts.buffer_size;
    cfg.events = harrier_fswatch::parse_events(if opts.opens {
        "open"
    } else {
        "open,mkdir,rename,unlink,rmdir,modify"
    })?;
    // Held for the run: the kernel counts program run time while it is open.
    let _stats = bpf_stats
        .then(|| {
            let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
        })
        .flatten();
    let mut w = harrier_fswatch::Watcher::start(&cfg)?;
    if let Some(n) = opts.nice {
        harrier_fswatch::set_reader_nice(n)?;
    }
    let mut pace = harrier_capture::Pace::new(cfg.buffer_size);
    serve(|| {
        let mut events = 0u64;
        loop {
            // As the CLI: the timer, or sooner a ring's doorbell; stdin is
            // looked at after each wake-up (a stop waits one interval at most).
            let woke = w.wait(pace.interval.min(harrier_fswatch::max_wait(cfg.buffer_size)))?;
            let (stop, _) = stdin_ready(None, 0)?;
            let before = w.pace_bytes();
            w.drain(|_| events += 1)?;
            if woke == harrier_fswatch::Woke::Timeout {
                pace.update(w.pace_bytes() - before, 1);
            }
            if stop {
                break;
            }
        }
        let mut o = Out { events, ..Out::default() };
        o.loop_done();
        for (name, runs, ns) in w.prog_stats() {
            o.bpf_runs += runs;
            o.bpf_ns += ns;
            if name == "fw_sys_exit" {
                (o.exit_runs, o.exit_ns) = (runs, ns);
            }
            o.progs.push((name, runs, ns));
        }
        let s = w.stop(|_| o.events += 1)?;
        // Ring-full drops, and single-fragment's paths whose slot was reused.
        o.lost = s.kernel.drops() + s.paths_lost;
        o.bytes = s.bytes;
        o.wakeups = s.wakeups;
        Ok(o)
    })
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("no NUL in bench paths")
}

const IN_MASK: u32 =
    libc::IN_CREATE | libc::IN_MODIFY | libc::IN_MOVED_FROM | libc::IN_MOVED_TO | libc::IN_DELETE;

/// A minimal recursive inotify reader: a watch per directory (new ones
/// added as they appear), each event's path built from its watch's.
fn inotify(root: &Path, opts: Opts) -> Result<()> {
    let in_mask = if opts.opens { libc::IN_OPEN } else { IN_MASK };
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("inotify_init1");
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut dirs: std::collections::HashMap<i32, PathBuf> = Default::default();
    let add = |dirs: &mut std::collections::HashMap<i32, PathBuf>, p: &Path| {
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), cpath(p).as_ptr(), in_mask) };
        // A directory gone before its watch (mkdir then rmdir) is no error.
        if wd >= 0 {
            dirs.insert(wd, p.to_path_buf());
        }
    };
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        add(&mut dirs, &d);
        for e in std::fs::read_dir(&d).with_context(|| format!("{}", d.display()))? {
            let e = e?;
            if e.file_type()?.is_dir() {
                stack.push(e.path());
            }
        }
    }
    // The walk above opened every directory: with IN_OPEN that queued two
    // events per directory (more than the 16,384-event queue in the large
    // scenarios, hence an IN_Q_OVERFLOW). None is the workload's: discard
    // them before saying ready.
    let mut buf = vec![0u8; 64 << 10];
    while unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    serve(|| {
        let mut o = Out::default();
        let mut path = PathBuf::new();
        loop {
            let (stop, _) = stdin_ready(Some(fd.as_raw_fd()), -1)?;
            loop {
                let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n <= 0 {
                    break;
                }
                let mut off = 0usize;
                while off < n as usize {
                    let ev: libc::inotify_event =
                        unsafe { std::ptr::read_unaligned(buf[off..].as_ptr().cast()) };
                    let name = &buf[off + 16..off + 16 + ev.len as usize];
                    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                    off += 16 + ev.len as usize;
                    if ev.mask & libc::IN_Q_OVERFLOW != 0 {
                        o.lost += 1;
                    }
                    if ev.mask & in_mask == 0 {
                        continue;
                    }
                    o.events += 1;
                    path.clear();
                    if let Some(d) = dirs.get(&ev.wd) {
                        path.push(d);
                        path.push(std::ffi::OsStr::from_bytes(name));
                    }
                    if ev.mask & libc::IN_CREATE != 0 && ev.mask & libc::IN_ISDIR != 0 {
                        let p = path.clone();
                        add(&mut dirs, &p);
                    }
                }
            }
            if stop {
                o.loop_done();
                return Ok(o);
            }
        }
    })
}

const FAN_MASK: u64 =
    libc::FAN_CREATE | libc::FAN_MODIFY | libc::FAN_MOVED_FROM | libc::FAN_MOVED_TO | libc::FAN_DELETE;

/// A fanotify reader: a filesystem mark, records with the directory's file
/// handle and the entry's name (FAN_REPORT_DFID_NAME), not resolved to paths
/// (that would cost an open_by_handle_at per directory).
fn fanotify(root: &Path, opts: Opts) -> Result<()> {
    let fan_mask = if opts.opens { libc::FAN_OPEN } else { FAN_MASK };
    let fd = unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK | libc::FAN_REPORT_DFID_NAME,
            libc::O_RDONLY as u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("fanotify_init(FAN_REPORT_DFID_NAME)");
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let r = unsafe {
        libc::fanotify_mark(
            fd.as_raw_fd(),
            libc::FAN_MARK_ADD | libc::FAN_MARK_FILESYSTEM,
            fan_mask | libc::FAN_ONDIR,
            libc::AT_FDCWD,
            cpath(root).as_ptr(),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("fanotify_mark(FAN_MARK_FILESYSTEM, {})", root.display()));
    }
    serve(|| {
        let mut o = Out::default();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let (stop, _) = stdin_ready(Some(fd.as_raw_fd()), -1)?;
            loop {
                let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n <= 0 {
                    break;
                }
                let mut off = 0usize;
                while off + 24 <= n as usize {
                    let m: libc::fanotify_event_metadata =
                        unsafe { std::ptr::read_unaligned(buf[off..].as_ptr().cast()) };
                    if m.event_len == 0 {
                        break;
                    }
                    off += m.event_len as usize;
                    if m.mask & libc::FAN_Q_OVERFLOW != 0 {
                        o.lost += 1;
                    }
                    // Merged records carry several kinds: count each.
                    o.events += (m.mask & fan_mask).count_ones() as u64;
                }
            }
            if stop {
                o.loop_done();
                return Ok(o);
            }
        }
    })
}

/// Runs `harrier-bench fs-watch ARGS` (a watcher child), `work` once it is
/// ready, then stops it; returns what `work` measured and the watcher's
/// closing JSON report. A watcher that fails or says something else fails
/// the run, named by `label`.
pub fn with_watcher(
    args: &[String],
    label: &str,
    work: impl FnOnce() -> Result<f64>,
) -> Result<(f64, serde_json::Value)> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    // SAFETY: prctl is async-signal-safe. A bench killed mid-run takes its
    // watcher with it (its BPF links and marks go with the process).
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = cmd
        .arg("fs-watch")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("starting a watcher")?;
    let mut out = std::io::BufReader::new(child.stdout.take().context("the watcher's stdout")?);
    let mut stdin = child.stdin.take().context("the watcher's stdin")?;
    let r = (|| -> Result<(f64, serde_json::Value)> {
        let line = read_line_within(&mut out, READY_WITHIN)
            .with_context(|| format!("watcher {label} did not say ready"))?;
        if line.trim() != "ready" {
            bail!("watcher {label} did not start (said {:?})", line.trim());
        }
        let measured = work()?;
        writeln!(stdin, "stop")?;
        let line = read_line_within(&mut out, REPORT_WITHIN)
            .with_context(|| format!("watcher {label} did not report"))?;
        let v = serde_json::from_str(&line).with_context(|| format!("watcher {label} said {line:?}"))?;
        Ok((measured, v))
    })();
    drop(stdin);
    if r.is_err() {
        let _ = child.kill();
    }
    let status = child.wait()?;
    let r = r?;
    if !status.success() {
        bail!("watcher {label} failed: {status}");
    }
    Ok(r)
}

/// A watcher loads its BPF programs (or sets up its marks) within this.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);
/// A stopped watcher drains what is queued and reports within this (a full
/// 4096-page ring of fragments events joins a few hundred thousand paths).
const REPORT_WITHIN: std::time::Duration = std::time::Duration::from_secs(300);

/// One line from the watcher, or an error once `within` has passed (a
/// stuck watcher fails its cell instead of hanging the run).
fn read_line_within(
    out: &mut std::io::BufReader<std::process::ChildStdout>,
    within: std::time::Duration,
) -> Result<String> {
    let deadline = std::time::Instant::now() + within;
    let mut line = String::new();
    // Only block in read_line once the pipe has something; a partial line
    // is completed by the writer's very next write.
    while out.buffer().is_empty() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            bail!("no answer within {} s", within.as_secs());
        }
        let mut p = libc::pollfd { fd: out.get_ref().as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        if unsafe { libc::poll(&mut p, 1, ms) } > 0 {
            break;
        }
    }
    out.read_line(&mut line)?;
    Ok(line)
}
