//! Exact accounting and the watch filter's options: with the reader
//! stopped, every lost event is counted (produced = received + dropped);
//! --no-recursive sees a watched directory's entries but not deeper.

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_fswatch::{parse_events, Config, Watcher};
use std::path::Path;
use std::sync::Mutex;

/// The tests share the process (the pid filter sees both): one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn mkdir(p: &Path) {
    ok(unsafe { libc::mkdir(c(p).as_ptr(), 0o755) } as i64, "mkdir");
}

#[test]
fn drops_with_the_reader_stopped_are_counted_exactly() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = TmpMount::new("drops");
    let w = m.root.join("w");
    mkdir(&w);
    let cfg = Config {
        paths: vec![w.clone()],
        events: parse_events("mkdir").unwrap(),
        buffer_size: 64 << 10,
        pid: Some(std::process::id()),
        ..config()
    };
    let watcher = Watcher::start(&cfg).unwrap();
    // 2,000 mkdirs without draining: a 64 KiB ring holds a few dozen.
    const N: u64 = 2000;
    for i in 0..N {
        mkdir(&w.join(format!("d{i}")));
    }
    let mut received = Vec::new();
    let st = watcher.stop(|e| received.push(String::from_utf8_lossy(e.path).into_owned())).unwrap();
    let k = &st.kernel;
    assert_eq!(k.events, N, "every mkdir produced one event: {}", st.report());
    assert_eq!(st.received, received.len() as u64);
    assert_eq!(st.received + k.drops(), N, "received + dropped = produced: {}", st.report());
    assert!(k.drops_ring_full > 0, "the ring must have overflowed: {}", st.report());
    // What was received is exact and in time order (a ring that filled up
    // on one CPU may still take later events on another: gaps are allowed).
    let mut last = None;
    for p in &received {
        let n: u64 = p
            .strip_prefix(&format!("{}/d", w.display()))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unexpected path {p:?}"));
        assert!(last.is_none_or(|l| n > l), "{p} after d{last:?}");
        last = Some(n);
    }
}

#[test]
fn no_recursive_sees_entries_of_a_watched_directory_only() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = TmpMount::new("norec");
    let w = m.root.join("w");
    mkdir(&w);
    mkdir(&w.join("sub"));
    let mut watcher = watcher(&[&w], "mkdir", false);
    mkdir(&w.join("top"));
    mkdir(&w.join("sub/deeper"));
    let got: Vec<String> = drain(&mut watcher).into_iter().map(|s| s.path).collect();
    assert_eq!(got, [w.join("top").to_string_lossy()], "only the watched directory's own entry");
    let st = watcher.stop(|_| {}).unwrap();
    assert_eq!(st.kernel.filtered, 1, "{}", st.report());
}

#[test]
fn no_follow_forgets_a_file_moved_out() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = TmpMount::new("nofollow");
    let (w, out) = (m.root.join("w"), m.root.join("out"));
    mkdir(&w);
    mkdir(&out);
    let cfg = Config {
        paths: vec![w.clone()],
        events: parse_events("rename,setattr").unwrap(),
        follow: false,
        pid: Some(std::process::id()),
        ..config()
    };
    let mut watcher = Watcher::start(&cfg).unwrap();
    std::fs::create_dir(w.join("d")).unwrap();
    std::fs::rename(w.join("d"), out.join("d")).unwrap();
    ok(unsafe { libc::chmod(c(out.join("d")).as_ptr(), 0o700) } as i64, "chmod");
    let got: Vec<(String, String)> = drain(&mut watcher).into_iter().map(|s| (s.kind, s.path)).collect();
    assert_eq!(got, [("rename".to_string(), out.join("d").to_string_lossy().into_owned())]);
}

/// --follow (the default): a directory renamed out of the watched tree
/// stays watched, itself and what is below it (the kernel adds it to the
/// watched map and to the summary bitmap the climb tests first).
#[test]
fn follow_keeps_a_directory_moved_out() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = TmpMount::new("follow");
    let (w, out) = (m.root.join("w"), m.root.join("out"));
    mkdir(&w);
    mkdir(&out);
    std::fs::create_dir_all(out.join("other")).unwrap();
    let cfg = Config {
        paths: vec![w.clone()],
        events: parse_events("rename,setattr,mkdir").unwrap(),
        pid: Some(std::process::id()),
        ..config()
    };
    let mut watcher = Watcher::start(&cfg).unwrap();
    std::fs::create_dir(w.join("d")).unwrap();
    std::fs::rename(w.join("d"), out.join("d")).unwrap();
    ok(unsafe { libc::chmod(c(out.join("d")).as_ptr(), 0o700) } as i64, "chmod");
    mkdir(&out.join("d/below"));
    mkdir(&out.join("other/not"));
    let got: Vec<(String, String)> = drain(&mut watcher).into_iter().map(|s| (s.kind, s.path)).collect();
    let p = |s: &str| s.to_string();
    let o = |s: &str| out.join(s).to_string_lossy().into_owned();
    assert_eq!(
        got,
        [
            (p("mkdir"), w.join("d").to_string_lossy().into_owned()),
            (p("rename"), o("d")),
            (p("setattr"), o("d")),
            (p("mkdir"), o("d/below")),
        ]
    );
}
