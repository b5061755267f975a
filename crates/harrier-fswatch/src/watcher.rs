//! A running watcher: the loaded BPF object, its per-CPU rings (the capture
//! engine's reader, harrier_capture::aring) and its attachments.

use crate::dirrefs::{DirRefs, DirStats, MAX_DIRS};
use crate::doorbell::{Doorbell, Woke};
use crate::fragmap::{FragMap, JoinStats};
use crate::frags::FragSlots;
use crate::hooks::{Choice, Hooks};
use crate::wire::{has_marks, FsEvent, KernelStats};
use crate::{validate, wake_level, watch_key, Config, Resolution, RING_SLACK};
use anyhow::{anyhow, bail, Context, Result};
use harrier_capture::aring::ArrayRings;
use harrier_schema::wire::ARING_DATA;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags};
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/fswatch.skel.rs"));
}
use skel::{FswatchSkel, FswatchSkelBuilder};

/// The exit program, attached to the syscalls:sys_exit_<name> tracepoint of
/// each selected syscall (crate::syscalls): no other syscall runs it.
const EXIT_PROG: &str = "fw_sys_exit";

#[derive(Debug, Clone, serde::Serialize)]
pub struct Stats {
    pub duration_s: f64,
    pub kernel: KernelStats,
    /// Events read from the rings.
    pub received: u64,
    /// Bytes read from the rings (as the kernel wrote them).
    pub bytes: u64,
    /// The hooks that told the exits what each syscall changed (crate::hooks).
    pub hooks: Hooks,
    /// single-fragment: paths overwritten in their path ring before they were read;
    /// fragments: paths with a directory evicted from the map; ringbuf and
    /// single-fragment: references to a reader's directory slot given away
    /// since (all reported empty, flagged unresolved).
    pub paths_lost: u64,
    /// fragments: paths with a directory renamed after the event (reported
    /// empty, flagged unresolved: the name it had then is gone).
    pub paths_stale: u64,
    /// The verdict and path caches' generation (bpf/include/fswatch/inval.h):
    /// how many times they were invalidated since the start, plus one. Moved
    /// by any process on the machine that moves or removes a directory.
    pub generation: u64,
    /// Waits (Watcher::wait) the doorbell ended: a ring passed its wake level.
    pub wakeups: u64,
    /// fragments: directory lookups (syscalls) the reader made; a warm
    /// cache makes none (fragmap.rs).
    pub frag_lookups: u64,
    /// fragments: times the reader emptied its cache because the kernel
    /// wrote a fragment.
    pub frag_flushes: u64,
    /// ringbuf and single-fragment: the reader's directory cache (dirrefs.rs).
    pub dir_cache: DirStats,
}

