//! A running sensor: the loaded BPF object, its rings and its attachments.
//! Dropping a Session detaches everything, so a second one can start at once.

use crate::aring::ArrayRings;
use crate::attach::{self, AttachChoice, AttachMode, Attachment};
use crate::cpu_layout;
use crate::dircache::{self, DirCache};
use crate::empty::EmptyPrograms;
use crate::merge::Backlog;
use crate::priority;
use crate::ring::Ring;
use crate::stats::{ProgStats, Stats, UserCounters};
use crate::tracefs;
use crate::uread::UserReads;
use crate::Config;
use anyhow::{anyhow, bail, Context, Result};
use harrier_schema::wire::{CpuStats, Header, ARING_DATA, ARING_SLACK};
use harrier_schema::SyscallInfo;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, MapType};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

mod probes;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/capture.skel.rs"));
}
pub(crate) use skel::{CaptureSkel, CaptureSkelBuilder};

/// Receives every event's bytes, in ring order per CPU.
pub type EventSink = Box<dyn FnMut(&[u8])>;

/// How long to sleep between drains: 5 ms under load; up to 50 ms when quiet,
/// as long as a ring would still be at most 1/8 full at the rate just seen.
/// Each wake-up has a fixed cost, which dominates at low event rates.
pub struct Pace {
    pub interval: Duration,
    ring_bytes: usize,
}

impl Pace {
    pub const MIN: Duration = Duration::from_millis(5);
    pub const MAX: Duration = Duration::from_millis(50);

    pub fn new(ring_bytes: usize) -> Pace {
        Pace { interval: Self::MIN, ring_bytes }
    }

    /// `bytes` were drained from `rings` rings after sleeping `interval`.
    pub fn update(&mut self, bytes: u64, rings: usize) {
        let per_ring_per_s = bytes as f64 / rings.max(1) as f64 / self.interval.as_secs_f64();
        let budget = self.ring_bytes as f64 / 8.0;
        let next = if per_ring_per_s > 0.0 { budget / per_ring_per_s } else { f64::INFINITY };
        self.interval = Duration::from_secs_f64(next.clamp(Self::MIN.as_secs_f64(), Self::MAX.as_secs_f64()));
    }
}

/// The rings events arrive in.
enum Rings {
    /// One lock-free ring per CPU, all in one mapped array map (the default).
    PerCpu(ArrayRings),
    /// BPF ringbufs, one per group of CPUs (--cpus-per-buffer > 1).
    Shared { readers: Vec<Ring>, _maps: Vec<MapHandle> },
}

impl Rings {
    fn count(&self) -> usize {
        match self {
            Rings::PerCpu(rings) => rings.count(),
            Rings::Shared { readers, .. } => readers.len(),
        }
    }

    fn consume(&mut self, i: usize, f: &mut impl FnMut(&[u8])) -> Result<()> {
        match self {
            Rings::PerCpu(rings) => {
                rings.consume(i, f)?;
            }
            Rings::Shared { readers, .. } => {
                readers[i].consume(f);
            }
        }
        Ok(())
    }
}

/// Where drained events go: counted, then handed to the sink if there is one.
struct Consumer {
    counters: UserCounters,
    sink: Option<EventSink>,
    backlog: Backlog,
    /// By syscall number, its tier (non-zero: kept by a full backlog, as
    /// by the ring reserve).
    priority: Vec<u8>,
}

/// The rings are copied again after this many records handed to the sink,
/// or this long, whichever comes first: a busy sink still empties them
/// every few ms, however slow its events.
const SLICE: usize = 512;
const SLICE_TIME: Duration = Duration::from_millis(2);
/// Records between two looks at the clock.
const CLOCK_EVERY: usize = 32;

/// How long one tick of the run loop hands out a backlog before its caller
/// runs again (outputs, stats, signals).
const TICK_BUDGET: Duration = Duration::from_millis(20);

pub struct Session {
    // Field order is drop order: detach first, then free the object.
    links: Vec<Link>,
    /// With `empty_programs`: what is linked instead of the session's programs.
    empty: Option<EmptyPrograms>,
    rings: Rings,
    skel: CaptureSkel<'static>,
    /// Whether the handlers were loaded with the kernel filter compiled in.
    kernel_filter_on: bool,
    guard_on: bool,
    consumer: Consumer,
    stats_fd: Option<OwnedFd>,
    attached: Vec<&'static SyscallInfo>,
    choice: AttachChoice,
    collect: crate::Collect,
    buffer_size: usize,
    started: Instant,
    ncpus: usize,
    /// openat's exit on its fexit program (Config::fexit_openat).
    fexit_openat: bool,
    /// Whether the walks use the path cache, and why not.
    dir_cache: DirCache,
    /// How entry copies read user memory, and the programs the current task.
    user_reads: UserReads,
    current: crate::current::CurrentReads,
    /// With enforcement's hold: resumes held tasks if this process dies.
    guardian: Option<crate::guardian::Guardian>,
}

