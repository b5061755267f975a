//! `harrier-bench fs-scenarios`: FSProbe's six benchmark scenarios
//! (depth/breadth/files; names of 10 random characters; each operation an
//! open and a close of a random file of the pool) with no watcher, fswatch
//! in each resolution mode and ring size, fswatch watching elsewhere (every
//! event filtered in the kernel), an inotify and a fanotify reader, in
//! interleaved rounds on a private tmpfs. Per cell: wall ns per operation
//! and added over no watcher, BPF ns per event, bytes per event, events
//! against expected, drops, the reader's allocations per event, and the
//! highest rate held without drops (fs_rate.rs).

use crate::fs::Scratch;
use crate::fs_rate::{self, Rng, Search};
use crate::fs_watch::with_watcher;
use crate::report::{num, write_report, Table};
use crate::workload::median;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// FSProbe's scenarios: (depth, breadth, files).
pub const FSPROBE: [(usize, usize, usize); 6] =
    [(10, 1, 1), (60, 1, 1), (10, 1, 120_000), (10, 4000, 80_000), (60, 1000, 60_000), (5, 8000, 80_000)];

#[derive(clap::Args)]
pub struct Args {
    /// Scenarios as depth/breadth/files, comma-separated; default FSProbe's six.
    #[arg(long)]
    scenarios: Option<String>,
    /// Files and branches divided by 20, fewer operations: minutes, not an hour.
    #[arg(long)]
    quick: bool,
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Operations (open + close) per round and watcher.
    #[arg(long, default_value_t = 50_000)]
    ops: u64,
    /// fswatch ring sizes to sweep, in 4 KiB pages (8 is the smallest ring fswatch takes).
    #[arg(long, default_value = "8,64,512,4096")]
    pages: String,
    /// Watchers: none, fswatch (every resolution mode and ring size),
    /// fswatch-unwatched, inotify, fanotify.
    #[arg(long, default_value = "none,fswatch,fswatch-unwatched,inotify,fanotify")]
    watchers: String,
    #[arg(long)]
    bpf_stats: bool,
    /// Seconds each hold of the drop-free rate search lasts (the 10;
    /// --quick: 2).
    #[arg(long)]
    hold: Option<f64>,
    /// fswatch ring sizes (pages) whose highest drop-free rate is searched,
    /// in each resolution mode; inotify and fanotify are searched too.
    #[arg(long, default_value = "64")]
    rate_pages: String,
    /// Holds per search at most (the first is unthrottled).
    #[arg(long, default_value_t = 5)]
    rate_steps: usize,
    /// fswatch readers' nice value (harrier fswatch --nice), e.g. -5.
    #[arg(long, allow_negative_numbers = true)]
    reader_nice: Option<i32>,
    /// No drop-free rate search.
    #[arg(long)]
    no_rate: bool,
    /// A round's producer stops after this many seconds (the cell is marked);
    /// a watcher that does not start or report in time fails its cell.
    #[arg(long, default_value_t = 60.0)]
    cell_timeout: f64,
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

/// A name of 10 random characters, as FSProbe's.
fn name(rng: &mut Rng) -> String {
    const A: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..10).map(|_| A[(rng.next() % A.len() as u64) as usize] as char).collect()
}

/// The tree: `breadth` branches of `depth` nested directories (10 random
/// characters each) under root, `files` files spread over the deepest
/// directories. Returns the files.
fn make_tree(root: &Path, depth: usize, breadth: usize, files: usize, rng: &mut Rng) -> Result<Vec<CString>> {
    let mut leaves = Vec::with_capacity(breadth);
    for _ in 0..breadth {
        let mut d = root.to_path_buf();
        for _ in 0..depth {
            d.push(name(rng));
        }
        std::fs::create_dir_all(&d).with_context(|| format!("{}", d.display()))?;
        leaves.push(d);
    }
    let mut out = Vec::with_capacity(files);
    for i in 0..files {
        let p = leaves[i % breadth].join(name(rng));
        std::fs::write(&p, b"").with_context(|| format!("{}", p.display()))?;
        out.push(CString::new(p.as_os_str().as_bytes())?);
    }
    Ok(out)
}

