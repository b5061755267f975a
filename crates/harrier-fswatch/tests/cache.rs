//! The verdict cache is used: repeated opens outside the watched tree are
//! decided by it (not by a climb each time), every check goes through it
//! exactly once, and with it off none does; repeated opens inside take
//! their directory's path from the path cache (fragments mode: their
//! directory's chain from the chain cache, tests/fragments.rs). Its correctness across renames,
//! mounts and --follow is in tests/ops.rs (the "cache:" cases, every mode).
//! File renames keep the caches (the generation does not move, repeated
//! opens keep hitting); directories renamed, exchanged with a file, renamed
//! over an empty directory or removed invalidate them, and the next event is
//! still right. The tests take turns (LOCK): the counts are per process (the
//! pid filter).

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_fswatch::{Config, Resolution, Watcher};
use std::path::Path;
use std::sync::Mutex;

const OPENS: u64 = 1000;

/// One watcher of this process at a time: the pid filter counts every thread's syscalls.
static LOCK: Mutex<()> = Mutex::new(());

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
        ..config()
    };
    Watcher::start(&cfg).unwrap_or_else(|e| panic!("starting the watcher: {e:#}"))
}

#[test]
fn unwatched_opens_are_decided_by_the_cache() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _turn = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = TmpMount::new("cache");
    let (w, out) = (m.root.join("w"), m.root.join("out/a/b"));
    std::fs::create_dir_all(&w).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let (inside, outside) = (w.join("f"), out.join("f"));
    std::fs::write(&inside, b"").unwrap();
    std::fs::write(&outside, b"").unwrap();

    for mode in [Resolution::Ringbuf, Resolution::SingleFragment, Resolution::Fragments] {
        let mut watcher = start(&w, true, mode);
        // What the start itself made the kernel check: libbpf opens a sysfs
        // file per kprobe it attaches, after the exits (Watcher::start).
        let base = watcher.kernel_stats().unwrap();
        opens(&outside, OPENS);
        opens(&inside, 10);
        let mut got = Vec::new();
        watcher.drain(|e| got.push(String::from_utf8_lossy(e.path).into_owned())).unwrap();
        let mut k = watcher.kernel_stats().unwrap();
        k.filtered -= base.filtered;
        k.cache_hits -= base.cache_hits;
        k.cache_misses -= base.cache_misses;
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
    let base = off.kernel_stats().unwrap();
    opens(&outside, OPENS);
    let k = off.kernel_stats().unwrap();
    assert_eq!(k.filtered - base.filtered, OPENS, "cache off: every outside open filtered: {k:?}");
    assert_eq!((k.cache_hits, k.cache_misses), (0, 0), "cache off: not used: {k:?}");
    assert_eq!((k.path_hits, k.path_misses), (0, 0), "cache off: no path cache: {k:?}");
    off.drain(|_| {}).unwrap();
    off.stop(|_| {}).unwrap();
}

/// Tries a file rename up to this many times: any process on the machine
/// that moves a directory meanwhile moves the generation too (or makes the
/// caches busy); a rule that bumps on every rename fails every try.
const TRIES: usize = 20;

/// `op` (file renames only) must leave the generation alone, and repeated
/// opens of a file whose directory's verdict was cached before `op` must all
/// hit afterwards. `warm` recreates the files and caches the verdict.
fn kept(w: &mut Watcher, name: &str, warm: &dyn Fn(), op: &dyn Fn(), probe: &Path) {
    let mut seen = Vec::new();
    for _ in 0..TRIES {
        warm();
        opens(probe, 3);
        w.drain(|_| {}).unwrap();
        let g0 = w.generation();
        op();
        let k0 = w.kernel_stats().unwrap();
        opens(probe, 10);
        let k1 = w.kernel_stats().unwrap();
        let g1 = w.generation();
        let (hits, misses) = (k1.cache_hits - k0.cache_hits, k1.cache_misses - k0.cache_misses);
        if g1 == g0 && (hits, misses) == (10, 0) {
            return;
        }
        seen.push(format!("generation {g0} -> {g1}, {hits} hits {misses} misses"));
    }
    panic!("{name}: the caches were not kept across a file rename in {TRIES} tries: {}", seen.join("; "));
}

