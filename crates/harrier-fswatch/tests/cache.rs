//! The verdict cache is used: repeated opens outside the watched tree are
//! decided by it (not by a climb each time), every check goes through it
//! exactly once, and with it off none does; repeated opens inside take
//! their directory's path from the path cache (fragments mode: their
//! directory's chain from the chain cache, tests/fragments.rs). Its correctness across renames,
//! mounts and --follow is in tests/ops.rs (the "cache:" cases, every mode).
//! One #[test]: the counts are per process (the pid filter).

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_fswatch::{Config, Resolution, Watcher};
use std::path::Path;

const OPENS: u64 = 1000;

fn opens(p: &Path, n: u64) {
    for _ in 0..n {
        let fd = ok(unsafe { libc::open(c(p).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) } as i64, "open");
        unsafe { libc::close(fd as i32) };
    }
}

fn start(w: &Path, verdict_cache: bool, resolution: Resolution) -> Watcher {
    let cfg = Config {
        paths: vec![w.to_path_buf()],
        events: harrier_fswatch::parse_events("open").unwrap(),
        pid: Some(std::process::id()),
        verdict_cache,
        resolution,
        ..Config::default()
    };
    Watcher::start(&cfg).unwrap_or_else(|e| panic!("starting the watcher: {e:#}"))
}

#[test]
fn unwatched_opens_are_decided_by_the_cache() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let m = TmpMount::new("cache");
    let (w, out) = (m.root.join("w"), m.root.join("out/a/b"));
    std::fs::create_dir_all(&w).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let (inside, outside) = (w.join("f"), out.join("f"));
    std::fs::write(&inside, b"").unwrap();
    std::fs::write(&outside, b"").unwrap();

    for mode in [Resolution::Ringbuf, Resolution::SingleFragment, Resolution::Fragments] {
        let mut watcher = start(&w, true, mode);
        opens(&outside, OPENS);
        opens(&inside, 10);
        let mut got = Vec::new();
        watcher.drain(|e| got.push(String::from_utf8_lossy(e.path).into_owned())).unwrap();
        let k = watcher.kernel_stats().unwrap();
        assert_eq!(k.filtered, OPENS, "{mode:?}: every outside open filtered: {k:?}");
        assert_eq!(got, vec![inside.to_string_lossy().into_owned(); 10], "{mode:?}: inside opens reported");
        assert_eq!(k.cache_hits + k.cache_misses, OPENS + 10, "{mode:?}: one cached check per open: {k:?}");
        // Misses only where something bumped the generation meanwhile (a
        // directory renamed anywhere on the machine): far fewer than the opens.
        assert!(k.cache_hits > OPENS / 2, "{mode:?}: the cache decides repeated opens: {k:?}");
        // The inside opens' paths: their directory's from the path cache
        // (fragments mode: its chain from the chain cache; the first two
        // walk, the first writing the fragments).
        assert_eq!(k.path_hits + k.path_misses, 10, "{mode:?}: one path per inside open: {k:?}");
        assert!(k.path_hits >= 5, "{mode:?}: repeated paths come from the cache: {k:?}");
        watcher.stop(|_| {}).unwrap();
    }

    let mut off = start(&w, false, Resolution::Ringbuf);
    opens(&outside, OPENS);
    let k = off.kernel_stats().unwrap();
    assert_eq!(k.filtered, OPENS, "cache off: every outside open filtered: {k:?}");
    assert_eq!((k.cache_hits, k.cache_misses), (0, 0), "cache off: not used: {k:?}");
    assert_eq!((k.path_hits, k.path_misses), (0, 0), "cache off: no path cache: {k:?}");
    off.drain(|_| {}).unwrap();
    off.stop(|_| {}).unwrap();
}