/// openat's exit handler on an fexit (Config::fexit_openat).
const FEXIT_OPENAT: &str = "hr_fexit_openat";
/// The guard's programs (tail calls of the handlers), loaded with enforcement.
const GUARD_TP: &str = "hr_guard_tp";
const GUARD_BTF: &str = "hr_guard_btf";

/// On Debian's 6.1 the handler on an fexit broke the processes it traced
/// (ld.so segfaulted after their openat; the empty fexit did not): the cause
/// is not known, so no kernel before 6.12, where it measured clean, gets it.
fn fexit_openat_allowed() -> Result<()> {
    let release = crate::kernel::release();
    let mut v = release.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>().unwrap_or(0));
    if (v.next().unwrap_or(0), v.next().unwrap_or(0)) < (6, 12) {
        bail!("openat's handler on an fexit is not run before Linux 6.12 (this is {release}): on 6.1 it crashed the traced processes");
    }
    Ok(())
}

fn possible_cpus() -> Result<usize> {
    libbpf_rs::num_possible_cpus().context("counting CPUs")
}

impl Session {
    /// Starts a sensor that hands every event to `sink`.
    pub fn start(cfg: &Config, sink: EventSink) -> Result<Session> {
        Self::start_with(cfg, Some(sink))
    }

    /// Starts a sensor that only counts events (summaries, benchmarks).
    pub fn start_counting(cfg: &Config) -> Result<Session> {
        Self::start_with(cfg, None)
    }

    fn start_with(cfg: &Config, sink: Option<EventSink>) -> Result<Session> {
        cfg.validate()?;
        crate::kernel::check(crate::kernel::CAPTURE)?;
        let cfg = &with_exit_owners(cfg);
        let ncpus = possible_cpus()?;
        let nrings = ncpus.div_ceil(cfg.cpus_per_buffer);

        // Tracepoint ids first: an unknown one is a user error, not a load error.
        let plan = attach::plan(cfg)?;
        let attached: Vec<&'static SyscallInfo> = plan.iter().map(|a| a.syscall).collect();
        let choice = attach::choose(cfg.attach, &plan)?;
        let dispatcher = choice.mode == AttachMode::Dispatcher;

        // The object outlives this function inside the Session; its backing
        // storage is tiny and leaked once per session.
        let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = CaptureSkelBuilder::default().open(storage).map_err(privileges)?;
        let rodata = open.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("no .rodata"))?;
        rodata.filter_tgid = cfg.pid.unwrap_or(0);
        rodata.snaplen = cfg.snaplen;
        let shared = cfg.cpus_per_buffer > 1;
        rodata.shared_rings = shared;
        rodata.aring_mask = cfg.buffer_size as u64 - 1;
        rodata.aring_last = (cfg.buffer_size - ARING_SLACK) as u64;
        // A record never starts in a ring's last ARING_SLACK bytes: the next
        // one may skip that much, so the line ordinary events stop at sits
        // that much further back.
        (rodata.aring_reserve, rodata.aring_exec_reserve) = match cfg.ring_reserve {
            r if shared || r == 0 => (0, 0),
            r => ((r + ARING_SLACK) as u64, (r / 2 + ARING_SLACK) as u64),
        };
        let kernel_filter = cfg.kernel_filter.as_ref().filter(|f| !f.is_empty());
        rodata.kf_enabled = kernel_filter.is_some();
        rodata.untold_mask = if kernel_filter.is_some() { crate::UntoldFds::SLOTS - 1 } else { 0 };
        if let Some(g) = &cfg.guard {
            rodata.guard_enabled = true;
            rodata.guard_self_tgid = std::process::id();
            rodata.guard_rate = g.rate;
            rodata.guard_hold = g.hold;
        }
        cfg.collect.write(&mut rodata.skip_params, &mut rodata.skip_params_ok, &mut rodata.no_entry);
        let dir_cache = DirCache::choose(cfg.dir_cache, cfg.empty_programs || cfg.entry_copies_only);
        rodata.dircache = dir_cache.is_on();
        rodata.entry_copies_only = cfg.entry_copies_only;
        rodata.step_clock = cfg.step_clock.is_some();
        rodata.step_nr = cfg.step_clock.unwrap_or(0);
        let slots = cfg.stash_slots.unwrap_or(crate::STASH_SLOTS);
        if !slots.is_power_of_two() || slots > crate::STASH_SLOTS {
            bail!("stash slots: {slots} is not a power of two up to {}", crate::STASH_SLOTS);
        }
        rodata.stash_mask = slots - 1;
        let user_reads = probes::choose_user_reads(rodata, cfg);

