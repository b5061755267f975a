//! `harrier fswatch`'s engine: file-system events with absolute paths
//! resolved in the kernel from dentries and mounts, filtered in the kernel
//! by watched (device, inode) and their descendants. Design: docs/fswatch.md.
//!
//! ```no_run
//! let mut cfg = harrier_fswatch::Config::default();
//! cfg.paths.push("/etc".into());
//! let mut w = harrier_fswatch::Watcher::start(&cfg)?;
//! w.drain(|e| println!("{} {}", e.kind_name(), String::from_utf8_lossy(e.path)))?;
//! println!("{}", w.stop(|_| {})?.report());
//! # Ok::<(), anyhow::Error>(())
//! ```

mod dirrefs;
mod doorbell;
mod fragmap;
mod frags;
pub mod hooks;
pub mod syscalls;
mod watcher;
pub mod wire;

pub use doorbell::Woke;
pub use hooks::Hooks;
pub use watcher::{Stats, Watcher};
pub use wire::FsEvent;

use anyhow::{bail, Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How paths reach user space: FSProbe's three modes. `Ringbuf`: the whole
/// path in the event. `SingleFragment`: the whole path in a record of a
/// mmapped per-CPU path ring, the event naming it. `Fragments`: directories
/// in a kernel LRU map keyed by (dev, mount id, inode), the event naming
/// the leaf's directory; the reader joins them (fragmap.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Fragments,
    SingleFragment,
    Ringbuf,
}

impl std::str::FromStr for Resolution {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "fragments" => Ok(Resolution::Fragments),
            "single-fragment" => Ok(Resolution::SingleFragment),
            "ringbuf" => Ok(Resolution::Ringbuf),
            _ => bail!("unknown resolution mode '{s}' (expected fragments, single-fragment or ringbuf)"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Watched paths; empty: the whole system.
    pub paths: Vec<PathBuf>,
    /// Bit `1 << kind` per event kind (wire::KINDS).
    pub events: u32,
    pub recursive: bool,
    pub follow: bool,
    pub resolution: Resolution,
    /// Bytes per per-CPU ring: a power of two from 32K (8 pages) to 256M.
    pub buffer_size: usize,
    /// Only this process (thread group): tests and benchmarks.
    pub pid: Option<u32>,
    /// The watch check before the path walk (the default): events outside
    /// the watched paths build no path. Off only to measure what it saves.
    pub prefilter: bool,
    /// The verdict cache (bpf/include/fswatch/cache.h): a directory's
    /// watched/unwatched verdict kept per CPU, so the check of an event below
    /// it needs no climb. Used with `recursive`, `prefilter` and some path;
    /// off only to measure it.
    pub verdict_cache: bool,
    /// The reader's directory cache (bpf/include/fswatch/dirrefs.h, src/dirrefs.rs):
    /// in ringbuf and single-fragment modes, a directory's path is sent once
    /// and then referred to. Used with the verdict cache; off only to measure it.
    pub reader_cache: bool,
    /// Which hooks tell the exits what a syscall changed (crate::hooks);
    /// None: the best this kernel has.
    pub hooks: Option<Hooks>,
}

/// Every kind but modify, as FSProbe.
pub const DEFAULT_EVENTS: &str = "open,mkdir,link,rename,setattr,unlink,rmdir";

impl Default for Config {
    fn default() -> Self {
        Config {
            paths: Vec::new(),
            events: parse_events(DEFAULT_EVENTS).expect("default events"),
            recursive: true,
            follow: true,
            resolution: Resolution::Ringbuf,
            buffer_size: 8 << 20,
            pid: None,
            prefilter: true,
            verdict_cache: true,
            reader_cache: true,
            hooks: None,
        }
    }
}

/// "open,mkdir" (commas or repeated) → the kind mask, or one line naming the unknown one.
pub fn parse_events(list: &str) -> Result<u32> {
    let mut mask = 0;
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match wire::kind_by_name(name) {
            Some(k) => mask |= 1 << k,
            None => bail!(
                "unknown event '{name}' (expected {})",
                wire::KINDS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    if mask == 0 {
        bail!("empty event list");
    }
    Ok(mask)
}

/// Pseudo file systems whose entries are not files anyone creates or renames.
const UNSUPPORTED_FS: [(i64, &str); 10] = [
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0xcafe_4a11, "bpf"),
    (0x2701_9ae4, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x1cd1, "devpts"),
    (0x7363_6673, "securityfs"),
    (0x6e73_6673, "nsfs"),
];

/// A watched path as the kernel names its inode: (kernel dev_t, inode).
pub fn watch_key(path: &Path) -> Result<(u32, u64)> {
    let md = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
    let fs = statfs_type(path).with_context(|| format!("{}", path.display()))?;
    if let Some((_, name)) = UNSUPPORTED_FS.iter().find(|(m, _)| *m == fs) {
        bail!("{}: unsupported file system ({name})", path.display());
    }
    let dev = md.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    Ok(((major << 20) | minor, md.ino()))
}

fn statfs_type(path: &Path) -> Result<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(st.f_type as i64)
}

impl Config {
    /// Whether the kernel side uses the verdict cache.
    pub fn uses_verdict_cache(&self) -> bool {
        self.verdict_cache && self.recursive && self.prefilter && !self.paths.is_empty()
    }

