//! The reader allocates nothing per event (the project's rule for hot
//! paths): once its buffers have grown to a batch's size, draining another
//! batch of the same size allocates 0 bytes, in every resolution mode. A
//! counting global allocator (this test binary's own) sees every allocation
//! the draining thread makes.

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_fswatch::Resolution;
#[global_allocator]
static A: harrier_alloc_count::Counting = harrier_alloc_count::Counting;

/// Bytes this thread has asked the allocator for.
fn asked() -> u64 {
    harrier_alloc_count::this_thread().bytes
}

/// Opens and closes every file once: one open event each.
fn open_all(files: &[std::ffi::CString]) {
    for f in files {
        let fd = ok(unsafe { libc::open(f.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) } as i64, "open");
        unsafe { libc::close(fd as i32) };
    }
}

#[test]
fn a_warm_reader_drains_events_without_allocating() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let m = TmpMount::new("alloc");
    let w = m.root.join("w");
    // Several directories deep, so fragments' joins climb a chain.
    let deep = w.join("a/b c/d/e");
    std::fs::create_dir_all(&deep).unwrap();
    const N: usize = 300;
    let files: Vec<_> = (0..N)
        .map(|i| {
            let p = deep.join(format!("f{i}"));
            std::fs::write(&p, b"").unwrap();
            c(&p)
        })
        .collect();
    for (name, res) in [
        ("ringbuf", Resolution::Ringbuf),
        ("single-fragment", Resolution::SingleFragment),
        ("fragments", Resolution::Fragments),
    ] {
        let mut watcher = watcher_in(&[&w], "open", true, res, true);
        let mut events = 0usize;
        let mut bytes_seen = 0usize;
        // Warm-up: the reader's arena and index grow to a batch's size. Twice
        // the rounds' opens: a batch the rounds drain (however a loaded machine
        // splits them) fits in what this one grew.
        open_all(&files);
        open_all(&files);
        watcher
            .drain(|e| {
                events += 1;
                bytes_seen += e.path.len();
            })
            .unwrap();
        assert_eq!(events, 2 * N, "{name}: warm-up batch");
        for round in 0..3 {
            open_all(&files);
            let (mut n, mut paths_ok) = (0usize, true);
            let before = asked();
            watcher
                .drain(|e| {
                    n += 1;
                    paths_ok &= e.path.starts_with(deep.as_os_str().as_encoded_bytes());
                })
                .unwrap();
            let allocated = asked() - before;
            assert_eq!(n, N, "{name}, round {round}: every open drained");
            assert!(paths_ok, "{name}, round {round}: a path outside {}", deep.display());
            assert_eq!(
                allocated, 0,
                "{name}, round {round}: {allocated} bytes allocated draining {N} events"
            );
        }
        let st = watcher.stop(|_| {}).unwrap();
        assert_eq!(st.kernel.drops(), 0, "{name}: {}", st.report());
        assert!(bytes_seen > 0);
    }
}