/// A fresh tmpfs with w/ (watched) and out/a, out/b (not); this thread
/// pinned; a watcher of opens. The watcher goes before the mount and the pin.
fn renames_setup(tag: &str) -> (Watcher, Pinned, TmpMount) {
    let pin = Pinned::here();
    let m = TmpMount::new(tag);
    let (w, out) = (m.root.join("w"), m.root.join("out"));
    for d in [w.clone(), out.join("a"), out.join("b"), w.join("d")] {
        std::fs::create_dir_all(&d).unwrap();
    }
    std::fs::write(out.join("a/probe"), b"").unwrap();
    let watcher = start(&w, true, Resolution::Ringbuf);
    assert!(watcher.generation() > 0, "the generation is readable");
    (watcher, pin, m)
}

#[test]
fn file_renames_keep_the_caches() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _turn = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (mut watcher, _pin, m) = renames_setup("cache-file-renames");
    let (w, out) = (m.root.join("w"), m.root.join("out"));
    let probe = out.join("a/probe");

    // Outside (unwatched: verdicts) and inside the watched tree.
    let (a, b) = (out.join("a"), out.join("b"));
    let fresh = |ps: &[&Path]| ps.iter().for_each(|p| std::fs::write(p, b"").unwrap());
    kept(
        &mut watcher,
        "a file renamed within a directory",
        &|| fresh(&[a.join("f").as_path()]),
        &|| rename(&a.join("f"), &a.join("g")),
        &probe,
    );
    kept(
        &mut watcher,
        "a file renamed across directories",
        &|| fresh(&[a.join("f").as_path()]),
        &|| rename(&a.join("f"), &b.join("f")),
        &probe,
    );
    kept(
        &mut watcher,
        "a file renamed over another file",
        &|| fresh(&[a.join("f").as_path(), b.join("g").as_path()]),
        &|| rename(&a.join("f"), &b.join("g")),
        &probe,
    );
    let wd = w.join("d");
    kept(
        &mut watcher,
        "a watched file renamed within its directory",
        &|| fresh(&[wd.join("f").as_path()]),
        &|| rename(&wd.join("f"), &wd.join("g")),
        &probe,
    );
    let st = watcher.stop(|_| {}).unwrap();
    assert_eq!(st.kernel.drops(), 0, "{}", st.report());
}

/// Each moves or removes a directory: the generation must move (this
/// process's own change; others can only add to it), and the next open below
/// the moved directory, whose "unwatched" verdict was cached, is reported at
/// its new place. Every failing case is named, all at once.
#[test]
fn directory_changes_invalidate_the_caches() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _turn = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (mut watcher, _pin, m) = renames_setup("cache-dir-renames");
    let (w, out) = (m.root.join("w"), m.root.join("out"));
    let mut failures = Vec::new();
    let mut invalidates = |w: &mut Watcher, name: &str, setup: &dyn Fn(), op: &dyn Fn(), then: &Path| {
        setup();
        w.drain(|_| {}).unwrap();
        let g0 = w.generation();
        op();
        let g1 = w.generation();
        if g1 == g0 {
            failures.push(format!("{name}: the generation did not move ({g0})"));
        }
        opens(then, 1);
        let mut got = Vec::new();
        w.drain(|e| got.push(String::from_utf8_lossy(e.path).into_owned())).unwrap();
        if got != [then.to_string_lossy()] {
            failures.push(format!("{name}: the next open of {then:?} gave {got:?}"));
        }
    };
    let warmed = |d: &Path| {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("f"), b"").unwrap();
        opens(&d.join("f"), 3);
    };
    invalidates(
        &mut watcher,
        "a directory renamed",
        &|| warmed(&out.join("u")),
        &|| rename(&out.join("u"), &w.join("u")),
        &w.join("u/f"),
    );
    invalidates(
        &mut watcher,
        "a directory exchanged with a file (RENAME_EXCHANGE)",
        &|| {
            warmed(&out.join("x"));
            std::fs::write(w.join("xf"), b"").unwrap();
        },
        &|| exchange(&out.join("x"), &w.join("xf")),
        &w.join("xf/f"),
    );
    invalidates(
        &mut watcher,
        "a directory renamed over an empty directory",
        &|| {
            warmed(&out.join("o"));
            std::fs::create_dir(w.join("e")).unwrap();
        },
        &|| rename(&out.join("o"), &w.join("e")),
        &w.join("e/f"),
    );
    invalidates(
        &mut watcher,
        "rmdir",
        &|| std::fs::create_dir(out.join("r")).unwrap(),
        &|| {
            ok(unsafe { libc::rmdir(c(out.join("r")).as_ptr()) } as i64, "rmdir");
        },
        &w.join("e/f"),
    );
    let st = watcher.stop(|_| {}).unwrap();
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(st.kernel.drops(), 0, "{}", st.report());
}
