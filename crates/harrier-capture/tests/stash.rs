//! Entry copies' per-thread stash slots (bpf/capture.bpf.c, stash_slots): a
//! thread whose slot another holds copies into its task storage instead,
//! exactly as well, and a thread frees its slot when it exits.

mod common;

use common::{bpf_available, gettid, Captured};
use harrier_capture::testing::slack;
use harrier_capture::{parse_syscalls, AttachMode, Config, Session};
use std::cell::RefCell;
use std::ffi::CString;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn open_close(path: &CString) {
    let fd = unsafe { libc::openat(libc::AT_FDCWD, path.as_ptr(), libc::O_RDONLY) };
    assert!(fd >= 0, "opening {path:?}");
    unsafe { libc::close(fd) };
}

#[test]
fn a_thread_whose_slot_is_held_copies_into_task_storage_and_exits_free_it() {
    common::use_mode(AttachMode::PerSyscall);
    if !bpf_available() {
        return;
    }
    const OPENS: usize = 200;
    let dir = common::TempDir::new("stash");
    std::fs::write(dir.path("f"), "f").unwrap();
    let path = CString::new(dir.path("f")).unwrap();
    let mut cfg = Config::new(parse_syscalls("openat").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.attach = AttachMode::PerSyscall;
    cfg.stash_slots = Some(1);
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = events.clone();
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec()))).unwrap();

    // The holder's first open takes the one slot; it keeps it while it lives.
    let (claimed_tx, claimed_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let p = path.clone();
    let holder = std::thread::spawn(move || {
        open_close(&p);
        claimed_tx.send(gettid()).unwrap();
        let _ = go_rx.recv();
    });
    let holder_tid = claimed_rx.recv().unwrap();
    let owner = s.stash_slot_owner(0).unwrap();
    let p = path.clone();
    let opener = std::thread::spawn(move || {
        for _ in 0..OPENS {
            open_close(&p);
        }
        gettid()
    });
    let opener_tid = opener.join().unwrap();
    go_tx.send(()).unwrap();
    holder.join().unwrap();
    // The slot is freed in sched_process_exit, which may come just after join.
    let deadline = Instant::now() + slack(Duration::from_secs(5));
    let mut after = s.stash_slot_owner(0).unwrap();
    while after == holder_tid as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        after = s.stash_slot_owner(0).unwrap();
    }
    s.drain().unwrap();
    let stats = s.stop().unwrap();
    let c = Captured { events: Rc::try_unwrap(events).unwrap().into_inner(), stats };

    // Another thread of this test binary may have come first: the opener
    // still never held it.
    assert!(owner != 0 && owner != opener_tid as u64, "the slot was held ({owner}), not by the opener");
    let k = c.stats.kernel_total();
    assert!(k.stash_in_task >= OPENS as u64, "copies in task storage: {}", k.stash_in_task);
    let opens = c.named(opener_tid, "openat");
    assert_eq!(opens.len(), OPENS, "one event per open");
    let want = path.as_bytes();
    assert!(opens
        .iter()
        .all(|e| !e.header.args_at_exit && e.param("path").unwrap().as_bytes() == Some(want)));
    if owner == holder_tid as u64 {
        assert_ne!(after, owner, "the holder's exit freed its slot");
    }
}

/// A thread that execs takes its leader's tid (de_thread): the slot of the
/// tid it had is freed at the exec, not left to a tid that is gone.
#[test]
fn a_thread_that_execs_frees_the_slot_of_its_old_tid() {
    common::use_mode(AttachMode::PerSyscall);
    if !bpf_available() {
        return;
    }
    use std::io::{BufRead, Write};
    // Once told, the thread opens a file (taking its slot) and says its tid;
    // told again, it execs.
    const SCRIPT: &str = "import os, sys, threading\n\
        def run():\n    sys.stdin.readline()\n    open('/proc/self/stat').close()\n    \
        print(threading.get_native_id(), flush=True)\n    sys.stdin.readline()\n    \
        os.execv('/bin/true', ['true'])\n\
        threading.Thread(target=run).start()\nthreading.Event().wait()\n";
    let mut child = std::process::Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    // Only the child's threads: no other thread can take the slot first.
    let mut cfg = Config::new(parse_syscalls("openat").unwrap());
    cfg.attach = AttachMode::PerSyscall;
    cfg.pid = Some(child.id());
    let s = Session::start(&cfg, Box::new(|_| {})).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"open\n").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let tid: u32 = line.trim().parse().expect("the thread's tid");
    let slot = tid & (harrier_capture::STASH_SLOTS - 1);
    let before = s.stash_slot_owner(slot).unwrap();
    stdin.write_all(b"exec\n").unwrap();
    assert!(child.wait().unwrap().success(), "the thread's exec ran /bin/true");
    let after = s.stash_slot_owner(slot).unwrap();
    s.stop().unwrap();
    assert_eq!(before, tid as u64, "the thread's open took its slot");
    assert_ne!(after, tid as u64, "its exec freed it");
}
