//! Sockets the kernel filter keeps back (bpf/include/untold.h, kfilter.h), in
//! both attach modes: a socket() no clause keeps leaves its fd untold; the
//! connect and dup on it say what it is (events.tbl's socktype), a connect no
//! clause keeps stays in the kernel too, and so does the close of an fd still
//! untold.

mod common;

use common::{
    bpf_available, capture_followed, capture_named, close, closes_sent, gettid, mode, nr, use_mode, TempDir,
};
use harrier_capture::kfilter::{Clause, KernelFilter, SyscallFilter};
use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use harrier_capture::{parse_syscalls, Config};
use test_case::test_case;

/// 127.x.y.z:port as a sockaddr_in.
fn to(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(ip) },
        sin_zero: [0; 8],
    }
}

fn inet_socket(typ: i32) -> i32 {
    let s = unsafe { libc::socket(libc::AF_INET, typ, 0) };
    assert!(s >= 0, "socket");
    s
}

fn connect(s: i32, a: &libc::sockaddr_in) {
    let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
    assert_eq!(unsafe { libc::connect(s, (a as *const libc::sockaddr_in).cast(), len) }, 0, "connect {s}");
}

/// What socktype says of a socket: family, type, protocol, fd flags (u16 each).
fn socktype(e: &harrier_schema::decode::SyscallEvent) -> Vec<u16> {
    common::bytes(e, "sock").chunks(2).map(|w| u16::from_le_bytes([w[0], w[1]])).collect()
}