/// `ops` opens and closes of random files of the pool, or fewer if `limit`
/// passes first: (wall ns per operation, operations made).
fn open_close(files: &[CString], ops: u64, seed: u64, limit: Duration) -> Result<(f64, u64)> {
    let mut rng = Rng(seed | 1);
    let picks: Vec<u32> = (0..ops).map(|_| (rng.next() % files.len() as u64) as u32).collect();
    let t = Instant::now();
    let mut done = 0u64;
    for &i in &picks {
        let fd = unsafe { libc::open(files[i as usize].as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            bail!("open {:?}: {}", files[i as usize], std::io::Error::last_os_error());
        }
        unsafe { libc::close(fd) };
        done += 1;
        // A clock read per 1,024 operations: nothing next to them.
        if done.is_multiple_of(1024) && t.elapsed() >= limit {
            break;
        }
    }
    Ok((t.elapsed().as_nanos() as f64 / done as f64, done))
}

#[derive(Default, Clone)]
struct Sample {
    ns_op: f64,
    /// Operations made (fewer than asked when the cell timed out).
    ops: u64,
    timed_out: bool,
    events: u64,
    lost: u64,
    bpf_ns: u64,
    bytes: u64,
    /// The watcher process's allocations while reading, and the events it
    /// had read by then.
    alloc_bytes: u64,
    allocs: u64,
    loop_events: u64,
}

/// A watcher column: its name and how to start it.
struct Col {
    name: String,
    kind: &'static str,
    pages: usize,
}

/// A watcher's command line (harrier-bench fs-watch).
fn watch_args(c: &Col, a: &Args, watch: &Path) -> Vec<String> {
    let mut args =
        vec![c.kind.to_string(), watch.display().to_string(), "--pid".into(), std::process::id().to_string()];
    args.extend(["--opens".into(), "--buffer-size".into(), (c.pages.max(8) * 4096).to_string()]);
    if a.bpf_stats {
        args.push("--bpf-stats".into());
    }
    if let (Some(n), true) = (a.reader_nice, c.kind.starts_with("fswatch")) {
        args.push(format!("--nice={n}"));
    }
    args
}

fn one(c: &Col, a: &Args, watch: &Path, files: &[CString], ops: u64, seed: u64) -> Result<Sample> {
    let limit = Duration::from_secs_f64(a.cell_timeout);
    let mut done = 0;
    if c.kind == "none" {
        let (ns_op, done) = open_close(files, ops, seed, limit)?;
        return Ok(Sample { ns_op, ops: done, timed_out: done < ops, ..Sample::default() });
    }
    let (ns_op, v) = with_watcher(&watch_args(c, a, watch), &c.name, || {
        let (ns, n) = open_close(files, ops, seed, limit)?;
        done = n;
        Ok(ns)
    })?;
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok(Sample {
        ns_op,
        ops: done,
        timed_out: done < ops,
        events: u("events"),
        lost: u("lost"),
        bpf_ns: u("bpf_ns"),
        bytes: u("bytes"),
        alloc_bytes: u("alloc_bytes"),
        allocs: u("allocs"),
        loop_events: u("loop_events"),
    })
}

fn parse_scenarios(a: &Args) -> Result<Vec<(usize, usize, usize)>> {
    let mut v = match &a.scenarios {
        None => FSPROBE.to_vec(),
        Some(s) => s
            .split(',')
            .map(|t| {
                let n: Vec<usize> = t.split('/').map(|x| x.trim().parse()).collect::<Result<_, _>>()?;
                match n[..] {
                    [d, b, f] if d > 0 && b > 0 && f > 0 => Ok((d, b, f)),
                    _ => bail!("scenario '{t}': expected depth/breadth/files, each above 0"),
                }
            })
            .collect::<Result<Vec<_>>>()?,
    };
    if a.quick {
        for s in &mut v {
            s.1 = s.1.div_ceil(20);
            s.2 = s.2.div_ceil(20);
        }
    }
    Ok(v)
}

fn columns(a: &Args) -> Result<Vec<Col>> {
    let pages: Vec<usize> = a.pages.split(',').map(|p| p.trim().parse()).collect::<Result<_, _>>()?;
    let mut cols = Vec::new();
    for w in a.watchers.split(',').map(str::trim) {
        match w {
            "none" | "inotify" | "fanotify" => {
                let kind = match w {
                    "none" => "none",
                    "inotify" => "inotify",
                    _ => "fanotify",
                };
                cols.push(Col { name: w.into(), kind, pages: 0 })
            }
            "fswatch" => {
                for &p in &pages {
                    cols.push(Col { name: format!("fswatch ringbuf {p}p"), kind: "fswatch", pages: p });
                    cols.push(Col {
                        name: format!("fswatch single-fragment {p}p"),
                        kind: "fswatch-single-fragment",
                        pages: p,
                    });
                    cols.push(Col {
                        name: format!("fswatch fragments {p}p"),
                        kind: "fswatch-fragments",
                        pages: p,
                    });
                }
            }
            "fswatch-unwatched" => {
                let p = pages.iter().copied().max().unwrap_or(2048);
                cols.push(Col { name: "fswatch unwatched".into(), kind: "fswatch-unwatched", pages: p });
            }
            // The verdict and path caches off (ringbuf, the largest ring): what they save.
            "fswatch-nocache" | "fswatch-unwatched-nocache" => {
                let p = pages.iter().copied().max().unwrap_or(2048);
                let kind =
                    if w == "fswatch-nocache" { "fswatch-nocache" } else { "fswatch-unwatched-nocache" };
                cols.push(Col {
                    name: w.replace("-nocache", ", no cache").replace('-', " "),
                    kind,
                    pages: p,
                });
            }
            _ => {
                bail!(
                    "unknown watcher '{w}' (expected none, fswatch, fswatch-unwatched, fswatch-nocache, \
                     fswatch-unwatched-nocache, inotify, fanotify)"
                )
            }
        }
    }
    Ok(cols)
}

/// The 1, 5 and 15 minute load averages (the machine is shared: the
/// report says how busy it was).
fn loadavg() -> String {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// A line above the progress bar, or on stderr when there is no terminal
/// (indicatif then hides the bar and drops its println).
fn say(pb: &ProgressBar, line: impl AsRef<str>) {
    if pb.is_hidden() {
        eprintln!("{}", line.as_ref());
    } else {
        pb.println(line);
    }
}

/// The columns whose highest drop-free rate is searched: each fswatch
/// resolution mode at each of --rate-pages, inotify and fanotify.
fn rate_columns(a: &Args) -> Result<Vec<Col>> {
    if a.no_rate {
        return Ok(Vec::new());
    }
    let watchers: Vec<&str> = a.watchers.split(',').map(str::trim).collect();
    let mut cols = Vec::new();
    if watchers.contains(&"fswatch") {
        for p in a.rate_pages.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let p: usize = p.parse().with_context(|| format!("--rate-pages: '{p}' is not a page count"))?;
            for (mode, kind) in [
                ("ringbuf", "fswatch"),
                ("single-fragment", "fswatch-single-fragment"),
                ("fragments", "fswatch-fragments"),
            ] {
                cols.push(Col { name: format!("fswatch {mode} {p}p"), kind, pages: p });
            }
        }
    }
    for w in ["inotify", "fanotify"] {
        if watchers.contains(&w) {
            cols.push(Col { name: w.into(), kind: w, pages: 0 });
        }
    }
    Ok(cols)
}

/// Medians over rounds of one column's samples (rounds whose cell failed left out).
fn row(c: &Col, v: &[Option<Sample>], base: Option<&[Option<Sample>]>, a: &Args) -> Vec<String> {
    let ok: Vec<&Sample> = v.iter().flatten().collect();
    let ns = median(&mut ok.iter().map(|s| s.ns_op).collect::<Vec<_>>());
    let added = match base {
        Some(b) if c.kind != "none" => median(
            &mut v
                .iter()
                .zip(b)
                .filter_map(|(s, b)| Some(s.as_ref()?.ns_op - b.as_ref()?.ns_op))
                .collect::<Vec<_>>(),
        ),
        _ => f64::NAN,
    };
    let sum = |f: &dyn Fn(&Sample) -> u64| ok.iter().map(|s| f(s)).sum::<u64>();
    let (got, lost, ops) = (sum(&|s| s.events), sum(&|s| s.lost), sum(&|s| s.ops));
    let idle = c.kind == "none";
    let unwatched = c.kind.starts_with("fswatch-unwatched");
    let expected = if idle || unwatched { 0 } else { ops };
    let fs = c.kind.starts_with("fswatch");
    let ratio = |x: u64, n: u64, d| if n == 0 { "-".into() } else { num(x as f64 / n as f64, d) };
    let loop_events = sum(&|s| s.loop_events);
    let cut = if ok.iter().any(|s| s.timed_out) { " (timed out)" } else { "" };
    vec![
        format!("{}{cut}", c.name),
        num(ns, 1),
        num(added, 1),
        if a.bpf_stats && fs {
            ratio(sum(&|s| s.bpf_ns), if unwatched { ops } else { got }, 1)
        } else {
            "-".into()
        },
        if fs { ratio(sum(&|s| s.bytes), got, 1) } else { "-".into() },
        if idle { String::new() } else { ratio(sum(&|s| s.alloc_bytes), loop_events, 2) },
        if idle { String::new() } else { ratio(sum(&|s| s.allocs), loop_events, 4) },
        if idle { String::new() } else { format!("{got} / {expected}") },
        if idle { String::new() } else { lost.to_string() },
        // inotify and fanotify merge identical events still queued: missing, not counted.
        if idle { String::new() } else { expected.saturating_sub(got).to_string() },
        num(1e9 / ns, 0),
    ]
}

const HEADER: [&str; 11] = [
    "watcher",
    "ns/op",
    "added",
    "BPF ns/ev",
    "bytes/ev",
    "alloc B/ev",
    "allocs/ev",
    "events / expected",
    "lost (counted)",
    "missing (lost or merged)",
    "ops/s unthrottled",
];

pub fn run(a: Args) -> Result<()> {
    let scen = parse_scenarios(&a)?;
    let cols = columns(&a)?;
    let rate_cols = rate_columns(&a)?;
    let ops = if a.quick { a.ops.min(50_000) } else { a.ops };
    let hold = Duration::from_secs_f64(a.hold.unwrap_or(if a.quick { 2.0 } else { 10.0 }));
    let (load0, t0) = (loadavg(), Instant::now());
    let pb = ProgressBar::new((scen.len() * (a.rounds * cols.len() + rate_cols.len())) as u64);
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} cells, eta {eta} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut md = String::new();
    let mut bars = Vec::new();
    let mut rate_bars = Vec::new();
    let mut failed = Vec::new();
    let mut rng = Rng(0x5eed);
    for (si, &(depth, breadth, nfiles)) in scen.iter().enumerate() {
        let sc = format!("{depth}/{breadth}/{nfiles}");
        let scratch = Scratch::new()?;
        let tree = scratch.dir.join("tree");
        let elsewhere = scratch.dir.join("elsewhere");
        std::fs::create_dir_all(&elsewhere)?;
        pb.set_message(format!("{sc}: building the tree"));
        let files = make_tree(&tree, depth, breadth, nfiles, &mut rng)?;
        let mut samples: Vec<Vec<Option<Sample>>> = vec![Vec::new(); cols.len()];
        for round in 0..a.rounds {
            for k in 0..cols.len() {
                // Interleaved: each round starts with the next column, so
                // drift on a shared machine spreads over all of them.
                let i = (k + round) % cols.len();
                let watch = if cols[i].kind.starts_with("fswatch-unwatched") { &elsewhere } else { &tree };
                let seed = (si * 1000 + round) as u64 + 1;
                pb.set_message(format!("{sc} round {round}: {}", cols[i].name));
                let s = match one(&cols[i], &a, watch, &files, ops, seed) {
                    Ok(s) => {
                        say(
                            &pb,
                            format!(
                                "bench-fs scenarios: {sc} round {round} {:<28} {:8.1} ns/op",
                                cols[i].name, s.ns_op
                            ),
                        );
                        Some(s)
                    }
                    Err(e) => {
                        let m = format!("scenario {sc}, round {round}, {}: {e:#}", cols[i].name);
                        say(&pb, format!("bench-fs scenarios: FAILED {m}"));
                        failed.push(m);
                        None
                    }
                };
                samples[i].push(s);
                pb.inc(1);
            }
        }
        let base = cols.iter().position(|c| c.kind == "none").map(|i| samples[i].as_slice());
        let mut rows = Vec::new();
        for (c, v) in cols.iter().zip(&samples) {
            let r = row(c, v, base, &a);
            if c.kind != "none" && si == 0 {
                bars.push((c.name.clone(), r[2].parse().unwrap_or(f64::NAN)));
            }
            rows.push(r);
        }
        let t = Table { header: HEADER.map(String::from).to_vec(), rows };
        md += &format!("### depth {depth}, breadth {breadth}, files {nfiles}\n\n{}\n", t.markdown());

        let mut rate_rows = Vec::new();
        for (ci, c) in rate_cols.iter().enumerate() {
            let mut search = Search::new(a.rate_steps);
            let mut at_ceiling = None;
            let mut target = Some(Search::first());
            while let Some(t) = target {
                let what =
                    t.map_or("unthrottled".to_string(), |r| format!("{} ops/s", fs_rate::group(r as u64)));
                pb.set_message(format!("{sc} drop-free rate: {}, {what}", c.name));
                let seed = (si * 1000 + 500 + ci * 20 + search.trials.len()) as u64;
                match fs_rate::hold(&watch_args(c, &a, &tree), &c.name, &files, t, hold, seed) {
                    Ok((trial, events, made)) => {
                        say(
                            &pb,
                            format!(
                                "bench-fs scenarios: {sc} {:<28} {what}: {:.0} ops/s held, {} lost",
                                c.name, trial.rate, trial.drops
                            ),
                        );
                        at_ceiling.get_or_insert((trial.drops, events, made));
                        search.record(trial);
                        target = search.next();
                    }
                    Err(e) => {
                        let m = format!("scenario {sc}, drop-free rate of {}, {what}: {e:#}", c.name);
                        say(&pb, format!("bench-fs scenarios: FAILED {m}"));
                        failed.push(m);
                        target = None;
                    }
                }
            }
            pb.inc(1);
            let Some((lost, events, made)) = at_ceiling else { continue };
            let (clean, dropping) = fs_rate::describe(search.verdict());
            let ceiling = search.trials[0].rate;
            rate_rows.push(vec![
                c.name.clone(),
                fs_rate::group(ceiling as u64),
                lost.to_string(),
                format!("{events} / {made}"),
                clean,
                dropping,
                fs_rate::trace(&search),
            ]);
            let best = match search.verdict() {
                fs_rate::Verdict::AtCeiling(r) | fs_rate::Verdict::Between { clean: r, .. } => r,
                fs_rate::Verdict::Below(_) => 0.0,
            };
            rate_bars.push((format!("{sc} {}", c.name), best));
        }
        drop(scratch);
        if !rate_rows.is_empty() {
            let t = Table {
                header: [
                    "watcher",
                    "producer's ceiling ops/s",
                    "lost at ceiling",
                    "events / ops at ceiling",
                    "highest drop-free ops/s",
                    "drops from ops/s",
                    "holds (ops/s reached, lost)",
                ]
                .map(String::from)
                .to_vec(),
                rows: rate_rows,
            };
            md +=
                &format!("Highest rate held {} s without a drop:\n\n{}\n", hold.as_secs_f64(), t.markdown());
        }
    }
    pb.finish_and_clear();
    let head = format!(
        "bench-fs scenarios (FSProbe's): each operation an open and a close of a random file of the pool; \
         {} rounds of {ops} operations per watcher, interleaved; medians{}. `added`: wall ns per operation over \
         that round's no-watcher run. `BPF ns/ev`: all fswatch programs' run time (BPF_ENABLE_STATS{}) per \
         event delivered (per operation for `unwatched`). `alloc B/ev`, `allocs/ev`: bytes and allocations the \
         watcher process asked its allocator for while reading, per event read (a counting global allocator; \
         buffers growing to the largest drain count here, amortised). `ops/s unthrottled`: the producer's own rate. \
         Ring sizes in 4 KiB pages per CPU; a round's producer stops after {} s (marked `timed out`). \
         Drop-free rate: a paced producer held {} s per step; the first hold unthrottled (the producer's ceiling \
         with that watcher), then halving and bisection (at most {} holds) while drops are counted (fswatch: \
         ring-full drops and lost paths; inotify: IN_Q_OVERFLOW records; fanotify: FAN_Q_OVERFLOW records). \
         Merged events (inotify and fanotify coalesce identical queued events) are missing, not lost.\n\n\
         Machine: {} CPUs, shared with other jobs; load average (1/5/15 min) {load0} at the start, {} at the end; \
         the run took {:.1} min.\n\n",
        a.rounds,
        if a.quick { ", --quick: branches and files divided by 20" } else { "" },
        if a.bpf_stats { "" } else { ", off: -" },
        a.cell_timeout,
        hold.as_secs_f64(),
        a.rate_steps,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg(),
        t0.elapsed().as_secs_f64() / 60.0,
    );
    let mut md = head + &md + &capability_matrix();
    if !failed.is_empty() {
        md += &format!(
            "\n### Failed cells\n\n{}\n",
            failed.iter().map(|f| format!("- {f}\n")).collect::<String>()
        );
    }
    write_report(
        &a.out,
        "fs-scenarios",
        &md,
        "Open+close, first scenario: wall ns added per operation",
        &bars,
    )?;
    if !rate_bars.is_empty() {
        let png = a.out.join("fs-scenarios-rate.png");
        crate::report::bar_chart(
            &png,
            "Highest open+close rate held without a drop",
            "ops/s",
            &rate_bars,
            None,
        )?;
        eprintln!("harrier-bench: wrote {}", png.display());
    }
    if !failed.is_empty() {
        bail!("{} cell(s) failed (listed in the report)", failed.len());
    }
    Ok(())
}

