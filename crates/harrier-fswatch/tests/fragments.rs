//! fragments resolution across a directory rename: FSProbe's known bug is
//! that cached descendants keep the old name. Here a child touched after
//! its parent was renamed gets the new path, and an event from before the
//! rename, read after it, is flagged unresolved rather than given a path it
//! never had. With both caches warm (the kernel's chain cache, the reader's
//! entries: bpf/include/fswatch/chain.h, src/fragmap.rs) too, and across a
//! chrooted thread that writes the same directories as a different chain.
//! The tests share the process (the pid filter, the per-CPU caches): they
//! run one at a time, each pinned to one CPU.

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_fswatch::wire::F_UNRESOLVED;
use harrier_fswatch::{Config, Resolution, Watcher};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

fn touch(p: &Path) {
    let fd = ok(
        unsafe { libc::open(c(p).as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644) } as i64,
        "open",
    );
    unsafe { libc::close(fd as i32) };
}

static SERIAL: Mutex<()> = Mutex::new(());

/// One test at a time, on the CPU it started on: the kernel's caches are
/// per CPU, so an event meets the entries the events before it left.
struct Turn {
    _pin: Pinned,
    _serial: MutexGuard<'static, ()>,
}

fn pinned() -> Turn {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Turn { _pin: Pinned::here(), _serial: serial }
}

fn paths(got: &[Seen]) -> Vec<String> {
    got.iter().map(|s| s.path.clone()).collect()
}

#[test]
fn a_renamed_parent_is_followed_and_older_events_are_not_misnamed() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _pin = pinned();
    let m = TmpMount::new("fragments");
    let w = m.root.join("w");
    std::fs::create_dir(&w).unwrap();
    let mut watcher = watcher_in(&[&w], "open,rename", true, Resolution::Fragments, true);
    std::fs::create_dir(w.join("p")).unwrap();
    touch(&w.join("p/c0"));
    let got = drain(&mut watcher);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].path, w.join("p/c0").to_string_lossy(), "{got:?}");

    // c1's event stays unread while its directory is renamed and then
    // walked again under its new name.
    touch(&w.join("p/c1"));
    ok(unsafe { libc::rename(c(w.join("p")).as_ptr(), c(w.join("q")).as_ptr()) } as i64, "rename");
    touch(&w.join("q/c2"));
    let got = drain(&mut watcher);
    let p = |s: &str| w.join(s).to_string_lossy().into_owned();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0].kind, "open");
    assert!(
        got[0].path.is_empty() && got[0].flags & F_UNRESOLVED != 0,
        "the event from before the rename must be flagged, not renamed: {:?}",
        got[0]
    );
    assert_eq!(
        (got[1].kind.as_str(), got[1].path.clone(), got[1].source.clone()),
        ("rename", p("q"), Some(p("p")))
    );
    assert_eq!((got[2].kind.as_str(), got[2].path.clone()), ("open", p("q/c2")), "the child follows");
    assert_eq!(got[2].flags & F_UNRESOLVED, 0, "{:?}", got[2]);

    // Read promptly, an event under the renamed directory is exact.
    touch(&w.join("q/c3"));
    let got = drain(&mut watcher);
    assert_eq!(got.iter().map(|s| s.path.clone()).collect::<Vec<_>>(), [p("q/c3")]);
    let st = watcher.stop(|_| {}).unwrap();
    assert_eq!((st.paths_stale, st.paths_lost), (1, 0), "{}", st.report());
}

#[test]
fn a_renamed_directory_gets_its_new_path_with_both_caches_warm() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _pin = pinned();
    let m = TmpMount::new("fragments-warm");
    let w = m.root.join("w");
    std::fs::create_dir_all(w.join("p/d")).unwrap();
    let mut watcher = watcher_in(&[&w], "open,rename", true, Resolution::Fragments, true);
    let p = |s: &str| w.join(s).to_string_lossy().into_owned();
    // Warm: the first walk writes the fragments, the second stores a lasting
    // chain entry, the rest are decided by it; the reader keeps the entries.
    for _ in 0..20 {
        touch(&w.join("p/d/f"));
    }
    assert_eq!(paths(&drain(&mut watcher)), vec![p("p/d/f"); 20]);
    let k = watcher.kernel_stats().unwrap();
    assert!(k.path_hits > 0, "the chain cache decides repeated events: {k:?}");
    let cold = watcher.stats().unwrap();
    for _ in 0..5 {
        touch(&w.join("p/d/f"));
    }
    assert_eq!(paths(&drain(&mut watcher)), vec![p("p/d/f"); 5]);
    let warm = watcher.stats().unwrap();
    assert_eq!(warm.frag_lookups, cold.frag_lookups, "a warm join makes no syscall: {warm:?}");

    // d's chain and every entry of it are cached: the rename must reach the
    // event below it (the generation makes the kernel climb and rewrite p's
    // fragment; the write count makes the reader drop its copy).
    rename(&w.join("p"), &w.join("q"));
    touch(&w.join("q/d/f"));
    let got = drain(&mut watcher);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        (got[0].kind.as_str(), got[0].path.clone(), got[0].source.clone()),
        ("rename", p("q"), Some(p("p")))
    );
    assert_eq!(
        (got[1].kind.as_str(), got[1].path.clone()),
        ("open", p("q/d/f")),
        "the new path, not the cached one"
    );
    assert_eq!(got[1].flags & F_UNRESOLVED, 0, "{:?}", got[1]);
    let st = watcher.stop(|_| {}).unwrap();
    assert!(st.frag_flushes > warm.frag_flushes, "the reader emptied its cache: {st:?}");
    assert_eq!((st.paths_stale, st.paths_lost), (0, 0), "{}", st.report());
}

