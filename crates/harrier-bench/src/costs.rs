//! `harrier-bench kernel-costs`: what each step of the capture path costs in
//! the kernel, and per-syscall tracepoints against one sys_exit dispatcher.
//! All runs are interleaved in rounds and reported as medians.

use crate::workload::{median, paused_loop, Paused};
use anyhow::{anyhow, Context, Result};
use harrier_capture::tracefs;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, RingBufferBuilder};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/cost_probes.skel.rs"));
}

const GETPID: i64 = libc::SYS_getpid;

/// One measured configuration.
#[derive(Clone, Copy)]
pub struct Variant {
    pub label: &'static str,
    /// Program in cost_probes.bpf.c, or None for "nothing attached".
    prog: Option<&'static str>,
    /// Tracepoint it goes on (None: tp_btf, attached by section).
    tracepoint: Option<&'static str>,
    /// The process filter matches the workload.
    matches: bool,
}

const fn probe(label: &'static str, prog: &'static str, tracepoint: &'static str, matches: bool) -> Variant {
    Variant { label, prog: Some(prog), tracepoint: Some(tracepoint), matches }
}

const GETPID_TP: &str = "sys_exit_getpid";

#[rustfmt::skip]
pub const VARIANTS: &[Variant] = &[
    Variant { label: "no sensor", prog: None, tracepoint: None, matches: false },
    probe("unselected: per-syscall tp (getppid attached)", "empty", "sys_exit_getppid", false),
    Variant { label: "unselected: sys_exit dispatcher (tp_btf)", prog: Some("dispatcher"), tracepoint: None, matches: false },
    Variant { label: "tp_btf sys_exit: pid filter", prog: Some("btf_filter"), tracepoint: None, matches: true },
    Variant { label: FLOOR, prog: Some("btf_clock"), tracepoint: None, matches: true },
    probe("selected, other process (pid filter)", "output", GETPID_TP, false),
    probe("empty program", "empty", GETPID_TP, true),
    probe("+ pid filter", "filter_only", GETPID_TP, true),
    probe("  pid filter via task_struct", "task_filter", GETPID_TP, true),
    probe("+ header in scratch, no clock", "header_no_clock", GETPID_TP, true),
    probe("  with bpf_jiffies64", "header_jiffies", GETPID_TP, true),
    probe("  with bpf_ktime_get_ns", "header_mono", GETPID_TP, true),
    probe("  with bpf_ktime_get_boot_ns", "header", GETPID_TP, true),
    probe("+ bpf_ringbuf_output 24 B", "output", GETPID_TP, true),
    probe("reserve/submit 24 B instead", "reserve", GETPID_TP, true),
    probe("pid filter + saved registers", "regs", GETPID_TP, true),
    probe("  + 1 byte of user memory", "user_byte", GETPID_TP, true),
    probe("array ring, plain stores, no clock", "aring_no_clock", GETPID_TP, true),
    probe("array ring, plain stores + ktime_get_ns", "aring", GETPID_TP, true),
    Variant { label: "harrier capture --syscalls getpid", prog: Some(CAPTURE), tracepoint: None, matches: true },
];

/// Marks the variant that runs the real sensor rather than a probe.
const CAPTURE: &str = "capture";

/// The least any timestamped exit event can cost: the syscall tracepoint slow
/// path, the tp_btf call, a pid filter and one clock read.
pub const FLOOR: &str = "tp_btf sys_exit: pid filter + 1 clock read";

/// The real sensor on the workload: BPF ns per getpid event.
fn run_capture(count: u64, stats: bool) -> Result<Sample> {
    let mut work = paused_loop(GETPID, count)?;
    let mut cfg = harrier_capture::Config::new(harrier_capture::parse_syscalls("getpid")?);
    cfg.pid = Some(work.pid());
    cfg.run_time_stats = stats;
    let mut s = harrier_capture::Session::start_counting(&cfg)?;
    work.release()?;
    wait_draining(&mut work, &mut || {
        let _ = s.drain();
    })?;
    let (out, _) = work.finish()?;
    let st = s.stop()?;
    let p = st.programs.iter().find(|p| p.name == "hr_exit_getpid").ok_or_else(|| anyhow!("no stats"))?;
    Ok(Sample { wall_ns: out.parse()?, bpf_ns: if stats { p.avg_ns() } else { f64::NAN } })
}

pub struct Sample {
    pub wall_ns: f64,
    pub bpf_ns: f64,
}

fn prog_stats(fd: i32) -> (u64, u64) {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (info.run_cnt, info.run_time_ns)
}

fn wait_draining(work: &mut Paused, drain: &mut dyn FnMut()) -> Result<()> {
    while !work.try_done()? {
        std::thread::sleep(Duration::from_millis(5));
        drain();
    }
    Ok(())
}