/// socket() sent only for AF_PACKET (Falco's "Packet socket created in
/// container"): the others are kept back, and their fds are untold.
fn socket_config() -> Config {
    let mut cfg = Config::new(parse_syscalls("socket,connect,dup,close").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.attach = mode();
    let packet = Clause { arg_eq: Some(("domain", libc::AF_PACKET as u32)), ..Clause::default() };
    let socket = SyscallFilter { nr: nr("socket"), clauses: vec![packet], drop_comms: vec![], untold: false };
    let close = SyscallFilter { nr: nr("close"), clauses: vec![], drop_comms: vec![], untold: true };
    cfg.kernel_filter = Some(KernelFilter { syscalls: vec![socket, close] });
    cfg
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn a_kept_back_socket_is_described_by_its_connect_and_dups(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    let alone = common::alone();
    use_mode(mode);
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sink.local_addr().unwrap().port();
    let sink_addr = to([127, 0, 0, 1], port);
    let (tid, pid) = (gettid(), std::process::id());
    let (mut held, mut sent) = (Vec::new(), Vec::new());
    let (mut connected, mut duped, mut packet) = (-1, -1, -1);
    let c = capture_followed(&alone, socket_config(), |untold| {
        // Never used: kept back, and so is its close.
        let a = inet_socket(libc::SOCK_DGRAM);
        assert!(untold.is_untold(pid, a as u32), "socket {a} kept back: untold");
        close(a);
        held.push(a);
        // Connected: the connect says what it is, so its close is sent.
        let b = inet_socket(libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK);
        connect(b, &sink_addr);
        assert!(!untold.is_untold(pid, b as u32), "the connect on {b} told it");
        close(b);
        sent.push(b);
        connected = b;
        // Duplicated: the dup says what its old fd is; the old fd stays untold.
        let d = inet_socket(libc::SOCK_STREAM);
        let e = unsafe { libc::dup(d) };
        assert!(e >= 0 && untold.is_untold(pid, d as u32) && !untold.is_untold(pid, e as u32));
        close(e);
        close(d);
        sent.push(e);
        held.push(d);
        duped = d;
        // Sent: a packet socket, which the clause keeps (root has CAP_NET_RAW).
        let p = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        assert!(p >= 0 && !untold.is_untold(pid, p as u32), "AF_PACKET socket {p}");
        close(p);
        sent.push(p);
        packet = p;
    });
    assert_eq!(closes_sent(&c, tid), sent.iter().map(|&f| f as i64).collect::<Vec<_>>(), "held: {held:?}");
    let sockets: Vec<i64> = c.named(tid, "socket").iter().map(|e| e.ret).collect();
    assert_eq!(sockets, vec![packet as i64], "only the AF_PACKET socket() is sent");
    let conn = c.named(tid, "connect");
    assert_eq!(conn.len(), 1);
    assert_eq!(common::int(&conn[0], "fd"), connected as i64);
    let (udp, dgram) = (libc::IPPROTO_UDP as u16, libc::SOCK_DGRAM as u16);
    assert_eq!(socktype(&conn[0]), vec![libc::AF_INET as u16, dgram, udp, 3], "cloexec and nonblock");
    let dup = c.named(tid, "dup");
    assert_eq!((dup.len(), common::int(&dup[0], "oldfd")), (1, duped as i64));
    let (tcp, stream) = (libc::IPPROTO_TCP as u16, libc::SOCK_STREAM as u16);
    assert_eq!(socktype(&dup[0]), vec![libc::AF_INET as u16, stream, tcp, 0]);
    assert_eq!(common::bytes(&dup[0], "local")[..2], (libc::AF_INET as u16).to_le_bytes());
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn a_dup_of_a_file_describes_no_socket(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    let _alone = common::alone();
    use_mode(mode);
    let dir = TempDir::new("untold-dup");
    std::fs::write(dir.path("f"), "f").unwrap();
    let tid = gettid();
    let c = common::capture_with(
        {
            let mut cfg = Config::new(parse_syscalls("dup").unwrap());
            cfg.pid = Some(std::process::id());
            cfg
        },
        || {
            let f = std::fs::File::open(dir.path("f")).unwrap();
            let f = std::os::fd::IntoRawFd::into_raw_fd(f);
            let d = unsafe { libc::dup(f) };
            close(d);
            close(f);
        },
    );
    let dup = c.named(tid, "dup");
    assert_eq!(dup.len(), 1);
    for p in ["peer", "local", "sock"] {
        assert!(common::bytes(&dup[0], p).is_empty(), "a file's dup has no {p}");
    }
}

/// As socket_config, and connect sent only for TCP or a peer among the rules' names.
fn connect_config() -> Config {
    let mut cfg = socket_config();
    cfg.syscalls = parse_syscalls("socket,connect,close").unwrap();
    let tcp = Clause { l4: libc::IPPROTO_TCP as u8, ..Clause::default() };
    let named = Clause { peer_named: true, ..Clause::default() };
    let connect =
        SyscallFilter { nr: nr("connect"), clauses: vec![tcp, named], drop_comms: vec![], untold: false };
    cfg.kernel_filter.as_mut().unwrap().syscalls.push(connect);
    cfg
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn a_connect_no_rule_can_use_on_a_kept_back_socket_stays_in_the_kernel(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    let alone = common::alone();
    use_mode(mode);
    let udp_sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let tcp_sink = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (udp, named) = (to([127, 0, 0, 1], udp_sink.local_addr().unwrap().port()), [127, 0, 0, 2]);
    let tcp = to([127, 0, 0, 1], tcp_sink.local_addr().unwrap().port());
    // A port nobody listens on: one a listener had, now closed.
    let refused =
        to([127, 0, 0, 1], std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    let (tid, pid) = (gettid(), std::process::id());
    let (mut held, mut sent) = (Vec::new(), Vec::new());
    let c = capture_named(&alone, connect_config(), &[std::net::IpAddr::from(named)], |untold| {
        // UDP to an address no rule names: the connect and the close stay back.
        let a = inet_socket(libc::SOCK_DGRAM);
        connect(a, &udp);
        assert!(untold.is_untold(pid, a as u32), "kept back, {a} stays untold");
        close(a);
        held.push(a);
        // TCP: sent, and it tells the fd.
        let b = inet_socket(libc::SOCK_STREAM);
        connect(b, &tcp);
        close(b);
        sent.push(b);
        // UDP to a rule's name's address: sent; then a connect on the told fd is sent too.
        let d = inet_socket(libc::SOCK_DGRAM);
        connect(d, &to(named, 9));
        connect(d, &udp);
        close(d);
        sent.extend([d, d]);
        // TCP refused: sent, and a failed connect says what its socket is too.
        let r = inet_socket(libc::SOCK_STREAM);
        let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
        let rc = unsafe { libc::connect(r, (&refused as *const libc::sockaddr_in).cast(), len) };
        assert_eq!((rc, std::io::Error::last_os_error().raw_os_error()), (-1, Some(libc::ECONNREFUSED)));
        assert!(!untold.is_untold(pid, r as u32), "the failed connect on {r} told it");
        close(r);
        sent.push(r);
    });
    let conns = c.named(tid, "connect");
    let connects: Vec<i64> = conns.iter().map(|e| common::int(e, "fd")).collect();
    assert_eq!(connects, sent.iter().map(|&f| f as i64).collect::<Vec<_>>(), "connects sent, held: {held:?}");
    let (tcp, stream) = (libc::IPPROTO_TCP as u16, libc::SOCK_STREAM as u16);
    assert_eq!(socktype(conns.last().unwrap()), vec![libc::AF_INET as u16, stream, tcp, 0], "refused");
    let closes = [sent[0], sent[1], sent[3]].map(|f| f as i64).to_vec();
    assert_eq!(closes_sent(&c, tid), closes, "the closes of b, d and r sent");
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn with_no_names_resolved_no_udp_connect_is_of_use(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    let alone = common::alone();
    use_mode(mode);
    let (tid, pid) = (gettid(), std::process::id());
    let c = capture_named(&alone, connect_config(), &[], |untold| {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect("127.0.0.2:9").unwrap();
        assert!(untold.is_untold(pid, std::os::fd::AsRawFd::as_raw_fd(&s) as u32));
    });
    assert!(c.named(tid, "connect").is_empty(), "kf_peers_n is 0: no peer is a name's");
    assert!(closes_sent(&c, tid).is_empty(), "its close stays back too");
}