        // Only the programs the chosen mode uses are loaded (verified).
        let mut wanted: Vec<String> =
            LIFE_CYCLE.iter().chain([&probes::CPU_NUMBER]).map(|s| s.to_string()).collect();
        if dispatcher {
            wanted.push(DISPATCHER.into());
        }
        let fexit_openat = cfg.fexit_openat && !dispatcher;
        if fexit_openat {
            fexit_openat_allowed()?;
        }
        for a in &plan {
            match (dispatcher, a.tail_prog()) {
                (true, Some(tail)) => wanted.push(tail),
                _ if fexit_openat && a.syscall.name == "openat" => wanted.push(FEXIT_OPENAT.into()),
                _ => wanted.push(a.exit_prog()),
            }
            wanted.extend(a.enter_prog());
        }
        if cfg.guard.is_some() {
            if fexit_openat {
                bail!("enforcement does not run on openat's fexit handler: drop one of the two");
            }
            // Tracepoint handlers in both modes (a syscall that never
            // returns keeps its entry tracepoint), the dispatcher's on its own.
            wanted.push(GUARD_TP.into());
            if dispatcher {
                wanted.push(GUARD_BTF.into());
            }
        }
        wanted.extend(dir_cache.programs().into_iter().map(String::from));
        for mut p in open.open_object_mut().progs_mut() {
            let name = p.name().to_string_lossy().into_owned();
            p.set_autoload(wanted.contains(&name));
        }
        open.maps.dirpaths.set_max_entries(dir_cache.entries(ncpus))?;
        let untold_slots = if kernel_filter.is_some() { crate::UntoldFds::SLOTS } else { 1 };
        open.maps.untold.set_max_entries(untold_slots)?;

        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        // Only the mode in use is sized; the other keeps its one small entry
        // (libbpf creates the ringbuf template itself when none is given).
        let mut bpf_rings = Vec::new();
        if shared {
            for i in 0..nrings {
                let name = format!("hr_ring{i}");
                let m = MapHandle::create(MapType::RingBuf, Some(&name), 0, 0, cfg.buffer_size as u32, &opts)
                    .map_err(privileges)
                    .with_context(|| format!("creating a {}-byte ring", cfg.buffer_size))?;
                bpf_rings.push(m);
            }
            open.maps.rings.set_inner_map_fd(bpf_rings[0].as_fd())?;
            open.maps.rings.set_max_entries(nrings as u32)?;
        } else {
            open.maps.arings.set_value_size((ARING_DATA + cfg.buffer_size) as u32)?;
            open.maps.arings.set_max_entries(ncpus as u32)?;
        }
        let skel = open.load().map_err(privileges).context("loading the BPF programs")?;

        for (i, r) in bpf_rings.iter().enumerate() {
            let fd = r.as_fd().as_raw_fd();
            skel.maps.rings.update(&(i as u32).to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)?;
        }
        set_cpu_rings(&skel, ncpus, cfg.cpus_per_buffer)?;
        let mut skel = skel;
        let current = probes::choose_current(&mut skel, cfg.current_reads && !cfg.empty_programs);
        let priority = priority::table(&cfg.priority_syscalls);
        priority::write(&mut skel, &priority);
        if dispatcher {
            fill_tail_slots(&skel, &plan)?;
        }
        if let Some(f) = kernel_filter {
            crate::kfilter::install(&mut skel, f).context("writing the kernel filter")?;
        }
        if let Some(g) = &cfg.guard {
            fill_guard_tails(&skel, dispatcher)?;
            crate::guard::install(&skel, g).context("writing the enforcement programs")?;
        }

        // Stats for this process's lifetime only (not the global sysctl).
        let stats_fd = if cfg.run_time_stats { Some(enable_run_time_stats()?) } else { None };

