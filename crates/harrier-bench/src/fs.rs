//! `harrier-bench fs` (`make bench-fs`): harrier fswatch against inotify and
//! fanotify readers and no watcher, on one workload (fs_work.rs) in a tmpfs
//! of its own, in interleaved rounds. Per watcher: wall ns per operation
//! added over no watcher, events delivered against expected, the watcher's
//! CPU time and RSS, and with --bpf-stats fswatch's BPF ns per operation.

use crate::report::{num, write_report, Table};
use crate::workload::median;
use crate::{fs_watch, fs_work};
use anyhow::{anyhow, Context, Result};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Iterations per round (each: create, write, rename, unlink, mkdir, rmdir).
    #[arg(long, default_value_t = 20_000)]
    iters: u64,
    /// The tree: FANOUT directories of FANOUT subdirectories.
    #[arg(long, default_value_t = 8)]
    fanout: usize,
    /// BPF run-time statistics for fswatch (BPF_ENABLE_STATS: adds its own
    /// clock reads to every BPF program on the machine while on).
    #[arg(long)]
    bpf_stats: bool,
    /// Comma-separated: none, fswatch, fswatch-single-fragment, fswatch-fragments, fswatch-unwatched,
    /// fswatch-unwatched-walk, inotify, fanotify.
    #[arg(
        long,
        default_value = "none,fswatch,fswatch-single-fragment,fswatch-fragments,fswatch-unwatched,fswatch-unwatched-walk,inotify,fanotify"
    )]
    watchers: String,
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

/// A private tmpfs: the workload's tree and nothing else (fanotify's
/// filesystem mark then sees only the workload). Unmounted on drop.
pub(crate) struct Scratch {
    pub(crate) dir: PathBuf,
}