/// A thread chrooted into a watched directory sees it as "/": its walk
/// writes that directory as a top fragment, which other tasks' cached chains
/// pass through. Neither the kernel's chain cache nor the reader's entries
/// may then give either view to the other.
#[test]
fn a_chrooted_thread_and_the_caches_keep_their_own_views() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _pin = pinned();
    let m = TmpMount::new("fragments-chroot");
    let j = m.root.join("w/j");
    std::fs::create_dir_all(j.join("x")).unwrap();
    // The chrooted thread works in y: x's chain entry stays the process's.
    std::fs::create_dir_all(j.join("y")).unwrap();
    let mut watcher = watcher_in(&[&j], "open", true, Resolution::Fragments, true);
    let full = j.join("x/f").to_string_lossy().into_owned();
    for _ in 0..20 {
        touch(&j.join("x/f"));
    }
    assert_eq!(paths(&drain(&mut watcher)), vec![full.clone(); 20]);
    assert!(watcher.kernel_stats().unwrap().path_hits > 0, "x's chain is cached");

    let jail = c(&j);
    std::thread::spawn(move || unsafe {
        // This thread only: its own root (the process keeps "/").
        ok(libc::unshare(libc::CLONE_FS) as i64, "unshare(CLONE_FS)");
        ok(libc::chroot(jail.as_ptr()) as i64, "chroot");
        ok(libc::chdir(c("/").as_ptr()) as i64, "chdir");
        touch(Path::new("/y/g"));
    })
    .join()
    .expect("the chrooted thread failed (its message is above)");
    assert_eq!(paths(&drain(&mut watcher)), ["/y/g"], "the chrooted view, not the cached one");

    touch(&j.join("x/f"));
    assert_eq!(paths(&drain(&mut watcher)), [full], "the process's view, not the chrooted one");
    let st = watcher.stop(|_| {}).unwrap();
    assert_eq!((st.paths_stale, st.paths_lost), (0, 0), "{}", st.report());
}

#[test]
fn the_chain_cache_decides_repeated_events_and_is_off_with_the_verdict_cache() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _pin = pinned();
    let m = TmpMount::new("fragments-hits");
    let w = m.root.join("w");
    let deep = (0..12).fold(w.clone(), |p, i| p.join(format!("d{i}")));
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::create_dir(w.join("s1")).unwrap();
    let file = deep.join("f");
    std::fs::write(&file, b"").unwrap();
    const N: u64 = 200;
    for verdict_cache in [true, false] {
        let cfg = Config {
            paths: vec![w.clone()],
            events: harrier_fswatch::parse_events("open").unwrap(),
            pid: Some(std::process::id()),
            resolution: Resolution::Fragments,
            verdict_cache,
            ..config()
        };
        let mut watcher = Watcher::start(&cfg).unwrap_or_else(|e| panic!("starting the watcher: {e:#}"));
        for _ in 0..N {
            touch(&file);
        }
        let want = file.to_string_lossy().into_owned();
        assert_eq!(paths(&drain(&mut watcher)), vec![want.clone(); N as usize], "cache {verdict_cache}");
        let k = watcher.kernel_stats().unwrap();
        if !verdict_cache {
            assert_eq!((k.path_hits, k.path_misses), (0, 0), "off: the chain cache is not used: {k:?}");
            watcher.stop(|_| {}).unwrap();
            continue;
        }
        assert_eq!(k.path_hits + k.path_misses, N, "one chain lookup per event: {k:?}");
        // Misses: the first two, and any event after a directory renamed
        // anywhere on the machine (the generation): far fewer than the events.
        assert!(k.path_hits > N / 2, "the chain cache decides repeated events: {k:?}");
        // A directory renamed in the watched tree: the next event climbs again.
        rename(&w.join("s1"), &w.join("s2"));
        touch(&file);
        assert_eq!(paths(&drain(&mut watcher)), [want]);
        let after = watcher.kernel_stats().unwrap();
        assert_eq!(after.path_misses, k.path_misses + 1, "a rename invalidates the chains: {after:?}");
        watcher.stop(|_| {}).unwrap();
    }
}
