//! `harrier-bench hook-costs` (make bench-hooks): a syscall tracepoint against
//! a hook on the syscall's own function (fentry/fexit, BPF trampolines), per
//! call of the hooked syscall (openat) and of one nobody selected (getpid).
//! Attaching any syscall tracepoint sends every task's every syscall down the
//! kernel's slow syscall path; a trampoline costs only the function it is on.
//!
//! Made for the Debian guests (the kernels with trampolines) booted with qemu's
//! `-icount shift=0`: the guest's clock then advances one ns per instruction
//! executed, so "ns" per call there are instructions per call, which
//! emulation does not distort. Programs run per call come from the kernel's
//! run counts of the programs each hook loaded.

use crate::costs;
use crate::report::{num, Table};
use crate::workload::{median, paused_loop, Paused};
use anyhow::{Context, Result};
use harrier_capture::{AttachMode, Config, Session};
use std::time::Duration;

#[derive(Clone, Copy)]
enum Kind {
    Nothing,
    /// An empty cost probe: on a syscalls:sys_exit_X tracepoint, or attached
    /// by its section (tp_btf, fentry, fexit).
    Empty {
        prog: &'static str,
        tracepoint: Option<&'static str>,
    },
    /// Harrier's own openat handler, as `harrier capture --syscalls openat`.
    Capture(AttachMode),
    /// The same handler with openat's path read at exit (no entry copy): on
    /// its tracepoint, or (true) on an fexit of `__x64_sys_openat`.
    CaptureAtExit {
        fexit: bool,
    },
}

struct Hook {
    label: &'static str,
    kind: Kind,
}

const fn empty(label: &'static str, prog: &'static str, tracepoint: Option<&'static str>) -> Hook {
    Hook { label, kind: Kind::Empty { prog, tracepoint } }
}

#[rustfmt::skip]
const HOOKS: &[Hook] = &[
    Hook { label: "no sensor", kind: Kind::Nothing },
    empty("empty program, tracepoint syscalls:sys_exit_openat", "empty", Some("sys_exit_openat")),
    empty("empty program, tp_btf sys_exit (the dispatcher's hook)", "btf_empty", None),
    empty("empty fentry on __x64_sys_openat", "fentry_empty", None),
    empty("empty fexit on __x64_sys_openat", "fexit_empty", None),
    Hook { label: "harrier capture --syscalls openat, per-syscall tracepoint", kind: Kind::Capture(AttachMode::PerSyscall) },
    Hook { label: "harrier capture --syscalls openat, dispatcher", kind: Kind::Capture(AttachMode::Dispatcher) },
    Hook { label: "capture's openat handler, path read at exit, on the tracepoint", kind: Kind::CaptureAtExit { fexit: false } },
    Hook { label: "capture's openat handler, path read at exit, on an fexit", kind: Kind::CaptureAtExit { fexit: true } },
];

/// The two workloads: (label, syscall number run by `harrier-bench loop`).
const WORKLOADS: [(&str, i64); 2] = [("getpid", libc::SYS_getpid), ("openat+close", libc::SYS_openat)];

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Calls per workload run (openat: open+close pairs); sized for an
    /// emulated guest, where instructions are counted exactly.
    #[arg(long, default_value_t = 20_000)]
    count: u64,
}

/// One workload run under one hook: wall ns per call (stats off), then, in a
/// second run with run-time stats on, programs run and BPF ns per call.
#[derive(Default, Clone, Copy)]
struct Cell {
    wall: f64,
    progs: f64,
    bpf: f64,
}

/// What a hook holds attached while the workloads run; dropped: detached.
enum Attached {
    Nothing,
    /// Held for its links only.
    Empty {
        _probe: costs::EmptyPrograms,
    },
    Capture(Box<Session>),
}

impl Attached {
    fn new(kind: Kind) -> Result<Attached> {
        Ok(match kind {
            Kind::Nothing => Attached::Nothing,
            Kind::Empty { prog, tracepoint } => Attached::Empty {
                _probe: costs::attach_probe(
                    prog,
                    &tracepoint.map(String::from).into_iter().collect::<Vec<_>>(),
                )?,
            },
            Kind::Capture(mode) => {
                let mut cfg = Config::new(harrier_capture::parse_syscalls("openat")?);
                cfg.attach = mode;
                Attached::Capture(Box::new(Session::start_counting(&cfg)?))
            }
            Kind::CaptureAtExit { fexit } => {
                let mut cfg = Config::new(harrier_capture::parse_syscalls("openat")?);
                cfg.attach = AttachMode::PerSyscall;
                cfg.collect.read_at_exit("openat")?;
                cfg.fexit_openat = fexit;
                Attached::Capture(Box::new(Session::start_counting(&cfg)?))
            }
        })
    }

    fn drain(&mut self) {
        if let Attached::Capture(s) = self {
            let _ = s.drain();
        }
    }
}

/// Runs a paused workload to its end, draining the session meanwhile.
fn finish(mut work: Paused, hook: &mut Attached) -> Result<f64> {
    work.release()?;
    while !work.try_done()? {
        std::thread::sleep(Duration::from_millis(5));
        hook.drain();
    }
    Ok(work.finish()?.0.parse()?)
}

