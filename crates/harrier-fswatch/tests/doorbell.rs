//! The reader's doorbell and 8-page rings: a burst past a small ring's wake level
//! wakes a reader waiting with a long timeout (it would otherwise sleep
//! through it), and every event of the burst is then drained, none lost;
//! rings of 8 pages work end to end in every resolution mode.

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_fswatch::{parse_events, wake_level, Config, Resolution, Watcher, Woke, MIN_BUFFER, RING_SLACK};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// The tests share the process (the pid filter sees both): one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn mkdir(p: &Path) {
    ok(unsafe { libc::mkdir(c(p).as_ptr(), 0o755) } as i64, "mkdir");
}

fn small(w: &Path, events: &str, resolution: Resolution) -> Watcher {
    let cfg = Config {
        paths: vec![w.to_path_buf()],
        events: parse_events(events).unwrap(),
        resolution,
        buffer_size: MIN_BUFFER,
        pid: Some(std::process::id()),
        ..config()
    };
    Watcher::start(&cfg).unwrap_or_else(|e| panic!("starting a {resolution:?} watcher on 8 pages: {e:#}"))
}

/// 140 mkdirs of ~130-byte records (ringbuf; single-fragment: 96-byte
/// events and ~64-byte paths) pass the wake level of a 32 KiB ring (a
/// quarter: 6,122 bytes) and stay below what it holds (24,488): checked
/// below on the bytes.
const BURST: usize = 140;

#[test]
fn a_burst_past_the_wake_level_rings_the_doorbell() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (tag, res) in [("bell-r", Resolution::Ringbuf), ("bell-s", Resolution::SingleFragment)] {
        let m = TmpMount::new(tag);
        let w = m.root.join("w");
        mkdir(&w);
        let mut watcher = small(&w, "mkdir", res);
        assert_eq!(watcher.wait(Duration::from_millis(1)).unwrap(), Woke::Timeout, "{res:?}: nothing yet");
        let want: Vec<String> =
            (0..BURST).map(|i| w.join(format!("d{i:03}")).to_string_lossy().into_owned()).collect();
        {
            let _pin = Pinned::here();
            for p in &want {
                mkdir(Path::new(p));
            }
        }
        // Without the doorbell this sleeps the whole 30 s and says Timeout.
        let woke = watcher.wait(Duration::from_secs(30)).unwrap();
        let got: Vec<String> = drain(&mut watcher).into_iter().map(|s| s.path).collect();
        let st = watcher.stop(|_| {}).unwrap();
        assert_eq!(woke, Woke::Doorbell, "{res:?}: {}", st.report());
        assert_eq!(got, want, "{res:?}: every mkdir of the burst, in order");
        assert_eq!(st.kernel.drops(), 0, "{res:?}: {}", st.report());
        assert_eq!(st.paths_lost, 0, "{res:?}: {}", st.report());
        assert!(st.wakeups >= 1, "{res:?}: {}", st.report());
        // The burst did pass the wake level, and no more than the ring holds.
        let level = wake_level(MIN_BUFFER);
        let holds = (MIN_BUFFER - RING_SLACK) as u64;
        assert!(st.bytes >= level && st.bytes <= holds, "{res:?}: {} bytes, level {level}", st.bytes);
    }
}

#[test]
fn below_the_wake_level_the_reader_sleeps_until_its_timeout() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = TmpMount::new("quiet");
    let w = m.root.join("w");
    mkdir(&w);
    let mut watcher = small(&w, "mkdir", Resolution::Ringbuf);
    for i in 0..5 {
        mkdir(&w.join(format!("d{i}")));
    }
    assert_eq!(
        watcher.wait(Duration::from_millis(20)).unwrap(),
        Woke::Timeout,
        "5 events are far below the wake level"
    );
    assert_eq!(drain(&mut watcher).len(), 5);
    assert_eq!(watcher.stop(|_| {}).unwrap().wakeups, 0);
}

/// Every resolution mode on 8-page rings: the records fit (fswatch's own
/// slack, ~8 KiB, not the capture engine's ~24 KiB) and come out exact.
#[test]
fn eight_page_rings_work_end_to_end() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (tag, res) in [
        ("eight-r", Resolution::Ringbuf),
        ("eight-s", Resolution::SingleFragment),
        ("eight-f", Resolution::Fragments),
    ] {
        let m = TmpMount::new(tag);
        let w = m.root.join("w");
        mkdir(&w);
        let mut watcher = small(&w, "mkdir,rename,unlink,rmdir", res);
        mkdir(&w.join("a"));
        mkdir(&w.join("b"));
        std::fs::write(w.join("a/f"), b"x").unwrap();
        std::fs::rename(w.join("a/f"), w.join("b/g")).unwrap();
        std::fs::remove_file(w.join("b/g")).unwrap();
        std::fs::remove_dir(w.join("a")).unwrap();
        let got: Vec<(String, String)> = drain(&mut watcher).into_iter().map(|s| (s.kind, s.path)).collect();
        let p = |s: &str| w.join(s).to_string_lossy().into_owned();
        let k = |s: &str| s.to_string();
        assert_eq!(
            got,
            [
                (k("mkdir"), p("a")),
                (k("mkdir"), p("b")),
                (k("rename"), p("b/g")),
                (k("unlink"), p("b/g")),
                (k("rmdir"), p("a"))
            ],
            "{res:?}"
        );
        let st = watcher.stop(|_| {}).unwrap();
        assert_eq!(st.kernel.drops(), 0, "{res:?}: {}", st.report());
    }
}