impl Scratch {
    pub(crate) fn new() -> Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("harrier-bench-fs.{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let target = c(dir.to_str().context("temp dir is not UTF-8")?);
        let r = unsafe {
            libc::mount(
                c("tmpfs").as_ptr(),
                target.as_ptr(),
                c("tmpfs").as_ptr(),
                0,
                c("size=1g").as_ptr().cast(),
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            let _ = std::fs::remove_dir(&dir);
            return Err(anyhow!("mounting a tmpfs on {}: {e} (bench-fs needs root)", dir.display()));
        }
        unmount_on_signal(&target);
        Ok(Scratch { dir })
    }
}

/// The scratch mount point (one per process: its name holds the pid).
static SCRATCH_MOUNT: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

/// A bench stopped by SIGINT, SIGTERM or SIGHUP never runs Scratch's drop:
/// its handler unmounts the tmpfs (and with it the tree) and removes the
/// mount point before exiting, so the machine is left as it was. Watcher
/// children die with the bench (fs_watch.rs: PR_SET_PDEATHSIG).
fn unmount_on_signal(target: &std::ffi::CStr) {
    extern "C" fn on_signal(sig: libc::c_int) {
        // Only async-signal-safe calls: umount2, rmdir, _exit.
        if let Some(p) = SCRATCH_MOUNT.get() {
            unsafe {
                libc::umount2(p.as_ptr(), libc::MNT_DETACH);
                libc::rmdir(p.as_ptr());
            }
        }
        unsafe { libc::_exit(128 + sig) };
    }
    if SCRATCH_MOUNT.set(target.to_owned()).is_ok() {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            unsafe { libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Ok(c) = std::ffi::CString::new(self.dir.as_os_str().as_encoded_bytes()) {
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// One watcher's figures in one round.
#[derive(Default, Clone)]
struct Sample {
    ns_op: f64,
    events: u64,
    lost: u64,
    cpu_ms: f64,
    rss_kib: f64,
    bpf_ns: f64,
    exit_ns_run: f64,
    /// The watcher process's allocations while reading (bytes, count) and
    /// the events it had read by then.
    alloc: (u64, u64),
    loop_events: u64,
    /// Per fswatch program: (name, runs, ns).
    progs: Vec<(String, u64, u64)>,
}

fn one(
    kind: &str,
    a: &Args,
    tree: &Path,
    elsewhere: &Path,
    dirs: &[PathBuf],
    round: usize,
) -> Result<Sample> {
    if kind == "none" {
        return Ok(Sample { ns_op: fs_work::run(dirs, a.iters, round)?, ..Sample::default() });
    }
    let watch = if kind.starts_with("fswatch-unwatched") { elsewhere } else { tree };
    let mut args =
        vec![kind.to_string(), watch.display().to_string(), "--pid".into(), std::process::id().to_string()];
    if a.bpf_stats {
        args.push("--bpf-stats".into());
    }
    let (ns_op, v) = fs_watch::with_watcher(&args, kind, || fs_work::run(dirs, a.iters, round))?;
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    let ops = (a.iters * fs_work::OPS_PER_ITER) as f64;
    Ok(Sample {
        ns_op,
        events: u("events"),
        lost: u("lost"),
        cpu_ms: v["cpu_ms"].as_f64().unwrap_or(f64::NAN),
        rss_kib: u("rss_kib") as f64,
        bpf_ns: if u("bpf_runs") > 0 { u("bpf_ns") as f64 / ops } else { f64::NAN },
        progs: serde_json::from_value(v["progs"].clone()).unwrap_or_default(),
        alloc: (u("alloc_bytes"), u("allocs")),
        loop_events: u("loop_events"),
        exit_ns_run: if u("exit_runs") > 0 { u("exit_ns") as f64 / u("exit_runs") as f64 } else { f64::NAN },
    })
}

pub fn run(a: Args) -> Result<()> {
    let kinds: Vec<&str> = a.watchers.split(',').map(str::trim).filter(|k| !k.is_empty()).collect();
    let scratch = Scratch::new()?;
    let tree = scratch.dir.join("tree");
    let elsewhere = scratch.dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere)?;
    let dirs = fs_work::make_tree(&tree, a.fanout)?;
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); kinds.len()];
    for round in 0..a.rounds {
        // Interleaved: each round starts with the next watcher, so drift on
        // a shared machine spreads over all of them.
        for k in 0..kinds.len() {
            let i = (k + round) % kinds.len();
            let s = one(kinds[i], &a, &tree, &elsewhere, &dirs, round * kinds.len() + i)
                .with_context(|| format!("round {round}, {}", kinds[i]))?;
            eprintln!("bench-fs: round {round} {:<18} {:8.1} ns/op", kinds[i], s.ns_op);
            samples[i].push(s);
        }
    }
    drop(scratch);
    report(&a, &kinds, &samples)
}

/// Bytes (and allocations) the watcher asked for while reading, per event read.
fn alloc_per_event(v: &[Sample]) -> String {
    let n: u64 = v.iter().map(|s| s.loop_events).sum();
    if n == 0 {
        return "-".into();
    }
    let (b, c): (u64, u64) = v.iter().fold((0, 0), |(b, c), s| (b + s.alloc.0, c + s.alloc.1));
    format!("{} ({})", num(b as f64 / n as f64, 2), num(c as f64 / n as f64, 4))
}

fn med(v: &[Sample], f: impl Fn(&Sample) -> f64) -> f64 {
    median(&mut v.iter().map(f).collect::<Vec<_>>())
}

fn report(a: &Args, kinds: &[&str], samples: &[Vec<Sample>]) -> Result<()> {
    let base = kinds.iter().position(|k| *k == "none").map(|i| &samples[i]);
    let base_ns = base.map(|b| med(b, |s| s.ns_op)).unwrap_or(f64::NAN);
    let mut rows = Vec::new();
    let mut bars = Vec::new();
    for (k, v) in kinds.iter().zip(samples) {
        let ns = med(v, |s| s.ns_op);
        // Added cost: per round against that round's no-watcher run, then the median.
        let added = match base {
            Some(b) => median(&mut v.iter().zip(b).map(|(s, b)| s.ns_op - b.ns_op).collect::<Vec<_>>()),
            None => f64::NAN,
        };
        let expected = fs_work::expected_per_iter(k) * a.iters * v.len() as u64;
        let got: u64 = v.iter().map(|s| s.events).sum();
        let lost_pct = if expected > 0 {
            num(100.0 * (expected as f64 - got as f64) / expected as f64, 2)
        } else if got > 0 {
            format!("{got} unexpected")
        } else {
            "-".into()
        };
        let idle = *k == "none";
        let cell = |x: f64, d| if idle { String::new() } else { num(x, d) };
        rows.push(vec![
            k.to_string(),
            num(ns, 1),
            if idle { String::new() } else { format!("{added:+.1}") },
            num(ns / base_ns, 2),
            if idle { String::new() } else { format!("{got} / {expected}") },
            if idle { String::new() } else { lost_pct },
            if idle { String::new() } else { v.iter().map(|s| s.lost).sum::<u64>().to_string() },
            cell(med(v, |s| s.cpu_ms), 1),
            cell(med(v, |s| s.rss_kib) / 1024.0, 1),
            cell(med(v, |s| s.bpf_ns), 1),
            cell(med(v, |s| s.exit_ns_run), 1),
            if idle { String::new() } else { alloc_per_event(v) },
        ]);
        if !idle {
            bars.push((k.to_string(), added));
        }
    }
    let t = Table {
        header: [
            "watcher",
            "ns/op",
            "ns/op added",
            "ratio",
            "events / expected",
            "lost %",
            "lost (watcher's count)",
            "watcher CPU ms",
            "RSS MiB",
            "BPF ns/op",
            "BPF ns/exit run",
            "alloc B/ev (allocs/ev)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    };
    let ops = a.iters * fs_work::OPS_PER_ITER;
    let md = format!(
        "bench-fs: {} rounds of {ops} operations ({} iterations of create, write, rename, unlink, \
         mkdir, rmdir over {} directories on a private tmpfs), watchers interleaved; medians. \
         `ns/op added` is the median over rounds of the difference with that round's no-watcher run. \
         fswatch: the library's reader, every kind incl. modify, the bench's pid filter (the machine's \
         other processes stay out of its figures); `fswatch-single-fragment` the same with paths in \
         the mmapped path slots; `fswatch-unwatched` watches a sibling directory \
         (every event filtered in the kernel); `fswatch-unwatched-walk` the same with the watch check \
         after the path walk (as before it moved in front). inotify: a minimal recursive reader (a watch per \
         directory, paths built). fanotify: FAN_REPORT_DFID_NAME with a filesystem mark, records \
         counted per kind, handles not resolved to paths. RSS at the end of the run. BPF columns \
         (--bpf-stats{}): all fswatch programs' run time per workload operation, and the sys_exit \
         program's mean per run. `alloc B/ev (allocs/ev)`: what the watcher process \
         asked its allocator for while reading, per event read (a counting global allocator; buffers \
         growing to the largest drain count, amortised).\n\n{}",
        a.rounds,
        a.iters,
        a.fanout * a.fanout,
        if a.bpf_stats { ", on" } else { ", off: -" },
        t.markdown()
    );
    let md = md + &per_program(a, kinds, samples);
    write_report(&a.out, "fs", &md, "File-system watchers: wall ns added per operation", &bars)?;
    Ok(())
}

/// Which fswatch program costs what: runs and ns summed over rounds, per
/// workload operation and per run (--bpf-stats).
fn per_program(a: &Args, kinds: &[&str], samples: &[Vec<Sample>]) -> String {
    if !a.bpf_stats {
        return String::new();
    }
    let ops = (a.iters * fs_work::OPS_PER_ITER) as f64;
    let mut rows = Vec::new();
    for (k, v) in kinds.iter().zip(samples) {
        let mut names: Vec<String> = Vec::new();
        for s in v {
            for (n, _, _) in &s.progs {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        for n in names {
            let (mut runs, mut ns) = (0u64, 0u64);
            for s in v {
                for (m, r, t) in &s.progs {
                    if *m == n {
                        runs += r;
                        ns += t;
                    }
                }
            }
            let per_op = ns as f64 / (ops * v.len() as f64);
            let per_run = if runs > 0 { ns as f64 / runs as f64 } else { f64::NAN };
            rows.push(vec![k.to_string(), n, runs.to_string(), num(per_op, 1), num(per_run, 1)]);
        }
    }
    let t = Table {
        header: ["watcher", "program", "runs (all rounds)", "ns per workload op", "ns per run"]
            .map(String::from)
            .to_vec(),
        rows,
    };
    format!(
        "\nPer program (runs include every process's: the pid filter runs inside the programs):\n\n{}",
        t.markdown()
    )
}
