//! `harrier-bench fs-scenarios`: FSProbe's six benchmark scenarios
//! (depth/breadth/files; names of 10 random characters; each operation an
//! open and a close of a random file of the pool) with no watcher, fswatch
//! in each resolution mode and ring size, fswatch watching elsewhere (every
//! event filtered in the kernel), an inotify and a fanotify reader, in
//! interleaved rounds on a private tmpfs. Per cell: wall ns per operation
//! and added over no watcher, BPF ns per event, bytes per event, events
//! against expected, drops, and the rate the producer reached.

use crate::fs::Scratch;
use crate::fs_watch::with_watcher;
use crate::report::{num, write_report, Table};
use crate::workload::median;
use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

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
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Operations (open + close) per round and watcher.
    #[arg(long, default_value_t = 200_000)]
    ops: u64,
    /// fswatch ring sizes to sweep, in 4 KiB pages (16 is the smallest ring fswatch takes).
    #[arg(long, default_value = "16,64,512,4096")]
    pages: String,
    /// Watchers: none, fswatch (every resolution mode and ring size),
    /// fswatch-unwatched, inotify, fanotify.
    #[arg(long, default_value = "none,fswatch,fswatch-unwatched,inotify,fanotify")]
    watchers: String,
    #[arg(long)]
    bpf_stats: bool,
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

/// xorshift64*: the random names and picks, reproducible per seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn name(&mut self) -> String {
        const A: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        (0..10).map(|_| A[(self.next() % A.len() as u64) as usize] as char).collect()
    }
}

/// The tree: `breadth` branches of `depth` nested directories (10 random
/// characters each) under root, `files` files spread over the deepest
/// directories. Returns the files.
fn make_tree(root: &Path, depth: usize, breadth: usize, files: usize, rng: &mut Rng) -> Result<Vec<CString>> {
    let mut leaves = Vec::with_capacity(breadth);
    for _ in 0..breadth {
        let mut d = root.to_path_buf();
        for _ in 0..depth {
            d.push(rng.name());
        }
        std::fs::create_dir_all(&d).with_context(|| format!("{}", d.display()))?;
        leaves.push(d);
    }
    let mut out = Vec::with_capacity(files);
    for i in 0..files {
        let p = leaves[i % breadth].join(rng.name());
        std::fs::write(&p, b"").with_context(|| format!("{}", p.display()))?;
        out.push(CString::new(p.as_os_str().as_bytes())?);
    }
    Ok(out)
}

