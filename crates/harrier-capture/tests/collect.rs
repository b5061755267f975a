//! What the kernel collects (harrier_capture::Collect): a parameter left out
//! is absent from the event and everything else is as before; one collected
//! on failure only is there exactly when the call failed; without entry
//! copies no sys_enter program is loaded, and an event whose pointer argument
//! was read at exit says so.

mod common;

use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use test_case::test_case;

use common::*;
use harrier_capture::{parse_syscalls, Collect, Config};
use harrier_schema::decode::Value;

fn cfg(syscalls: &str, collect: Collect) -> Config {
    let mut cfg = Config::new(parse_syscalls(syscalls).unwrap());
    cfg.pid = Some(std::process::id());
    cfg.collect = collect;
    cfg
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn parameters_left_out_are_absent_and_the_rest_unchanged(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("collect");
    std::fs::write(d.path("f"), "x").unwrap();
    let (f, missing) = (cstr(&d.path("f")), cstr(&d.path("missing")));
    let mut collect = Collect::all();
    collect.skip_on_success("openat", "path").unwrap();
    collect.skip("connect", "addr").unwrap();
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: 9u16.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be() },
        sin_zero: [0; 8],
    };
    let c = capture_with(cfg("openat,connect", collect), || {
        let fd = sys(libc::SYS_openat, &[libc::AT_FDCWD as i64, f.as_ptr() as i64, 0, 0]);
        sys(libc::SYS_close, &[fd]);
        sys(libc::SYS_openat, &[libc::AT_FDCWD as i64, missing.as_ptr() as i64, 0, 0]);
        let s = sys(libc::SYS_socket, &[libc::AF_INET as i64, libc::SOCK_DGRAM as i64, 0]);
        sys(libc::SYS_connect, &[s, &addr as *const _ as i64, 16]);
        sys(libc::SYS_close, &[s]);
    });
    let opens = exactly(&c, "openat", 2);
    assert!(opens[0].ret >= 0);
    assert_eq!(opens[0].param("path"), Some(&Value::Missing), "a success leaves the path out");
    assert_eq!(text(&opens[0], "fullpath"), d.path("f"), "and still has the kernel's path");
    assert_eq!(opens[1].ret, -libc::ENOENT as i64);
    assert_eq!(text(&opens[1], "path"), d.path("missing"), "a failure keeps it");
    let conn = only(&c, "connect");
    assert_eq!(conn.ret, 0);
    assert_eq!(conn.param("addr"), Some(&Value::Missing), "left out");
    let peer = harrier_schema::sockaddr::format(bytes(&conn, "peer"));
    assert_eq!(peer, "127.0.0.1:9", "the socket's peer is still read");

    assert!(int(&conn, "fd") >= 0);
    // Entry copies were kept: what was collected came from them.
    assert!(c.stats.programs.iter().any(|p| p.name == "hr_enter_openat"));
    assert!(opens.iter().chain([&conn]).all(|e| !e.header.args_at_exit));
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn arguments_read_at_exit_load_no_entry_program(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("at-exit");
    std::fs::write(d.path("f"), "x").unwrap();
    let (f, missing) = (cstr(&d.path("f")), cstr(&d.path("missing")));
    let mut collect = Collect::all();
    for s in ["openat", "connect"] {
        collect.read_at_exit(s).unwrap();
    }
    collect.skip_on_success("openat", "path").unwrap();
    let c = capture_with(cfg("openat,connect", collect), || {
        let fd = sys(libc::SYS_openat, &[libc::AT_FDCWD as i64, f.as_ptr() as i64, 0, 0]);
        sys(libc::SYS_close, &[fd]);
        sys(libc::SYS_openat, &[libc::AT_FDCWD as i64, missing.as_ptr() as i64, 0, 0]);
    });
    let loaded: Vec<&str> = c.stats.programs.iter().map(|p| p.name.as_str()).collect();
    assert!(!loaded.iter().any(|n| n.starts_with("hr_enter_")), "no entry program: {loaded:?}");
    let opens = exactly(&c, "openat", 2);
    assert!(!opens[0].header.args_at_exit, "nothing was read at exit");
    assert_eq!(text(&opens[0], "fullpath"), d.path("f"));
    assert!(opens[1].header.args_at_exit, "the failed open's path was read at exit");
    assert_eq!(text(&opens[1], "path"), d.path("missing"));
    assert_eq!(c.stats.kernel_total().toctou_fallbacks, 0, "no entry copy was expected");
}
