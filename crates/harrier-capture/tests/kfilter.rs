//! The kernel-side filter (bpf/include/kfilter.h) on live syscalls, in both
//! attach modes: what it keeps back is never sent and always counted.

mod common;

use common::{bpf_available, capture_with, gettid, use_mode};
use harrier_capture::kfilter::{Clause, KernelFilter, PathMatch, SyscallFilter};
use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use harrier_capture::{parse_syscalls, Config};
use std::ffi::CString;
use test_case::test_case;

fn nr(name: &str) -> u32 {
    harrier_schema::syscall_by_name(name).unwrap().nr
}

/// A capture of `syscalls` by this process, with `filters` as its kernel filter.
fn filtered(syscalls: &str, filters: Vec<SyscallFilter>) -> Config {
    let mut cfg = Config::new(parse_syscalls(syscalls).unwrap());
    cfg.pid = Some(std::process::id());
    cfg.kernel_filter = Some(KernelFilter { syscalls: filters });
    cfg
}

fn open_at(path: &str, flags: i32) -> i32 {
    let p = CString::new(path).unwrap();
    let fd = unsafe { libc::openat(libc::AT_FDCWD, p.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
    if fd >= 0 {
        unsafe { libc::close(fd) };
    }
    fd
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn opens_are_sent_only_when_a_clause_holds(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    use_mode(mode);
    let dir = std::env::temp_dir().join(format!("harrier-kf-{}-{mode}", std::process::id()));
    let keep = dir.join("keep");
    std::fs::create_dir_all(&keep).unwrap();
    let keep = keep.to_str().unwrap().to_string();
    let other = dir.join("other.txt");
    std::fs::write(&other, "x").unwrap();
    std::fs::write(format!("{keep}/a.txt"), "x").unwrap();
    // Sent: a write-open of anything, or any successful open below keep/ or of
    // exactly other.txt; never a failed read-open.
    let clauses = vec![
        Clause {
            need_success: false,
            flags_any: (libc::O_WRONLY | libc::O_RDWR) as u32,
            paths: None,
            raw_dotdot: false,
            ..Clause::default()
        },
        Clause {
            need_success: true,
            flags_any: 0,
            paths: Some(vec![
                PathMatch::Prefix(format!("{keep}/").into_bytes()),
                PathMatch::Exact(other.to_str().unwrap().as_bytes().to_vec()),
            ]),
            raw_dotdot: false,
            ..Clause::default()
        },
    ];
    let cfg = filtered(
        "openat",
        vec![SyscallFilter { nr: nr("openat"), clauses, drop_comms: vec![], untold: false }],
    );
    let tid = gettid();
    let cases: Vec<(String, i32, bool)> = vec![
        (format!("{keep}/a.txt"), libc::O_RDONLY, true),
        (other.to_str().unwrap().to_string(), libc::O_RDONLY, true),
        (format!("{}.bak", other.to_str().unwrap()), libc::O_RDONLY, false), // fails: ENOENT
        (format!("{}/nope", dir.to_str().unwrap()), libc::O_RDONLY, false),
        ("/etc/hostname".into(), libc::O_RDONLY, false),
        (format!("{}/w.txt", dir.to_str().unwrap()), libc::O_WRONLY | libc::O_CREAT, true),
        (format!("{}/missing/w.txt", dir.to_str().unwrap()), libc::O_WRONLY | libc::O_CREAT, true),
    ];
    let c = capture_with(cfg, || {
        for (p, flags, _) in &cases {
            open_at(p, *flags);
        }
    });
    let got: Vec<String> = c
        .named(tid, "openat")
        .iter()
        .map(|e| String::from_utf8_lossy(e.param("path").unwrap().as_bytes().unwrap()).into_owned())
        .filter(|p| p.starts_with(dir.to_str().unwrap()) || p == "/etc/hostname")
        .collect();
    let want: Vec<&String> = cases.iter().filter(|c| c.2).map(|c| &c.0).collect();
    assert_eq!(got.iter().collect::<Vec<_>>(), want, "the opens sent");
    let k = c.stats.kernel_total();
    let dropped_here = cases.iter().filter(|c| !c.2).count() as u64;
    assert!(k.filtered >= dropped_here, "filtered {} < {dropped_here}", k.filtered);
    assert_eq!(
        c.stats.user.events + k.dropped() + k.filtered,
        k.events,
        "sent + dropped + filtered = produced"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Entries shorter than the lead the trie's pre-test reads (a path's bytes 1
/// and 2): a two-byte prefix keeps every path it begins, a one-byte exact
/// name only itself; a path whose lead no entry has is kept back.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn short_entries_keep_what_they_match(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    use_mode(mode);
    let paths = vec![PathMatch::Prefix(b"/p".to_vec()), PathMatch::Exact(b"/".to_vec())];
    let clause = Clause {
        need_success: true,
        flags_any: 0,
        paths: Some(paths),
        raw_dotdot: false,
        ..Clause::default()
    };
    let cfg = filtered(
        "openat",
        vec![SyscallFilter { nr: nr("openat"), clauses: vec![clause], drop_comms: vec![], untold: false }],
    );
    let tid = gettid();
    let cases = [("/proc/self/stat", true), ("/", true), ("/etc/hostname", false), ("/dev/null", false)];
    let c = capture_with(cfg, || {
        for (p, _) in cases {
            assert!(open_at(p, libc::O_RDONLY) >= 0, "open {p}");
        }
    });
    let got: Vec<String> = c
        .named(tid, "openat")
        .iter()
        .map(|e| String::from_utf8_lossy(e.param("path").unwrap().as_bytes().unwrap()).into_owned())
        .collect();
    let want: Vec<&str> = cases.iter().filter(|c| c.1).map(|c| c.0).collect();
    assert_eq!(got, want, "the opens sent");
    assert!(c.stats.kernel_total().filtered >= 2, "the other two counted as filtered");
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn a_process_name_is_dropped_for_one_syscall(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    use_mode(mode);
    let quiet_getcwd = SyscallFilter {
        nr: nr("getcwd"),
        clauses: vec![],
        drop_comms: vec![b"hr-kf-quiet".to_vec()],
        untold: false,
    };
    let cfg = filtered("getcwd,getppid", vec![quiet_getcwd]);
    let named = |name: &'static str| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(|| {
                let mut buf = [0u8; 256];
                unsafe { libc::getcwd(buf.as_mut_ptr().cast(), buf.len()) };
                unsafe { libc::getppid() };
                gettid()
            })
            .unwrap()
    };
    let (mut quiet, mut loud) = (0, 0);
    let c = capture_with(cfg, || {
        quiet = named("hr-kf-quiet").join().unwrap();
        loud = named("hr-kf-loud").join().unwrap();
    });
    assert_eq!(c.named(quiet, "getcwd").len(), 0, "the quiet thread's getcwd is kept back");
    assert_eq!(c.named(quiet, "getppid").len(), 1, "its other syscalls are sent");
    assert_eq!(c.named(loud, "getcwd").len(), 1, "another name is sent");
    assert!(c.stats.kernel_total().filtered >= 1);
}

/// With entry copies (the path as it was at entry) or without them (read at
/// exit, as `entry_copies: false` has it): the test is made either way.
#[test_case(PerSyscall, true ; "per_syscall")]
#[test_case(Dispatcher, true ; "dispatcher")]
#[test_case(PerSyscall, false ; "per_syscall_read_at_exit")]
#[test_case(Dispatcher, false ; "dispatcher_read_at_exit")]
fn opens_whose_path_as_passed_has_dotdot_are_sent(mode: AttachMode, entry_copies: bool) {
    if !bpf_available() {
        return;
    }
    use_mode(mode);
    let dir = std::env::temp_dir().join(format!("harrier-kfdd-{}-{mode}-{entry_copies}", std::process::id()));
    std::fs::create_dir_all(dir.join("abcdef")).unwrap();
    std::fs::write(dir.join("f"), "x").unwrap();
    let clauses = vec![Clause { need_success: true, raw_dotdot: true, ..Clause::default() }];
    let mut cfg = filtered(
        "openat",
        vec![SyscallFilter { nr: nr("openat"), clauses, drop_comms: vec![], untold: false }],
    );
    if !entry_copies {
        cfg.collect.read_at_exit("openat").unwrap();
    }
    // Relative to dir (the kernel tests the path as passed, 8 bytes at a
    // time): pairs inside a word, across two (bytes 7 and 8), at the end;
    // lone dots; past 128 bytes it cannot tell and sends the open.
    let d = dir.display();
    let cases: Vec<(String, bool)> = vec![
        (format!("{d}/f"), false),
        (format!("{d}/./f"), false),
        (format!("{d}/abcdef/./../f"), true),
        (format!("{d}/abcdef/../f"), true),
        (format!("{d}/{}f", "./".repeat(70)), true),
        (format!("{d}/nope/../f"), false), // ENOENT: failed opens are kept back
    ];
    let tid = gettid();
    let rel = ["abcdef/../f", "abcdef/..", "abcdef/./f", "ab/../f", "./f"];
    let dfd = std::fs::File::open(&dir).unwrap();
    let c = capture_with(cfg, || {
        for (p, _) in &cases {
            open_at(p, libc::O_RDONLY);
        }
        for p in rel {
            let c = CString::new(p).unwrap();
            let fd =
                unsafe { libc::openat(std::os::fd::AsRawFd::as_raw_fd(&dfd), c.as_ptr(), libc::O_RDONLY) };
            if fd >= 0 {
                unsafe { libc::close(fd) };
            }
        }
    });
    let got: Vec<String> = c
        .named(tid, "openat")
        .iter()
        .map(|e| String::from_utf8_lossy(e.param("path").unwrap().as_bytes().unwrap()).into_owned())
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    for (p, sent) in &cases {
        assert_eq!(got.contains(p), *sent, "{p}: sent {}", got.contains(p));
    }
    // "ab/" does not exist: that open fails and is kept back.
    let rel_sent: Vec<&str> = rel.iter().copied().filter(|p| got.iter().any(|g| g == p)).collect();
    assert_eq!(rel_sent, ["abcdef/../f", "abcdef/.."], "relative opens sent: {got:?}");
}