/// FSProbe's capability matrix, with Harrier's column beside inotify's and fanotify's.
pub fn capability_matrix() -> String {
    let rows: [(&str, &str, &str, &str); 10] = [
        ("process context (pid, tid, comm, exe)", "yes", "no", "pid only"),
        ("user/group context", "yes (uid, gid, name)", "no", "no"),
        (
            "recursive",
            "yes (ancestor check in the kernel)",
            "no (a watch per directory)",
            "mount or filesystem marks",
        ),
        (
            "resolved paths",
            "yes (dentries and mounts)",
            "name in a watched dir",
            "handle + name (FAN_REPORT_DFID_NAME)",
        ),
        ("absolute paths", "yes", "rebuilt by the reader", "rebuilt by the reader (open_by_handle_at)"),
        ("inode context", "yes (dev, inode)", "no", "file handle"),
        ("mount point context", "yes (mount id)", "no", "no"),
        ("in-kernel filtering", "yes (watched dev+inode and descendants)", "per watch", "per mark"),
        ("container context", "yes (cgroup container id)", "no", "no"),
        ("follow after move", "yes (--follow)", "only within watched dirs", "filesystem mark: yes"),
    ];
    let t = Table {
        header: ["capability", "harrier fswatch", "inotify", "fanotify"].map(String::from).to_vec(),
        rows: rows.iter().map(|r| vec![r.0.into(), r.1.into(), r.2.into(), r.3.into()]).collect(),
    };
    format!("### Capabilities (FSProbe's matrix)\n\n{}", t.markdown())
}