        let rings = if shared {
            let readers =
                bpf_rings.iter().map(|r| Ring::map(r.as_fd(), cfg.buffer_size)).collect::<Result<_>>()?;
            Rings::Shared { readers, _maps: bpf_rings }
        } else {
            Rings::PerCpu(ArrayRings::map(skel.maps.arings.as_fd(), ncpus, cfg.buffer_size)?)
        };
        let mut session = Session {
            links: Vec::new(),
            empty: cfg.empty_programs.then(EmptyPrograms::default),
            rings,
            skel,
            kernel_filter_on: kernel_filter.is_some(),
            guard_on: cfg.guard.is_some(),
            guardian: None,
            consumer: Consumer {
                counters: UserCounters::default(),
                sink,
                backlog: Backlog::new(cfg.backlog_bytes),
                priority,
            },
            stats_fd,
            attached,
            choice,
            collect: cfg.collect.clone(),
            buffer_size: cfg.buffer_size,
            started: Instant::now(),
            ncpus,
            fexit_openat,
            dir_cache,
            user_reads,
            current,
        };
        session.attach_dir_cache()?;
        session.attach(&plan)?;
        Ok(session)
    }

    fn attach(&mut self, plan: &[Attachment]) -> Result<()> {
        let dispatcher = self.choice.mode == AttachMode::Dispatcher;
        let mut tp_btf: Vec<&str> = LIFE_CYCLE.to_vec();
        if dispatcher {
            tp_btf.push(DISPATCHER);
        }
        for name in tp_btf {
            self.link(name, None)?;
        }
        for a in plan {
            // Entry copies first: an exit that finds none is flagged.
            if let (Some(prog), Some(id)) = (a.enter_prog(), a.enter_id) {
                self.link(&prog, Some(id))?;
            }
            if dispatcher && a.tail_prog().is_some() {
                continue;
            }
            if self.fexit_openat && a.syscall.name == "openat" {
                self.link(FEXIT_OPENAT, None)?;
                continue;
            }
            let prog = a.exit_prog();
            for &id in &a.exit_ids {
                self.link(&prog, Some(id))?;
            }
        }
        Ok(())
    }

    /// The path cache's hooks, before any walk can store an entry: the exits
    /// first (a record a ctime hook opens is always closed by its exit).
    fn attach_dir_cache(&mut self) -> Result<()> {
        if !self.dir_cache.is_on() {
            return Ok(());
        }
        let names: Vec<String> = dircache::EXITS.iter().map(|n| format!("sys_exit_{n}")).collect();
        for (name, id) in names.iter().zip(tracefs::tracepoint_ids("syscalls", &names)?) {
            let id = id.ok_or_else(|| anyhow!("this kernel has no syscalls:{name} tracepoint"))?;
            self.link(dircache::EXIT_PROG, Some(id))?;
        }
        for name in self.dir_cache.hooks() {
            self.link(name, None)?;
        }
        Ok(())
    }

    /// Whether walks use the path cache ("path cache: on" or why not).
    pub fn dir_cache(&self) -> &DirCache {
        &self.dir_cache
    }

    /// Links program `name` at the perf tracepoint `tracepoint`, or where its
    /// section says; with `empty_programs`, an empty program of its type.
    fn link(&mut self, name: &str, tracepoint: Option<u64>) -> Result<()> {
        let obj = self.skel.object();
        let prog = obj
            .progs_mut()
            .find(|p| p.name() == name)
            .ok_or_else(|| anyhow!("BPF program {name} is missing"))?;
        let link = match (&mut self.empty, tracepoint) {
            (Some(empty), tp) => empty.link_like(&prog, tp),
            (None, Some(id)) => {
                tracefs::open_tracepoint_event(id).and_then(|fd| Ok(prog.attach_perf_event(fd)?))
            }
            (None, None) => prog.attach().map_err(anyhow::Error::from),
        };
        self.links.push(link.with_context(|| format!("attaching {name}"))?);
        Ok(())
    }

    /// Swaps the kernel filter while events flow (e.g. rules reloaded). The
    /// filter must have been on at start: it is compiled in or out at load.
    pub fn replace_kernel_filter(&mut self, f: &crate::kfilter::KernelFilter) -> Result<()> {
        if !self.kernel_filter_on {
            bail!("the kernel filter was off when the sensor started");
        }
        crate::kfilter::clear(&mut self.skel)?;
        crate::kfilter::install(&mut self.skel, f)
    }

    /// The kernel filter's copy of the addresses of the rules' names (None:
    /// the kernel filter is off).
    pub fn named_peers(&self) -> Result<Option<crate::kfilter::NamedPeers>> {
        if !self.kernel_filter_on {
            return Ok(None);
        }
        Ok(Some(crate::kfilter::NamedPeers::new(&self.skel.maps.kf_peers, &self.skel.maps.kf_peers_n)?))
    }

    /// The processes whose untold closes the kernel may keep back (None: the
    /// kernel filter is off). Tell it of every process whose fd table the
    /// consumer makes, before the kernel filter's untold closes matter.
    pub fn untold_fds(&self) -> Result<Option<crate::UntoldFds>> {
        if !self.kernel_filter_on {
            return Ok(None);
        }
        Ok(Some(crate::UntoldFds::new(&self.skel.maps.untold)?))
    }

    /// Swaps the enforcement programs (rules reloaded). Enforcement must have
    /// been on at start; nothing is enforced for the moment of the swap.
    pub fn replace_guard(&mut self, g: &crate::guard::Guard) -> Result<()> {
        if !self.guard_on {
            bail!("enforcement was off when the sensor started");
        }
        crate::guard::clear(&self.skel)?;
        crate::guard::install(&self.skel, g)
    }

    /// What the kernel last did to thread `tid` by enforcement, if anything.
    pub fn guard_log(&self, tid: u32) -> Option<crate::guard::LogEntry> {
        crate::guard::log_of(&self.skel, tid)
    }

    /// A reader of the kernel's enforcement log that outlives this borrow
    /// (the engine asks it per alert of an enforced rule).
    pub fn guard_log_reader(&self) -> Result<impl Fn(u32) -> Option<crate::guard::LogEntry>> {
        let h = libbpf_rs::MapHandle::try_from(&self.skel.maps.guard_log)?;
        Ok(move |tid: u32| crate::guard::parse_log(&h.lookup(&tid.to_ne_bytes(), MapFlags::ANY).ok()??))
    }

    /// Starts the fail-open guardian (enforcement with hold): call once the
    /// programs are attached, before events flow to a held rule.
    pub fn start_guardian(&mut self) -> Result<()> {
        if self.guardian.is_none() {
            self.guardian = Some(crate::guardian::Guardian::spawn(self.skel.maps.guard_held.as_fd())?);
        }
        Ok(())
    }

    /// The tasks the kernel holds for a verdict.
    pub fn held(&self) -> Vec<crate::guard::Held> {
        crate::guard::held(&self.skel.maps.guard_held)
    }

    /// Resumes a held task (or, `resume` false, forgets one user space killed).
    pub fn release(&self, h: &crate::guard::Held, resume: bool) {
        crate::guard::release(&self.skel.maps.guard_held, h, resume)
    }

    /// Per enforced rule, each outcome's count ([`crate::guard::OUTCOMES`]).
    pub fn guard_stats(&self, rules: usize) -> Vec<[u64; 6]> {
        crate::guard::stats(&self.skel, rules)
    }

    /// Cgroups (ids) known to hold no container: the kernel may decide
    /// `container.*` terms for their tasks.
    pub fn add_host_cgroups(&self, ids: &[u64]) -> Result<()> {
        crate::guard::add_host_cgroups(&self.skel, ids)
    }

    /// Marks the syscalls whose events may use the ring reserve (others lose
    /// it), while events flow: e.g. after the rules were reloaded.
    pub fn set_priority_syscalls(&mut self, nrs: &[u32]) {
        let table = priority::table(nrs);
        priority::write(&mut self.skel, &table);
        self.consumer.priority = table;
    }

    /// What the events collect (fixed at load).
    pub fn collect(&self) -> &crate::Collect {
        &self.collect
    }

    /// How exits are reached, and why (see [`attach::AUTO_RULE`]).
    pub fn attach_choice(&self) -> &AttachChoice {
        &self.choice
    }

    /// Syscalls actually attached (a few have no tracepoint on some kernels).
    pub fn syscalls(&self) -> &[&'static SyscallInfo] {
        &self.attached
    }

    /// Hands every event waiting in the rings to the sink, in time order
    /// across rings (see [`crate::merge`]). The hot path: count, then hand
    /// over; decoding is the sink's choice. Without a sink, events are only
    /// counted.
    pub fn drain(&mut self) -> Result<()> {
        self.drain_within(None)
    }

    /// As [`Session::drain`], in slices with a copy of the rings before
    /// each; with a budget, returns once it is spent and leaves the rest in
    /// the backlog for the next call.
    fn drain_within(&mut self, budget: Option<Duration>) -> Result<()> {
        let t0 = Instant::now();
        loop {
            self.copy_rings()?;
            let Consumer { sink, backlog, .. } = &mut self.consumer;
            let Some(s) = sink.as_mut() else { return Ok(()) };
            if backlog.is_empty() {
                return Ok(());
            }
            let slice = Instant::now();
            for _ in 0..SLICE / CLOCK_EVERY {
                if backlog.take(CLOCK_EVERY, &mut |data| s(data)) || slice.elapsed() >= SLICE_TIME {
                    break;
                }
            }
            if budget.is_some_and(|b| t0.elapsed() >= b) {
                return Ok(());
            }
        }
    }

    /// Copies what the rings hold into the backlog, releasing them. A full
    /// backlog keeps only the life cycle and the priority syscalls, and
    /// counts the rest as shed: the rings keep flowing, so the events that
    /// severe rules read are never lost to a flood of ordinary ones. Past
    /// its priority room the rings wait (and the kernel's reserve and drop
    /// counts take over).
    fn copy_rings(&mut self) -> Result<()> {
        let Consumer { counters, sink, backlog, priority } = &mut self.consumer;
        let full = !backlog.has_room();
        counters.backlog_full += full as u64;
        if !backlog.has_priority_room() {
            return Ok(());
        }
        let keep = sink.is_some();
        let fill = backlog.filling();
        for i in 0..self.rings.count() {
            self.rings.consume(i, &mut |data: &[u8]| {
                if let Some(h) = Header::parse(data) {
                    counters.count(&h, data.len());
                    if !keep {
                        return;
                    }
                    if full && !h.is_meta() && priority.get(h.kind as usize).copied().unwrap_or(0) == 0 {
                        counters.backlog_shed += 1;
                        return;
                    }
                    fill.push(h.ts, data);
                }
            })?;
            fill.end_run();
        }
        counters.backlog_peak = counters.backlog_peak.max(backlog.bytes() as u64);
        Ok(())
    }

    /// Runs until `until` says stop, draining on a timer (see [`Pace`]): with
    /// no per-event wake-up, a short sleep costs far less than an epoll wake
    /// per event.
    pub fn run(&mut self, mut until: impl FnMut(&Session) -> bool) -> Result<()> {
        self.run_with(|s| until(s))
    }

    /// As [`Session::run`], with the session mutable between drains.
    pub fn run_with(&mut self, mut until: impl FnMut(&mut Session) -> bool) -> Result<()> {
        let mut pace = self.pace();
        while !until(self) {
            self.sleep_and_drain(&mut pace)?;
        }
        Ok(())
    }

    /// A drain timer for this session's ring size.
    pub fn pace(&self) -> Pace {
        Pace::new(self.buffer_size)
    }

    /// One tick of [`Session::run`], for callers with their own loop.
    pub fn sleep_and_drain(&mut self, pace: &mut Pace) -> Result<()> {
        // With a backlog to hand out, no sleep: the sink is the bottleneck.
        if self.consumer.backlog.is_empty() {
            std::thread::sleep(pace.interval);
        }
        let before = self.consumer.counters.bytes;
        self.drain_within(Some(TICK_BUDGET))?;
        pace.update(self.consumer.counters.bytes - before, self.rings.count());
        Ok(())
    }

    pub fn user_counters(&self) -> &UserCounters {
        &self.consumer.counters
    }

    pub fn kernel_stats(&self) -> Result<Vec<CpuStats>> {
        let v = self
            .skel
            .maps
            .cpu_state
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .ok_or_else(|| anyhow!("per-CPU state missing"))?;
        Ok(v.iter().take(self.ncpus).map(|b| cpu_layout::stats_of(b)).collect())
    }

    fn prog_stats(&self) -> Vec<ProgStats> {
        let mut out = Vec::new();
        for p in self.skel.object().progs() {
            if !p.autoload() {
                continue;
            }
            let mut info = libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            let fd = p.as_fd().as_raw_fd();
            let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
            if rc == 0 {
                out.push(ProgStats {
                    name: p.name().to_string_lossy().into_owned(),
                    run_cnt: info.run_cnt,
                    run_time_ns: info.run_time_ns,
                    recursion_misses: info.recursion_misses,
                });
            }
        }
        out
    }

    /// Detaches, reads what is left in the rings and returns the final figures.
    pub fn stop(self) -> Result<Stats> {
        let (stats, links) = self.finish()?;
        drop(links);
        Ok(stats)
    }

    /// Stops producing at once (every program returns from its first check
    /// on), hands what is left in the rings to the sink and returns the final
    /// figures, exact: produced = received + dropped. The links stay attached
    /// (their programs doing nothing) until the returned [`Detach`] is
    /// dropped: a per-syscall tracepoint takes a grace period to detach, tens
    /// of ms each, serialised by the kernel, so a caller can report first.
    pub fn finish(mut self) -> Result<(Stats, Detach)> {
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            unsafe { std::ptr::write_volatile(&mut bss.hr_off, true) };
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        self.settle()?;
        // No handler runs now: nothing new is held. Resume what is.
        if let Some(g) = self.guardian.take() {
            unsafe { crate::guardian::resume_all(self.skel.maps.guard_held.as_fd().as_raw_fd()) };
            drop(g);
        }
        let stats = self.stats()?;
        drop(self.stats_fd.take());
        Ok((stats, Detach(std::mem::take(&mut self.links))))
    }

    /// Drains until the kernel's counters stop moving: a program that passed
    /// the off switch just before it flipped may still be writing its event.
    fn settle(&mut self) -> Result<()> {
        let produced = |s: &Session| -> Result<u64> {
            Ok(s.kernel_stats()?.iter().map(|c| c.events + c.drops.iter().sum::<u64>()).sum())
        };
        let mut last = produced(self)?;
        for _ in 0..200 {
            std::thread::sleep(Duration::from_millis(1));
            self.drain()?;
            let now = produced(self)?;
            if now == last {
                break;
            }
            last = now;
        }
        Ok(())
    }

    pub fn stats(&self) -> Result<Stats> {
        Ok(Stats {
            duration: self.started.elapsed(),
            per_cpu: self.kernel_stats()?,
            programs: self.prog_stats(),
            run_time_stats: self.stats_fd.is_some(),
            attach_mode: self.choice.mode.to_string(),
            dir_cache: self.dir_cache.describe(),
            user_reads: self.user_reads_report(),
            current_task: self.current_report(),
            user: self.consumer.counters.clone(),
        })
    }
}

