//! The reader's directory cache (ringbuf and single-fragment modes;
//! bpf/include/fswatch/dirrefs.h, src/dirrefs.rs): once the reader has a
//! directory's path, events in it carry a reference and the leaf's name.
//! Every path stays exact: across a rename of the directory (the old
//! reference must not be used), and from a chrooted thread, whose view of
//! the same directory differs. Each test pins its thread: the kernel's path
//! cache, which teaches the reader, is per CPU.

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_fswatch::{Config, Resolution, Stats, Watcher};
use std::path::Path;
use std::sync::Mutex;

/// One watcher of this process at a time: the pid filter counts every thread's syscalls.
static LOCK: Mutex<()> = Mutex::new(());

const N: usize = 50;

fn start(w: &Path, resolution: Resolution, reader_cache: bool) -> Watcher {
    let cfg = Config {
        paths: vec![w.to_path_buf()],
        events: harrier_fswatch::parse_events("open").unwrap(),
        pid: Some(std::process::id()),
        resolution,
        reader_cache,
        ..config()
    };
    Watcher::start(&cfg).unwrap_or_else(|e| panic!("starting the watcher: {e:#}"))
}

fn touch(p: &Path) {
    let fd = ok(
        unsafe { libc::open(c(p).as_ptr(), libc::O_RDONLY | libc::O_CREAT | libc::O_CLOEXEC, 0o644) } as i64,
        "open",
    );
    unsafe { libc::close(fd as i32) };
}

/// N opens of `f`, each drained before the next (the reader learns the
/// directory from the first ones): the paths seen.
fn opens(watcher: &mut Watcher, f: &Path) -> Vec<String> {
    let mut seen = Vec::new();
    for _ in 0..N {
        touch(f);
        seen.extend(drain(watcher).into_iter().map(|s| s.path));
    }
    seen
}

fn stats(w: &Watcher) -> Stats {
    w.stats().unwrap()
}

#[test]
fn repeated_opens_refer_to_the_readers_directory_and_a_renamed_one_is_followed() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _turn = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _pin = Pinned::here();
    for (tag, mode) in [("dirrefs-r", Resolution::Ringbuf), ("dirrefs-s", Resolution::SingleFragment)] {
        for reader_cache in [true, false] {
            let m = TmpMount::new(tag);
            let w = m.root.join("w");
            std::fs::create_dir_all(w.join("a/deeper")).unwrap();
            let mut watcher = start(&w, mode, reader_cache);
            let what = format!("{mode:?}, reader cache {reader_cache}");

            let before = w.join("a/deeper/f");
            let want = before.to_string_lossy().into_owned();
            assert_eq!(opens(&mut watcher, &before), vec![want; N], "{what}");
            let st = stats(&watcher);
            if reader_cache {
                // Any process on the machine that moves a directory sends the
                // next event back to a whole path: at least half, not all.
                assert!(st.kernel.dir_refs as usize >= N / 2, "{what}: {}", st.report());
                assert!(st.dir_cache.taught >= 1 && st.dir_cache.kept >= 1, "{what}: {}", st.report());
                if mode == Resolution::Ringbuf {
                    // A reference and "/f" instead of the whole path.
                    assert!(
                        st.bytes < (N * (100 + before.as_os_str().len())) as u64,
                        "{what}: {}",
                        st.report()
                    );
                }
            } else {
                assert_eq!((st.kernel.dir_refs, st.dir_cache.taught), (0, 0), "{what}: {}", st.report());
            }

            // The directory's parent renamed: the reader's slot for a/deeper
            // holds the old path; no event may use it.
            rename(&w.join("a"), &w.join("b"));
            let after = w.join("b/deeper/f");
            let want = after.to_string_lossy().into_owned();
            assert_eq!(opens(&mut watcher, &after), vec![want; N], "{what}: the new path, never the old one");
            let st2 = watcher.stop(|_| {}).unwrap();
            assert_eq!((st2.paths_lost, st2.kernel.drops()), (0, 0), "{what}: {}", st2.report());
            if reader_cache {
                assert!(
                    st2.kernel.dir_refs as usize >= st.kernel.dir_refs as usize + N / 2,
                    "{what}: {}",
                    st2.report()
                );
                assert!(st2.dir_cache.taught > st.dir_cache.taught, "{what}: taught again: {}", st2.report());
            }
        }
    }
}

#[test]
fn a_chrooted_thread_gets_its_own_view_of_a_directory_the_reader_knows() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _turn = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _pin = Pinned::here();
    let m = TmpMount::new("dirrefs-chroot");
    let j = m.root.join("w/j");
    std::fs::create_dir_all(j.join("x")).unwrap();
    let mut watcher = start(&j, Resolution::Ringbuf, true);
    let full = j.join("x/f");
    let want = full.to_string_lossy().into_owned();
    assert_eq!(opens(&mut watcher, &full), vec![want.clone(); N]);
    assert!(stats(&watcher).kernel.dir_refs > 0, "x is known to the reader");

    let jail = c(&j);
    std::thread::spawn(move || unsafe {
        // This thread only: its own root (the process keeps "/").
        ok(libc::unshare(libc::CLONE_FS) as i64, "unshare(CLONE_FS)");
        ok(libc::chroot(jail.as_ptr()) as i64, "chroot");
        ok(libc::chdir(c("/").as_ptr()) as i64, "chdir");
        for _ in 0..3 {
            touch(Path::new("/x/g"));
        }
    })
    .join()
    .expect("the chrooted thread failed (its message is above)");
    let seen: Vec<String> = drain(&mut watcher).into_iter().map(|s| s.path).collect();
    assert_eq!(seen, ["/x/g"; 3], "the chrooted view of x, not the reader's");

    touch(&full);
    let seen: Vec<String> = drain(&mut watcher).into_iter().map(|s| s.path).collect();
    assert_eq!(seen, [want], "the process's view, not the chrooted one");
    let st = watcher.stop(|_| {}).unwrap();
    assert_eq!(st.paths_lost, 0, "{}", st.report());
}