/// One run of one variant: `count` getpid calls in a fresh process. With
/// `stats` the kernel's run-time accounting is on (BPF ns, dearer wall).
pub fn run(v: &Variant, count: u64, stats: bool) -> Result<Sample> {
    let mut work = paused_loop(GETPID, count)?;
    if v.prog == Some(CAPTURE) {
        drop(work);
        return run_capture(count, stats);
    }
    let Some(prog_name) = v.prog else {
        work.release()?;
        let (out, _) = work.finish()?;
        return Ok(Sample { wall_ns: out.parse()?, bpf_ns: f64::NAN });
    };
    let storage = Box::leak(Box::new(MaybeUninit::uninit()));
    let mut open = skel::CostProbesSkelBuilder::default().open(storage)?;
    let ro = open.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("no rodata"))?;
    ro.filter_tgid = if v.matches { work.pid() } else { 1 };
    for mut p in open.open_object_mut().progs_mut() {
        p.set_autoload(p.name() == prog_name);
    }
    let skel = open.load().context("loading cost probes")?;
    let prog = skel.object().progs_mut().find(|p| p.name() == prog_name).unwrap();
    let _link: Link = match v.tracepoint {
        Some(tp) => {
            let id = tracefs::tracepoint_ids("syscalls", &[tp.to_string()])?[0]
                .ok_or_else(|| anyhow!("no tracepoint {tp}"))?;
            prog.attach_perf_event(tracefs::open_tracepoint_event(id)?)?
        }
        None => prog.attach()?,
    };
    let _stats = stats.then(harrier_capture::enable_run_time_stats).transpose()?;
    let mut rb = RingBufferBuilder::new();
    rb.add(&skel.maps.ring, |_| 0)?;
    let rb = rb.build()?;
    work.release()?;
    wait_draining(&mut work, &mut || {
        let _ = rb.consume();
    })?;
    let (out, _) = work.finish()?;
    let (cnt, ns) = prog_stats(prog.as_fd().as_raw_fd());
    let bpf_ns = if stats && cnt > 0 { ns as f64 / cnt as f64 } else { f64::NAN };
    Ok(Sample { wall_ns: out.parse()?, bpf_ns })
}

/// Rounds × variants, interleaved; returns (label, median wall, median bpf).
/// Wall times come from runs with run-time stats off (as users run), BPF
/// times from a second run of each program with them on.
pub fn measure(rounds: usize, count: u64) -> Result<Vec<(&'static str, f64, f64)>> {
    let mut wall = vec![Vec::new(); VARIANTS.len()];
    let mut bpf = vec![Vec::new(); VARIANTS.len()];
    for r in 0..rounds {
        eprintln!("kernel-costs: round {}/{rounds}", r + 1);
        for (i, v) in VARIANTS.iter().enumerate() {
            wall[i].push(run(v, count, false)?.wall_ns);
            if v.prog.is_some() {
                bpf[i].push(run(v, count, true)?.bpf_ns);
            }
        }
    }
    Ok(VARIANTS
        .iter()
        .enumerate()
        .map(|(i, v)| (v.label, median(&mut wall[i]), median(&mut bpf[i])))
        .collect())
}

/// ns per clock_gettime(CLOCK_MONOTONIC) in user space: the vDSO reads the
/// same clocksource (tsc here) as bpf_ktime_get_ns, so this is what one
/// timestamp costs on this machine before any BPF.
pub fn user_clock_ns(calls: u32) -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let start = std::time::Instant::now();
    for _ in 0..calls {
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        std::hint::black_box(&ts);
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// Empty programs on the exit tracepoints of some syscalls (per-syscall), or
/// one on tp_btf `sys_exit` (dispatcher): what any exit-time sensor of those
/// syscalls pays before its program does anything. Detached on drop.
pub struct EmptyPrograms {
    _links: Vec<Link>,
    _skel: skel::CostProbesSkel<'static>,
}

pub fn attach_empty(syscalls: &str, dispatcher: bool) -> Result<EmptyPrograms> {
    if dispatcher {
        return attach_probe("btf_empty", &[]);
    }
    let names: Vec<String> = syscalls.split(',').map(|s| format!("sys_exit_{s}")).collect();
    attach_probe("empty", &names)
}

/// One program of cost_probes.bpf.c on these syscalls tracepoints, or, with
/// none, attached by its section (tp_btf, fentry, fexit). Detached on drop.
pub fn attach_probe(name: &str, tracepoints: &[String]) -> Result<EmptyPrograms> {
    let storage = Box::leak(Box::new(MaybeUninit::uninit()));
    let mut open = skel::CostProbesSkelBuilder::default().open(storage)?;
    for mut p in open.open_object_mut().progs_mut() {
        p.set_autoload(p.name() == name);
    }
    let skel = open.load().with_context(|| format!("loading the cost probe {name}"))?;
    let prog = skel.object().progs_mut().find(|p| p.name() == name).unwrap();
    let links = if tracepoints.is_empty() {
        vec![prog.attach().with_context(|| format!("attaching {name}"))?]
    } else {
        let ids = tracefs::tracepoint_ids("syscalls", tracepoints)?;
        tracepoints
            .iter()
            .zip(ids)
            .map(|(n, id)| {
                let id = id.ok_or_else(|| anyhow!("no tracepoint {n}"))?;
                Ok(prog.attach_perf_event(tracefs::open_tracepoint_event(id)?)?)
            })
            .collect::<Result<_>>()?
    };
    Ok(EmptyPrograms { _links: links, _skel: skel })
}