/// The links of a finished session: dropping it detaches them (see
/// [`Session::finish`]).
pub struct Detach(Vec<Link>);

impl Detach {
    /// Tracepoints and programs still attached.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for Detach {
    fn drop(&mut self) {
        detach_all(std::mem::take(&mut self.0));
    }
}

impl Drop for Session {
    /// Also on error paths: detach in parallel, as stop() does.
    fn drop(&mut self) {
        detach_all(std::mem::take(&mut self.links));
    }
}

/// Closing a syscall tracepoint's perf event waits for an RCU-tasks grace
/// period (~75 ms here); closing them from several threads overlaps the waits.
fn detach_all(links: Vec<Link>) {
    const THREADS: usize = 16;
    let per = links.len().div_ceil(THREADS).max(1);
    let mut groups: Vec<Vec<Link>> = Vec::new();
    let mut it = links.into_iter().peekable();
    while it.peek().is_some() {
        groups.push(it.by_ref().take(per).collect());
    }
    std::thread::scope(|s| {
        for g in groups {
            // A refused thread (EAGAIN: a process or memory limit, met in
            // the 2 GB guests) drops its closure, and with it the group's
            // links, right here: slower, never a panic on the way out.
            let _ = std::thread::Builder::new().spawn_scoped(s, move || drop(g));
        }
    });
}

