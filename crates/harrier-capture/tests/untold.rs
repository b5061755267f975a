//! Untold closes (bpf/include/untold.h) on live syscalls, in both attach
//! modes: the close of an fd whose open the kernel filter kept back is kept
//! back too, in a process the consumer follows; every fd user space was told
//! of, or could have learnt otherwise, still has its close sent. Sockets:
//! untold_sockets.rs.

mod common;

use common::{bpf_available, capture_followed, close, closes_sent, gettid, mode, nr, use_mode, TempDir};
use harrier_capture::kfilter::{Clause, KernelFilter, PathMatch, SyscallFilter};
use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use harrier_capture::{parse_syscalls, Config, UntoldFds};
use std::ffi::CString;
use test_case::test_case;

/// openat sent only below `keep`; closes of untold fds kept back.
fn config(keep: &str) -> Config {
    let mut cfg = Config::new(parse_syscalls("openat,close,dup2,pipe2").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.attach = mode();
    let below = Clause {
        need_success: true,
        paths: Some(vec![PathMatch::Prefix(format!("{keep}/").into_bytes())]),
        ..Clause::default()
    };
    let open = SyscallFilter { nr: nr("openat"), clauses: vec![below], drop_comms: vec![], untold: false };
    let close = SyscallFilter { nr: nr("close"), clauses: vec![], drop_comms: vec![], untold: true };
    cfg.kernel_filter = Some(KernelFilter { syscalls: vec![open, close] });
    cfg
}

fn open(path: &str) -> i32 {
    let p = CString::new(path).unwrap();
    let fd = unsafe { libc::openat(libc::AT_FDCWD, p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    assert!(fd >= 0, "open {path}");
    fd
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn the_close_of_an_fd_whose_open_was_kept_back_is_kept_back(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    let alone = common::alone();
    use_mode(mode);
    let dir = TempDir::new("untold");
    std::fs::create_dir_all(dir.path("keep")).unwrap();
    std::fs::write(dir.path("keep/k"), "k").unwrap();
    std::fs::write(dir.path("other"), "o").unwrap();
    let (kept, other) = (dir.path("keep/k"), dir.path("other"));
    let tid = gettid();
    let pid = std::process::id();
    let (mut held, mut sent) = (Vec::new(), Vec::new());
    let c = capture_followed(&alone, config(&dir.path("keep")), |untold| {
        // Kept back: an open no rule wants, then its close, also from another thread.
        let a = open(&other);
        assert!(untold.is_untold(pid, a as u32), "fd {a} is recorded as never told");
        close(a);
        assert!(!untold.is_untold(pid, a as u32), "its close clears it");
        held.push(a);
        let o = other.clone();
        let b = std::thread::spawn(move || open(&o)).join().unwrap();
        close(b);
        held.push(b);
        // Sent: the close of an fd user space was told of.
        let k = open(&kept);
        close(k);
        sent.push(k);
        // Sent: an untold fd that dup2 (sent) replaced with a told one.
        let (d, k) = (open(&other), open(&kept));
        assert_eq!(unsafe { libc::dup2(k, d) }, d);
        close(d);
        close(k);
        sent.extend([d, k]);
        // Sent: pipe2's fds come through user memory, so the record empties.
        let e = open(&other);
        let mut p = [0i32; 2];
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        close(e);
        close(p[0]);
        close(p[1]);
        sent.extend([e, p[0], p[1]]);
        // A process whose slot this one holds is not followed, nor can it
        // be forgotten in this one's place.
        let twin = pid + UntoldFds::SLOTS;
        assert!(!untold.follow(twin), "the slot is taken");
        untold.forget(twin);
        let g = open(&other);
        assert!(untold.is_untold(pid, g as u32), "still followed: fd {g}");
        close(g);
        held.push(g);
        // Sent: a process the consumer does not follow.
        untold.forget(pid);
        let f = open(&other);
        close(f);
        sent.push(f);
    });
    let got = closes_sent(&c, tid);
    assert_eq!(
        got,
        sent.iter().map(|&f| f as i64).collect::<Vec<_>>(),
        "the closes sent (held back: {held:?})"
    );
    let k = c.stats.kernel_total();
    assert!(k.filtered >= 2 * held.len() as u64, "opens and closes kept back are counted: {}", k.filtered);
    assert_eq!(
        c.stats.user.events + k.dropped() + k.filtered,
        k.events,
        "sent + dropped + filtered = produced"
    );
}