impl Stats {
    pub fn report(&self) -> String {
        let k = &self.kernel;
        format!(
            "{} events in {:.1}s: {} received, {} dropped (ring full {}, no ring {}); \
             {} filtered out in the kernel, {} failed syscalls, {} unresolved, {} without entry record, \
             {} inode slots full, {} paths lost, {} paths stale; caches: verdicts {} hits {} misses, \
             paths {} hits {} misses, generation {}; reader's directories: {} taught, {} paths by reference, \
             {} stale, {} not kept; {} doorbell wake-ups; hooks: {}",
            k.events,
            self.duration_s,
            self.received,
            k.drops(),
            k.drops_ring_full,
            k.drops_no_ring,
            k.filtered,
            k.failed,
            k.unresolved,
            k.no_entry,
            k.slots_full,
            self.paths_lost,
            self.paths_stale,
            k.cache_hits,
            k.cache_misses,
            k.path_hits,
            k.path_misses,
            self.generation,
            self.dir_cache.taught,
            k.dir_refs,
            self.dir_cache.stale,
            self.dir_cache.full,
            self.wakeups,
            self.hooks.name(),
        )
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

pub struct Watcher {
    // Field order is drop order: detach first, then free the object.
    links: Vec<Link>,
    rings: ArrayRings,
    bell: Doorbell,
    wakeups: u64,
    skel: FswatchSkel<'static>,
    ncpus: usize,
    started: Instant,
    received: u64,
    bytes: u64,
    /// What the reader's pace follows (Watcher::pace_bytes).
    pace_bytes: u64,
    choice: Choice,
    /// single-fragment's path rings (and their tails, for the doorbell).
    frags: Option<FragSlots>,
    /// fragments' map reader.
    fmap: Option<FragMap>,
    join: JoinStats,
    /// ringbuf and single-fragment: the reader's directory cache.
    dirs: Option<DirRefs>,
    paths_lost: u64,
    /// Drained records, copied so they can be handed out in time order
    /// across CPUs; reused, so a drain allocates nothing once warm.
    arena: Vec<u8>,
    order: Vec<(u64, u32, u32)>,
}

/// Entries of the per-CPU verdict and path caches (bpf/include/fswatch/cache.h, bpf/include/tree/dircache.h):
/// about 4 MiB of verdicts and 16 MiB of paths in all whatever the CPU count
/// (each entry holds one value per CPU), 1 where a cache is off.
fn cache_sizes(cfg: &Config, ncpus: usize) -> (u32, u32) {
    if !cfg.uses_verdict_cache() {
        return (1, 1);
    }
    const VERDICT: usize = 48; // struct hr_dvalid and the LRU's per-CPU slot
    const PATH: usize = 1024 + 56; // struct hr_dcval
    let per = |budget: usize, size: usize, max: usize| (budget / (size * ncpus)).clamp(64, max) as u32;
    let paths = if cfg.resolution == Resolution::Fragments { 1 } else { per(16 << 20, PATH, 4096) };
    (per(4 << 20, VERDICT, 16384), paths)
}

/// Entries of fragments mode's per-CPU chain cache (bpf/include/fswatch/chain.h):
/// as many as the verdicts (56-byte values), 1 where it is off.
fn chain_cache_size(cfg: &Config, ncpus: usize) -> u32 {
    if !cfg.uses_verdict_cache() || cfg.resolution != Resolution::Fragments {
        return 1;
    }
    ((4usize << 20) / (56 * ncpus)).clamp(64, 16384) as u32
}

fn privileges(e: libbpf_rs::Error) -> anyhow::Error {
    if unsafe { libc::geteuid() } != 0 {
        anyhow!("{e} (harrier fswatch needs root: CAP_BPF and CAP_PERFMON)")
    } else {
        anyhow!(e)
    }
}

impl Watcher {
    pub fn start(cfg: &Config) -> Result<Watcher> {
        validate(cfg)?;
        // Paths first: a bad one is a user error, not a load error.
        let keys = cfg.paths.iter().map(|p| watch_key(p)).collect::<Result<Vec<_>>>()?;
        harrier_capture::kernel::check(harrier_capture::kernel::CAPTURE)?;
        let choice = crate::hooks::choose(cfg.hooks)?;
        let ncpus = libbpf_rs::num_possible_cpus().context("counting CPUs")?;

        let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        // How BPF reads kernel objects (plain loads or probe reads) it decides
        // itself at load (bpf/include/tree/tree.h's HR_CAST); `choice` says which.
        let mut open = FswatchSkelBuilder::default().open(storage).map_err(privileges)?;
        let rodata = open.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("no .rodata"))?;
        rodata.filter_tgid = cfg.pid.unwrap_or(0);
        rodata.event_mask = cfg.events;
        rodata.watch_all = cfg.paths.is_empty();
        rodata.recursive = cfg.recursive;
        rodata.follow = cfg.follow;
        rodata.prefilter = cfg.prefilter;
        rodata.vcache = cfg.uses_verdict_cache();
        rodata.rcache = cfg.uses_reader_cache();
        let single = cfg.resolution == Resolution::SingleFragment;
        let fragments = cfg.resolution == Resolution::Fragments;
        if single {
            rodata.resolution = 1; // FW_RES_SINGLE
        }
        if fragments {
            rodata.resolution = 2; // FW_RES_FRAGS
        }
        rodata.aring_mask = cfg.buffer_size as u64 - 1;
        rodata.aring_last = (cfg.buffer_size - RING_SLACK) as u64;
        rodata.wake_level = wake_level(cfg.buffer_size);
        rodata.hooks = choice.hooks as u32;

        // Only the chosen hooks are loaded: the others' targets may not exist here.
        let hook_progs = choice.hooks.programs();
        for mut p in open.open_object_mut().progs_mut() {
            let name = p.name().to_string_lossy().into_owned();
            p.set_autoload(name == EXIT_PROG || hook_progs.contains(&name));
        }
        open.maps.arings.set_value_size((ARING_DATA + cfg.buffer_size) as u32)?;
        open.maps.arings.set_max_entries(ncpus as u32)?;
        // The path rings: as large as the event rings (the same geometry constants).
        if single {
            open.maps.frags.set_value_size((ARING_DATA + cfg.buffer_size) as u32)?;
            open.maps.frags.set_max_entries(ncpus as u32)?;
        }
        // The fragments map only where it is used (it is preallocated).
        open.maps.fragments.set_max_entries(if fragments { 65536 } else { 1 })?;
        // The verdict and path caches likewise (LRUs are preallocated, per CPU).
        let (verdicts, dirpaths) = cache_sizes(cfg, ncpus);
        open.maps.verdicts.set_max_entries(verdicts)?;
        open.maps.dirpaths.set_max_entries(dirpaths)?;
        open.maps.fchains.set_max_entries(chain_cache_size(cfg, ncpus))?;
        open.maps.rdirs.set_max_entries(if cfg.uses_reader_cache() { MAX_DIRS as u32 } else { 1 })?;
        let skel = open.load().map_err(privileges).context("loading the BPF programs")?;

        let mut skel = skel;
        for (dev, ino) in keys {
            let mut k = [0u8; 16];
            k[..4].copy_from_slice(&dev.to_ne_bytes());
            k[8..].copy_from_slice(&ino.to_ne_bytes());
            skel.maps.watched.update(&k, &1u32.to_ne_bytes(), MapFlags::ANY)?;
            let b = crate::syscalls::watch_bit(dev, ino);
            let bss = skel.maps.bss_data.as_deref_mut().ok_or_else(|| anyhow!("no .bss"))?;
            bss.watch_bits[b / 64] |= 1 << (b % 64);
        }
        let rings = ArrayRings::map_with_slack(skel.maps.arings.as_fd(), ncpus, cfg.buffer_size, RING_SLACK)?;
        let bell = Doorbell::new(&skel.maps.doorbell).context("the doorbell ring")?;
        let frags = match cfg.resolution {
            Resolution::SingleFragment => {
                Some(FragSlots::map(skel.maps.frags.as_fd(), ncpus, cfg.buffer_size)?)
            }
            _ => None,
        };
        let fmap = fragments.then(|| {
            use std::os::fd::AsRawFd;
            // The kernel's fragment write counter, in the mmapped .bss.
            let writes = skel
                .maps
                .bss_data
                .as_deref()
                .map(|b| std::ptr::addr_of!(b.fw_frag_writes).cast::<std::sync::atomic::AtomicU64>());
            // SAFETY: the .bss mapping lives as long as the skeleton, which
            // the watcher drops only after it stops reading; BPF writes the
            // counter with atomic adds only.
            unsafe { FragMap::new(skel.maps.fragments.as_fd().as_raw_fd(), writes) }
        });
        let dirs = cfg.uses_reader_cache().then(|| {
            use std::os::fd::AsRawFd;
            let gen = skel
                .maps
                .data_data
                .as_deref()
                .map(|d| std::ptr::addr_of!(d.hr_tree_gen).cast::<std::sync::atomic::AtomicU64>());
            // SAFETY: the .data mapping and the map live as long as the
            // skeleton; DirRefs uses them only from drain() (it has no Drop).
            unsafe { DirRefs::new(skel.maps.rdirs.as_fd().as_raw_fd(), gen, MAX_DIRS) }
        });
        let mut w = Watcher {
            links: Vec::new(),
            rings,
            bell,
            wakeups: 0,
            skel,
            ncpus,
            started: Instant::now(),
            received: 0,
            bytes: 0,
            pace_bytes: 0,
            choice,
            frags,
            fmap,
            join: JoinStats::default(),
            dirs,
            paths_lost: 0,
            arena: Vec::new(),
            order: Vec::new(),
        };
        // The exits first: a record a ctime hook opens is always closed by
        // its syscall's exit.
        let exits = crate::syscalls::exit_tracepoints(cfg.events, cfg.uses_verdict_cache())?;
        {
            let obj = w.skel.object();
            let mut progs = obj.progs_mut();
            let p = progs
                .find(|p| p.name() == EXIT_PROG)
                .ok_or_else(|| anyhow!("BPF program {EXIT_PROG} is missing"))?;
            for (name, id) in exits {
                let fd = harrier_capture::tracefs::open_tracepoint_event(id)
                    .with_context(|| format!("opening syscalls:{name}"))?;
                w.links.push(
                    p.attach_perf_event(fd).with_context(|| format!("attaching {EXIT_PROG} to {name}"))?,
                );
            }
        }
        for name in &hook_progs {
            let obj = w.skel.object();
            let mut progs = obj.progs_mut();
            let p = progs
                .find(|p| p.name() == name.as_str())
                .ok_or_else(|| anyhow!("BPF program {name} is missing"))?;
            w.links.push(p.attach().with_context(|| format!("attaching {name}"))?);
        }
        Ok(w)
    }

    /// The hooks this watcher chose, and why (`Choice::describe`).
    pub fn hooks(&self) -> &Choice {
        &self.choice
    }

    /// Sleeps until a ring passes its wake level (its doorbell) or `timeout`
    /// passes, whichever comes first; a reader then drains. A ring that
    /// passed it while the reader was busy rings at once.
    pub fn wait(&mut self, timeout: Duration) -> Result<Woke> {
        let woke = self.bell.wait(timeout)?;
        if woke == Woke::Doorbell {
            self.wakeups += 1;
        }
        Ok(woke)
    }

    /// Hands every event drained from the rings to `f`, in time order
    /// across CPUs within this drain.
    pub fn drain(&mut self, mut f: impl FnMut(&FsEvent)) -> Result<usize> {
        self.arena.clear();
        self.order.clear();
        let (arena, order, frags) = (&mut self.arena, &mut self.order, &self.frags);
        let (fmap, join, dirs) = (&mut self.fmap, &mut self.join, &mut self.dirs);
        // Bytes as the kernel wrote them (before path references are joined).
        let mut ring_bytes = 0u64;
        let mut pace_bytes = 0u64;
        let mut lost = 0;
        let mut bad = None;
        for i in 0..self.rings.count() {
            let path_head = self.frags.as_ref().map(|f| f.head(i));
            self.rings.consume(i, &mut |rec: &[u8]| {
                let ts = u64::from_le_bytes(rec[..8].try_into().unwrap());
                let at = arena.len();
                ring_bytes += rec.len() as u64;
                match (frags, fmap.as_mut()) {
                    // At once: the path ring does not wait for the reader.
                    (Some(fr), _) => {
                        match fr.resolve(rec, i, arena, dirs.as_mut()) {
                            Ok(n) => lost += n,
                            Err(e) => bad = Some(e),
                        }
                        // The path ring fills faster than the event ring
                        // (a whole path against a 12-byte reference): the
                        // pace follows the paths.
                        pace_bytes += (arena.len() - at) as u64;
                    }
                    // At once too: the sooner, the fewer directories renamed since.
                    (None, Some(fm)) => {
                        if let Err(e) = fm.resolve(rec, arena, join) {
                            bad = Some(e);
                        }
                    }
                    (None, None) => match dirs.as_mut() {
                        Some(d) if has_marks(rec) => {
                            match crate::wire::rewrite_paths(rec, arena, |w, b, o| d.put(w, b, o)) {
                                Ok(n) => lost += n,
                                Err(e) => bad = Some(e),
                            }
                        }
                        _ => arena.extend_from_slice(rec),
                    },
                }
                if frags.is_none() {
                    pace_bytes += rec.len() as u64;
                }
                order.push((ts, at as u32, (arena.len() - at) as u32));
            })?;
            if let (Some(f), Some(h)) = (&self.frags, path_head) {
                f.set_tail(i, h);
            }
        }
        self.paths_lost += lost;
        self.bytes += ring_bytes;
        self.pace_bytes += pace_bytes;
        if let Some(e) = bad {
            bail!("a corrupt fswatch record: {e}");
        }
        order.sort_unstable_by_key(|&(ts, off, _)| (ts, off));
        for &(_, off, len) in order.iter() {
            let rec = &arena[off as usize..(off + len) as usize];
            self.received += 1;
            match FsEvent::parse(rec) {
                Ok(e) => f(&e),
                Err(e) => bail!("a corrupt fswatch record: {e}"),
            }
        }
        Ok(order.len())
    }

    pub fn kernel_stats(&self) -> Result<KernelStats> {
        let v = self
            .skel
            .maps
            .cpu_state
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .ok_or_else(|| anyhow!("per-CPU state missing"))?;
        let mut total = KernelStats::default();
        for b in v.iter().take(self.ncpus) {
            total.add(&KernelStats::from_bytes(&b[..KernelStats::SIZE]));
        }
        Ok(total)
    }

    pub fn stats(&self) -> Result<Stats> {
        Ok(Stats {
            duration_s: self.started.elapsed().as_secs_f64(),
            kernel: self.kernel_stats()?,
            received: self.received,
            bytes: self.bytes,
            hooks: self.choice.hooks,
            paths_lost: self.paths_lost + self.join.missing,
            paths_stale: self.join.stale,
            generation: self.generation(),
            wakeups: self.wakeups,
            frag_lookups: self.join.lookups,
            frag_flushes: self.join.flushes,
            dir_cache: self.dirs.as_ref().map(DirRefs::stats).unwrap_or_default(),
        })
    }

    /// The caches' generation now (`Stats::generation`), read from the
    /// object's mmapped .data; 0 if libbpf could not map it.
    pub fn generation(&self) -> u64 {
        // The kernel bumps it behind our back: read it afresh each time.
        self.skel.maps.data_data.as_deref().map_or(0, |d| unsafe { std::ptr::read_volatile(&d.hr_tree_gen) })
    }

    /// Run-time statistics of each attached program: (name, runs, ns), as
    /// the kernel counts them while BPF_ENABLE_STATS is held (zeros otherwise).
    pub fn prog_stats(&self) -> Vec<(String, u64, u64)> {
        use std::os::fd::AsRawFd;
        self.skel
            .object()
            .progs()
            .filter(|p| p.autoload())
            .map(|p| {
                let mut info = libbpf_sys::bpf_prog_info::default();
                let mut len = std::mem::size_of_val(&info) as u32;
                let fd = p.as_fd().as_raw_fd();
                // A failure leaves the zeros: no stats rather than no watcher.
                unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
                (p.name().to_string_lossy().into_owned(), info.run_cnt, info.run_time_ns)
            })
            .collect()
    }

    /// Bytes drained so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes drained so far from the ring that fills first: the event rings,
    /// or in single-fragment mode the path rings (each event's whole path).
    /// A reader paces its drains on this (harrier_capture::Pace).
    pub fn pace_bytes(&self) -> u64 {
        self.pace_bytes
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Detaches, drains what is left and returns the final counts.
    pub fn stop(mut self, f: impl FnMut(&FsEvent)) -> Result<Stats> {
        self.links.clear();
        self.drain(f)?;
        self.stats()
    }
}