/// `ops` opens and closes of random files of the pool: wall ns per operation.
fn open_close(files: &[CString], ops: u64, seed: u64) -> Result<f64> {
    let mut rng = Rng(seed | 1);
    let picks: Vec<u32> = (0..ops).map(|_| (rng.next() % files.len() as u64) as u32).collect();
    let t = Instant::now();
    for &i in &picks {
        let fd = unsafe { libc::open(files[i as usize].as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            bail!("open {:?}: {}", files[i as usize], std::io::Error::last_os_error());
        }
        unsafe { libc::close(fd) };
    }
    Ok(t.elapsed().as_nanos() as f64 / ops as f64)
}

#[derive(Default, Clone)]
struct Sample {
    ns_op: f64,
    events: u64,
    lost: u64,
    bpf_ns: u64,
    bytes: u64,
}

/// A watcher column: its name and how to start it.
struct Col {
    name: String,
    kind: &'static str,
    pages: usize,
}

fn one(c: &Col, a: &Args, watch: &Path, files: &[CString], ops: u64, seed: u64) -> Result<Sample> {
    if c.kind == "none" {
        return Ok(Sample { ns_op: open_close(files, ops, seed)?, ..Sample::default() });
    }
    let mut args =
        vec![c.kind.to_string(), watch.display().to_string(), "--pid".into(), std::process::id().to_string()];
    args.extend(["--opens".into(), "--buffer-size".into(), (c.pages * 4096).to_string()]);
    if a.bpf_stats {
        args.push("--bpf-stats".into());
    }
    let (ns_op, v) = with_watcher(&args, &c.name, || open_close(files, ops, seed))?;
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok(Sample { ns_op, events: u("events"), lost: u("lost"), bpf_ns: u("bpf_ns"), bytes: u("bytes") })
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

pub fn run(a: Args) -> Result<()> {
    let scen = parse_scenarios(&a)?;
    let cols = columns(&a)?;
    let ops = if a.quick { a.ops.min(50_000) } else { a.ops };
    let mut md = format!(
        "bench-fs scenarios (FSProbe's): each operation an open and a close of a random file of the pool; \
         {} rounds of {ops} operations per watcher, interleaved; medians{}. `added`: wall ns per operation over \
         that round's no-watcher run. `BPF ns/ev`: all fswatch programs' run time (BPF_ENABLE_STATS) per \
         event delivered (per operation for `unwatched`). `ops/s`: the producer's own rate, unthrottled \
         (the highest drop-free rate is not searched: drops at this rate are in the lost column). Ring sizes in 4 KiB pages per CPU.\n\n",
        a.rounds,
        if a.quick { ", --quick: branches and files divided by 20" } else { "" }
    );
    let mut bars = Vec::new();
    let mut rng = Rng(0x5eed);
    for (si, &(depth, breadth, nfiles)) in scen.iter().enumerate() {
        let scratch = Scratch::new()?;
        let tree = scratch.dir.join("tree");
        let elsewhere = scratch.dir.join("elsewhere");
        std::fs::create_dir_all(&elsewhere)?;
        eprintln!("bench-fs scenarios: {depth}/{breadth}/{nfiles}: building the tree");
        let files = make_tree(&tree, depth, breadth, nfiles, &mut rng)?;
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); cols.len()];
        for round in 0..a.rounds {
            for k in 0..cols.len() {
                let i = (k + round) % cols.len();
                let watch = if cols[i].kind.starts_with("fswatch-unwatched") { &elsewhere } else { &tree };
                let seed = (si * 1000 + round) as u64 + 1;
                let s = one(&cols[i], &a, watch, &files, ops, seed).with_context(|| {
                    format!("scenario {depth}/{breadth}/{nfiles}, round {round}, {}", cols[i].name)
                })?;
                eprintln!(
                    "bench-fs scenarios: {depth}/{breadth}/{nfiles} round {round} {:<28} {:8.1} ns/op",
                    cols[i].name, s.ns_op
                );
                samples[i].push(s);
            }
        }
        drop(scratch);
        let base = cols.iter().position(|c| c.kind == "none").map(|i| samples[i].clone());
        let mut rows = Vec::new();
        for (c, v) in cols.iter().zip(&samples) {
            let ns = median(&mut v.iter().map(|s| s.ns_op).collect::<Vec<_>>());
            let added = match &base {
                Some(b) if c.kind != "none" => {
                    median(&mut v.iter().zip(b).map(|(s, b)| s.ns_op - b.ns_op).collect::<Vec<_>>())
                }
                _ => f64::NAN,
            };
            let got: u64 = v.iter().map(|s| s.events).sum();
            let lost: u64 = v.iter().map(|s| s.lost).sum();
            let expected = if c.kind == "none" || c.kind.starts_with("fswatch-unwatched") {
                0
            } else {
                ops * v.len() as u64
            };
            let fs = c.kind.starts_with("fswatch");
            let per = |f: &dyn Fn(&Sample) -> u64, by_ops: bool| {
                let n: u64 = if by_ops { ops * v.len() as u64 } else { got };
                if !fs || n == 0 {
                    f64::NAN
                } else {
                    v.iter().map(f).sum::<u64>() as f64 / n as f64
                }
            };
            let unwatched = c.kind.starts_with("fswatch-unwatched");
            rows.push(vec![
                c.name.clone(),
                num(ns, 1),
                num(added, 1),
                if a.bpf_stats { num(per(&|s| s.bpf_ns, unwatched), 1) } else { "-".into() },
                num(per(&|s| s.bytes, false), 1),
                if c.kind == "none" { String::new() } else { format!("{got} / {expected}") },
                if c.kind == "none" { String::new() } else { lost.to_string() },
                // inotify and fanotify merge identical events still queued: missing, not counted.
                if c.kind == "none" { String::new() } else { expected.saturating_sub(got).to_string() },
                num(1e9 / ns, 0),
            ]);
            if c.kind != "none" && si == 0 {
                bars.push((c.name.clone(), added));
            }
        }
        let t = Table {
            header: [
                "watcher",
                "ns/op",
                "added",
                "BPF ns/ev",
                "bytes/ev",
                "events / expected",
                "lost (counted)",
                "missing (lost or merged)",
                "ops/s",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        };
        md += &format!("### depth {depth}, breadth {breadth}, files {nfiles}\n\n{}\n", t.markdown());
    }
    md += &capability_matrix();
    write_report(
        &a.out,
        "fs-scenarios",
        &md,
        "Open+close, first scenario: wall ns added per operation",
        &bars,
    )
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