/// `cfg`, with entry copies kept for a syscall whose success another
/// syscall's exit reports (execveat as execve) when that one is not
/// selected: its handler must then find its own entry copy to act.
fn with_exit_owners(cfg: &Config) -> Config {
    let mut cfg = cfg.clone();
    let selected = |name: &str| cfg.syscalls.iter().any(|s| s.name == name);
    let keep: Vec<u32> = cfg
        .syscalls
        .iter()
        .filter(|s| s.exit_also.is_some_and(|o| !selected(o)) && cfg.collect.reads_at_exit(s.nr))
        .map(|s| s.nr)
        .collect();
    for nr in keep {
        cfg.collect.keep_entry(nr);
    }
    cfg
}

/// Process life-cycle programs (tp_btf), attached in every session.
const LIFE_CYCLE: [&str; 4] = ["hr_fork", "hr_exec", "hr_exit_task", "hr_rename"];

/// The tp_btf sys_exit program of dispatcher mode.
const DISPATCHER: &str = "hr_dispatch";

/// Dispatcher mode: slot nr → the handler of syscall nr. A syscall whose
/// exit the kernel may report under another number (execveat's success
/// exits as execve) also takes that slot when it is free; its handler acts
/// only on its own entry copy.
fn fill_tail_slots(skel: &CaptureSkel, plan: &[Attachment]) -> Result<()> {
    let obj = skel.object();
    let fd_of = |name: &str| -> Result<i32> {
        let p =
            obj.progs().find(|p| p.name() == name).ok_or_else(|| anyhow!("BPF program {name} is missing"))?;
        Ok(p.as_fd().as_raw_fd())
    };
    let mut slots: Vec<(u32, String)> = Vec::new();
    for a in plan {
        if let Some(tail) = a.tail_prog() {
            slots.push((a.syscall.nr, tail));
        }
    }
    for a in plan {
        let (Some(tail), Some(other)) = (a.tail_prog(), a.syscall.exit_also) else { continue };
        let other =
            harrier_schema::syscall_by_name(other).ok_or_else(|| anyhow!("unknown syscall {other}"))?;
        if !slots.iter().any(|(nr, _)| *nr == other.nr) {
            slots.push((other.nr, tail));
        }
    }
    for (nr, prog) in slots {
        let fd = fd_of(&prog)?;
        skel.maps.exit_tails.update(&nr.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)?;
    }
    Ok(())
}

