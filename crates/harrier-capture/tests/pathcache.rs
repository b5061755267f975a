//! The path cache (bpf/include/tree/dircache.h): walks that stop at a
//! cached directory name what the kernel's tree says now, after renames,
//! removals and mount moves, and while a thread renames as fast as it can.
//! Where the kernel lacks the hooks that keep it exact the cache is off, and
//! these tests check the plain walk the same way.

mod common;

use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use harrier_capture::{kernel, Stats};
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use test_case::test_case;

use common::*;

/// Deep enough that the walk looks the cache up (it walks two names first,
/// and does not look up within two names of the root).
const DEEP: &str = "a/b/c/d/e";

/// The cache is on where the kernel has its hooks, and off elsewhere; with
/// `used`, it was looked up and hit (a test of the cache that ran without
/// it would prove nothing). Only a test with many opens asks: renames
/// anywhere on the machine (other tests, cargo) briefly pause the cache.
fn check_cache(s: &Stats, used: bool) {
    let k = s.kernel_total();
    let hooks = [kernel::FSWATCH_CTIME, kernel::FSWATCH_FENTRY].iter().any(|f| f.present() == Some(true));
    assert_eq!(s.dir_cache.starts_with("path cache: on"), hooks, "{}", s.dir_cache);
    if !hooks {
        assert_eq!((k.dir_hits, k.dir_misses), (0, 0));
    } else if used {
        assert!(k.dir_hits > 0 && k.dir_misses > 0, "hits {} misses {}", k.dir_hits, k.dir_misses);
    }
}

fn open_close(p: &CString) -> i64 {
    let fd = sys(libc::SYS_openat, &[AT_FDCWD64, cptr(p), 0, 0]);
    assert!(fd >= 0, "open {p:?}: {fd}");
    unsafe { libc::close(fd as i32) };
    fd
}

/// The paths of this test's own opens (flags 0: open_close's, not the file
/// creations of std::fs), in order.
fn read_opens(c: &Captured, tid: u32) -> Vec<String> {
    named_in_order(c, tid, "openat")
        .iter()
        .filter(|e| int(e, "flags") == 0)
        .map(|e| text(e, "fullpath"))
        .collect()
}

fn rename(from: &str, to: &str) {
    std::fs::rename(from, to).unwrap_or_else(|e| panic!("rename {from} {to}: {e}"));
}

/// Opens of one file, its ancestor renamed between them, and back: each
/// named as the tree was at that open.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn a_renamed_ancestor_is_named_anew(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("dc-rename");
    std::fs::create_dir_all(d.path(DEEP)).unwrap();
    std::fs::write(d.path(&format!("{DEEP}/f")), "x").unwrap();
    let (old, new) = (d.path(&format!("{DEEP}/f")), d.path(&format!("z/{}/f", &DEEP[2..])));
    let (a, z) = (d.path("a"), d.path("z"));
    let c = capture("openat", || {
        for _ in 0..3 {
            open_close(&cstr(&old));
        }
        rename(&a, &z);
        for _ in 0..3 {
            open_close(&cstr(&new));
        }
        rename(&z, &a);
        open_close(&cstr(&old));
    });
    let want = [&old, &old, &old, &new, &new, &new, &old].map(String::clone);
    let got: Vec<String> = exactly(&c, "openat", want.len()).iter().map(|e| text(e, "fullpath")).collect();
    assert_eq!(got, want);
    check_cache(&c.stats, false);
}

/// Directories made, cached and removed in turn, each under a new name: on
/// ext4 a new one often takes the inode number of the one removed before
/// it, which the cache's key holds. Each one's file is named by its path.
#[test]
fn a_removed_directory_is_forgotten() {
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("dc-rmdir");
    // The walk looks up the directory two names above the file: x{i}.
    let dirs: Vec<String> = (0..8).map(|i| d.path(&format!("{DEEP}/x{i}"))).collect();
    let files: Vec<String> = dirs.iter().map(|x| format!("{x}/g/f")).collect();
    let c = capture("openat", || {
        for (x, f) in dirs.iter().zip(&files) {
            std::fs::create_dir_all(format!("{x}/g")).unwrap();
            std::fs::write(f, "x").unwrap();
            open_close(&cstr(f));
            open_close(&cstr(f));
            std::fs::remove_dir_all(x).unwrap();
        }
    });
    let want: Vec<String> = files.iter().flat_map(|f| [f.clone(), f.clone()]).collect();
    assert_eq!(read_opens(&c, gettid()), want);
    check_cache(&c.stats, false);
}