    /// Whether directories' paths are sent once and then referred to (dirrefs.rs).
    pub fn uses_reader_cache(&self) -> bool {
        self.reader_cache && self.uses_verdict_cache() && self.resolution != Resolution::Fragments
    }
}

/// The longest a reader should wait between drains of rings of `buffer_size`
/// bytes: the time they take to fill at 32 MiB/s (about the fastest an
/// open+close producer fills them here), within Pace's 5-50 ms. A reader
/// idling at Pace's 50 ms when a burst starts loses a small ring's overflow
/// before its first drain (64 pages: from ~4 MB/s).
pub fn max_wait(buffer_size: usize) -> std::time::Duration {
    let fill = std::time::Duration::from_secs_f64(buffer_size as f64 / (32u64 << 20) as f64);
    fill.clamp(harrier_capture::Pace::MIN, harrier_capture::Pace::MAX)
}

/// Room at the end of a ring: no record starts later than `size -
/// RING_SLACK` (so none wraps), none is longer. fswatch's own (its largest
/// record, rounded to 8), not the capture engine's ~24 KiB: 8-page rings work.
pub const RING_SLACK: usize = (wire::EVENT_MAX + 7) & !7;

/// The smallest ring (8 pages): room for about three of the largest records, hundreds of usual ones.
pub const MIN_BUFFER: usize = 32 << 10;

/// The fill (bytes) at which a ring rings the reader's doorbell: a quarter
/// of what it can hold, so a woken reader has three quarters of a ring of
/// time to be scheduled (at half, 64-page rings still lost a few events at
/// the producer's top rate on this 2-CPU machine).
pub fn wake_level(buffer_size: usize) -> u64 {
    (buffer_size.saturating_sub(RING_SLACK) / 4) as u64
}

/// Sets the calling thread's nice value (-20..19): a reader that runs ahead
/// of the producers and other jobs keeps small rings drained on a busy machine.
pub fn set_reader_nice(nice: i32) -> Result<()> {
    if !(-20..=19).contains(&nice) {
        bail!("nice value {nice} must be between -20 and 19");
    }
    // PRIO_PROCESS with 0: the calling thread on Linux.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        bail!("setting the reader's nice value to {nice}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

pub fn validate(cfg: &Config) -> Result<()> {
    let size = cfg.buffer_size;
    if !size.is_power_of_two() || !(MIN_BUFFER..=256 << 20).contains(&size) {
        bail!("buffer size {size} must be a power of two between 32K and 256M");
    }
    if cfg.events == 0 {
        bail!("no events selected");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_errors() {
        assert_eq!(parse_events("open,mkdir").unwrap(), 1 << 1 | 1 << 2);
        assert_eq!(
            parse_events("open,frob").unwrap_err().to_string(),
            "unknown event 'frob' (expected open, mkdir, link, rename, setattr, unlink, rmdir, modify)"
        );
        assert!(parse_events("").is_err());
        assert_eq!(Config::default().events & (1 << 8), 0, "modify is off by default");
    }

    #[test]
    fn small_rings_are_drained_often() {
        use std::time::Duration;
        assert_eq!(max_wait(64 << 10), Duration::from_millis(5), "16 pages: Pace's minimum");
        assert_eq!(
            max_wait(256 << 10),
            Duration::from_nanos(7_812_500),
            "64 pages fill in 7.8 ms at 32 MiB/s"
        );
        assert_eq!(max_wait(8 << 20), Duration::from_millis(50), "large rings: Pace's maximum");
    }

    #[test]
    fn ring_sizes_from_8_pages() {
        let cfg = |buffer_size| Config { buffer_size, ..Config::default() };
        for ok in [32 << 10, 64 << 10, 256 << 20] {
            validate(&cfg(ok)).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [16 << 10, 48 << 10, 512 << 20] {
            assert_eq!(
                validate(&cfg(bad)).unwrap_err().to_string(),
                format!("buffer size {bad} must be a power of two between 32K and 256M")
            );
        }
        assert_eq!(RING_SLACK, 8280, "the largest record (two 4 KiB paths), rounded to 8");
        assert_eq!(wake_level(32 << 10), (32768 - 8280) / 4);
    }

    #[test]
    fn watch_keys_and_bad_paths() {
        let e = watch_key(Path::new("/nonexistent/harrier")).unwrap_err();
        assert_eq!(format!("{e:#}"), "/nonexistent/harrier: No such file or directory (os error 2)");
        let e = watch_key(Path::new("/proc/self")).unwrap_err();
        assert_eq!(e.to_string(), "/proc/self: unsupported file system (proc)");
        let (dev, ino) = watch_key(Path::new("/")).unwrap();
        assert!(dev != 0 && ino != 0);
    }
}