/// The guard's programs into the arrays the handlers tail-call it through.
fn fill_guard_tails(skel: &CaptureSkel, dispatcher: bool) -> Result<()> {
    let zero = 0u32.to_ne_bytes();
    let fd = skel.progs.hr_guard_tp.as_fd().as_raw_fd();
    skel.maps.guard_tails_tp.update(&zero, &fd.to_ne_bytes(), MapFlags::ANY)?;
    if dispatcher {
        let fd = skel.progs.hr_guard_btf.as_fd().as_raw_fd();
        skel.maps.guard_tails_btf.update(&zero, &fd.to_ne_bytes(), MapFlags::ANY)?;
    }
    Ok(())
}

/// Tells each CPU which ring it writes: CPU c uses ring c / cpus_per_buffer.
fn set_cpu_rings(skel: &CaptureSkel, ncpus: usize, cpus_per_buffer: usize) -> Result<()> {
    let key = 0u32.to_ne_bytes();
    let mut values = skel
        .maps
        .cpu_state
        .lookup_percpu(&key, MapFlags::ANY)?
        .ok_or_else(|| anyhow!("per-CPU state missing"))?;
    for (cpu, v) in values.iter_mut().enumerate().take(ncpus) {
        let ring = (cpu / cpus_per_buffer) as u32;
        v[cpu_layout::RING_OFF..cpu_layout::RING_OFF + 4].copy_from_slice(&ring.to_ne_bytes());
    }
    skel.maps.cpu_state.update_percpu(&key, &values, MapFlags::ANY)?;
    Ok(())
}