/// Run counts and run time of every BPF program loaded since `first_id`
/// (the hook's own: the ids are handed out in order).
fn run_totals(first_id: u32) -> (u64, u64) {
    let (mut id, mut cnt, mut ns) = (first_id.saturating_sub(1), 0, 0);
    while unsafe { libbpf_sys::bpf_prog_get_next_id(id, &mut id) } == 0 {
        let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
        if fd < 0 {
            continue;
        }
        let mut info = libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of_val(&info) as u32;
        if unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) } == 0 {
            cnt += info.run_cnt;
            ns += info.run_time_ns;
        }
        unsafe { libc::close(fd) };
    }
    (cnt, ns)
}

/// The next program id the kernel will hand out (at least).
fn next_prog_id() -> u32 {
    let (mut id, mut last) = (0u32, 0u32);
    while unsafe { libbpf_sys::bpf_prog_get_next_id(id, &mut id) } == 0 {
        last = id;
    }
    last + 1
}

/// One hook, attached once: each workload with stats off, then with stats on.
fn measure_hook(hook: &Hook, count: u64) -> Result<[Cell; 2]> {
    let first = next_prog_id();
    let mut attached = Attached::new(hook.kind)?;
    let mut cells = [Cell::default(); 2];
    for (cell, &(_, nr)) in cells.iter_mut().zip(&WORKLOADS) {
        cell.wall = finish(paused_loop(nr, count)?, &mut attached)?;
    }
    let _stats = harrier_capture::enable_run_time_stats()?;
    for (cell, &(_, nr)) in cells.iter_mut().zip(&WORKLOADS) {
        let work = paused_loop(nr, count)?;
        let before = run_totals(first);
        finish(work, &mut attached)?;
        let after = run_totals(first);
        cell.progs = (after.0 - before.0) as f64 / count as f64;
        cell.bpf = (after.1 - before.1) as f64 / count as f64;
    }
    Ok(cells)
}

pub fn run(args: Args) -> Result<()> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!("hook-costs on {} ({} rounds of {} calls per workload)", kernel.trim(), args.rounds, args.count);
    // Per hook and workload, the rounds' cells; None: the kernel refused the hook.
    let mut cells: Vec<Option<Vec<[Cell; 2]>>> = HOOKS.iter().map(|_| Some(Vec::new())).collect();
    let mut refused = Vec::new();
    for r in 0..args.rounds {
        eprintln!("hook-costs: round {}/{}", r + 1, args.rounds);
        for (i, hook) in HOOKS.iter().enumerate() {
            let Some(v) = cells[i].as_mut() else { continue };
            match measure_hook(hook, args.count).with_context(|| hook.label.to_string()) {
                Ok(c) => v.push(c),
                Err(e) => {
                    refused.push(format!("{e:#}"));
                    cells[i] = None;
                }
            }
        }
    }
    let med = |v: &[[Cell; 2]], w: usize, f: fn(&Cell) -> f64| {
        median(&mut v.iter().map(|c| f(&c[w])).collect::<Vec<_>>())
    };
    let base: Vec<f64> =
        (0..2).map(|w| cells[0].as_deref().map_or(f64::NAN, |v| med(v, w, |c| c.wall))).collect();
    let mut header = vec!["hook".to_string()];
    for (w, _) in WORKLOADS {
        header.extend([
            format!("{w} ns/call"),
            "added".into(),
            "programs run/call".into(),
            "BPF ns/call".into(),
        ]);
    }
    let mut rows = Vec::new();
    for (hook, c) in HOOKS.iter().zip(&cells) {
        let Some(v) = c else { continue };
        let mut row = vec![hook.label.to_string()];
        for (w, b) in base.iter().enumerate() {
            let wall = med(v, w, |c| c.wall);
            row.extend([
                num(wall, 0),
                format!("{:+.0}", wall - b),
                num(med(v, w, |c| c.progs), 2),
                num(med(v, w, |c| c.bpf), 0),
            ]);
        }
        rows.push(row);
    }
    println!("{}", Table { header, rows }.markdown());
    // Under -icount the rounds should agree to a few instructions: the
    // widest spread says how far to trust a difference.
    let mut widest = (0.0, "", "");
    for (hook, c) in HOOKS.iter().zip(&cells) {
        for (w, &(name, _)) in WORKLOADS.iter().enumerate() {
            let walls: Vec<f64> = c.iter().flatten().map(|r| r[w].wall).collect();
            let (lo, hi) = walls.iter().fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            if !walls.is_empty() && hi - lo > widest.0 {
                widest = (hi - lo, hook.label, name);
            }
        }
    }
    println!("widest spread of ns/call between rounds: {:.0} ({}, {})", widest.0, widest.1, widest.2);
    println!("medians of {} rounds; ns/call with run-time stats off, programs and BPF ns with them on (a second run)", args.rounds);
    for r in &refused {
        println!("not on this kernel: {r}");
    }
    Ok(())
}