/// A mount moved (MS_MOVE) renames everything in it without a rename: a
/// thread in a private mount namespace opens a deep file in a tmpfs, moves
/// the tmpfs, opens it again.
#[test]
fn a_moved_mount_is_named_at_its_new_place() {
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("dc-move");
    let (m1, m2) = (d.path("m1"), d.path("m2"));
    std::fs::create_dir(&m1).unwrap();
    std::fs::create_dir(&m2).unwrap();
    let (f1, f2) = (format!("{m1}/{DEEP}/f"), format!("{m2}/{DEEP}/f"));
    let tid = std::sync::Mutex::new(0);
    let c = capture("openat", || {
        std::thread::scope(|s| {
            s.spawn(|| unsafe {
                // This thread only: its own mount namespace, torn down with it.
                assert_eq!(libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS), 0, "unshare");
                let root = cstr("/");
                let none = std::ptr::null();
                assert_eq!(
                    libc::mount(none, root.as_ptr(), none, libc::MS_REC | libc::MS_PRIVATE, none.cast()),
                    0
                );
                let (t1, t2, tmpfs) = (cstr(&m1), cstr(&m2), cstr("tmpfs"));
                assert_eq!(libc::mount(tmpfs.as_ptr(), t1.as_ptr(), tmpfs.as_ptr(), 0, none.cast()), 0);
                std::fs::create_dir_all(format!("{m1}/{DEEP}")).unwrap();
                std::fs::write(&f1, "x").unwrap();
                open_close(&cstr(&f1));
                open_close(&cstr(&f1));
                assert_eq!(
                    libc::mount(t1.as_ptr(), t2.as_ptr(), none, libc::MS_MOVE, none.cast()),
                    0,
                    "MS_MOVE"
                );
                open_close(&cstr(&f2));
                open_close(&cstr(&f2));
                *tid.lock().unwrap() = gettid();
            });
        });
    });
    let tid = tid.into_inner().unwrap();
    let got = read_opens(&c, tid);
    assert_eq!(got, [&f1, &f1, &f2, &f2].map(String::clone));
    check_cache(&c.stats, false);
}

/// One thread renames an ancestor back and forth, pausing briefly, while
/// another opens the same file through a descriptor of a directory below
/// it (so every open succeeds): each open that no rename overlapped is
/// named as the tree was, and every open has one of the two names. The
/// opener is chrooted into the test's directory: the cache keeps only paths
/// whose every directory is on a local file system, and the guests' root is
/// the host's, shared over 9p.
#[test]
fn opens_racing_a_rename_storm_are_named_as_the_tree_was() {
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("dc-storm");
    std::fs::create_dir_all(d.path(DEEP)).unwrap();
    std::fs::write(d.path(&format!("{DEEP}/f")), "x").unwrap();
    let names = [format!("/{DEEP}/f"), format!("/z/{}/f", &DEEP[2..])];
    let (a, z) = (d.path("a"), d.path("z"));
    let dirfd = unsafe { libc::open(cstr(&d.path(DEEP)).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    assert!(dirfd >= 0);
    // Renames completed (even: the first name), and whether one is under way.
    let (renames, busy, stop) = (AtomicU64::new(0), AtomicBool::new(false), AtomicBool::new(false));
    let (rel, jail) = (cstr("f"), cstr(d.0.to_str().unwrap()));
    let mut opener = (0, Vec::new());
    let c = capture("openat", || {
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(SeqCst) {
                    let n = renames.load(SeqCst);
                    busy.store(true, SeqCst);
                    if n % 2 == 0 {
                        rename(&a, &z)
                    } else {
                        rename(&z, &a)
                    }
                    renames.store(n + 1, SeqCst);
                    busy.store(false, SeqCst);
                    // Room for opens that no rename overlaps.
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
            });
            let o = s.spawn(|| {
                // This thread only: its own root (the process keeps "/").
                unsafe {
                    assert_eq!(libc::unshare(libc::CLONE_FS), 0, "unshare(CLONE_FS)");
                    assert_eq!(libc::chroot(jail.as_ptr()), 0, "chroot");
                }
                let mut windows = Vec::new();
                for _ in 0..20_000 {
                    let before = (renames.load(SeqCst), busy.load(SeqCst));
                    let fd = sys(libc::SYS_openat, &[dirfd as i64, cptr(&rel), 0, 0]);
                    let after = (renames.load(SeqCst), busy.load(SeqCst));
                    assert!(fd >= 0, "openat: {fd}");
                    unsafe { libc::close(fd as i32) };
                    windows.push((before == after && !before.1).then_some(before.0));
                }
                stop.store(true, SeqCst);
                (gettid(), windows)
            });
            opener = o.join().unwrap();
        });
    });
    unsafe { libc::close(dirfd) };
    if renames.load(SeqCst) % 2 == 1 {
        rename(&z, &a);
    }
    let (tid, windows) = opener;
    let opens = named_in_order(&c, tid, "openat");
    assert_eq!(opens.len(), windows.len(), "one event per open");
    let mut exact = 0;
    for (i, (e, w)) in opens.iter().zip(&windows).enumerate() {
        let got = text(e, "fullpath");
        assert!(names.contains(&got), "open {i}: {got}");
        if let Some(n) = w {
            assert_eq!(got, names[(*n % 2) as usize], "open {i}, after {n} renames and before the next");
            exact += 1;
        }
    }
    assert!(
        renames.load(SeqCst) > 10 && exact > 100,
        "{} renames, {exact} opens between two",
        renames.load(SeqCst)
    );
    check_cache(&c.stats, true);
}