/// Turns the kernel's EPERM/EACCES into the one-line error a user can act on.
/// As root it is usually the verifier (EACCES), rarely a missing capability.
fn privileges(e: libbpf_rs::Error) -> anyhow::Error {
    if e.kind() != libbpf_rs::ErrorKind::PermissionDenied {
        anyhow::Error::new(e)
    } else if unsafe { libc::geteuid() } == 0 {
        anyhow!("the kernel refused a BPF program: see the verifier log above (or CAP_BPF/CAP_PERFMON is missing)")
    } else {
        anyhow!("permission denied loading BPF: run as root (needs CAP_BPF and CAP_PERFMON)")
    }
}

/// Turns on the kernel's BPF run-time accounting (for every program on the
/// machine, ~57 ns a run here) until the returned fd is closed.
pub fn enable_run_time_stats() -> Result<OwnedFd> {
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        bail!("BPF run-time stats refused: {}", std::io::Error::from_raw_os_error(-fd));
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::Pace;
    use std::time::Duration;

    #[test]
    fn pace_sleeps_longer_only_while_the_rings_stay_nearly_empty() {
        let mut p = Pace::new(8 << 20);
        p.update(0, 2);
        assert_eq!(p.interval, Pace::MAX, "quiet: wake rarely");
        p.update(2 * (64 << 20), 2); // 64 MiB per ring in 50 ms: far past 1/8 of a ring
        assert_eq!(p.interval, Pace::MIN, "busy: the shortest sleep");
        // 20 MB/s per ring: 1 MiB (1/8 of 8 MiB) lasts ~52 ms, so the cap applies;
        // 40 MB/s: ~26 ms.
        p.interval = Duration::from_millis(10);
        p.update(2 * 400_000, 2);
        assert!(
            (Duration::from_millis(25)..Duration::from_millis(28)).contains(&p.interval),
            "{:?}",
            p.interval
        );
    }
}
