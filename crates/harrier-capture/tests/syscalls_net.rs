//! Every typed network syscall: addresses decoded (IPv4, IPv6, unix path and
//! abstract), data cut at the snaplen, success and failure.
//! Loopback and unix sockets only. Work closures make raw syscalls only.

mod common;

use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use test_case::test_case;

use common::*;
use harrier_capture::{parse_syscalls, Config};
use harrier_schema::decode::SyscallEvent;
use libc::{AF_INET, AF_INET6, AF_UNIX, EAGAIN, EBADF, EINVAL, ENOENT, ENOTCONN};

/// Never an open descriptor: far above any fd table.
const BADFD: i64 = 1_000_000;

/// A socket address as the kernel takes it: bytes and length.
#[derive(Clone, Copy)]
struct Addr {
    ss: libc::sockaddr_storage,
    len: u32,
}

impl Addr {
    fn from<T>(sa: T) -> Addr {
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = std::mem::size_of::<T>();
        unsafe {
            std::ptr::copy_nonoverlapping((&sa as *const T).cast::<u8>(), &mut ss as *mut _ as *mut u8, len)
        };
        Addr { ss, len: len as u32 }
    }

    /// 127.0.0.1:port
    fn v4(port: u16) -> Addr {
        let mut a: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        a.sin_family = AF_INET as u16;
        a.sin_port = port.to_be();
        a.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        Addr::from(a)
    }

    /// [::1]:port
    fn v6(port: u16) -> Addr {
        let mut a: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        a.sin6_family = AF_INET6 as u16;
        a.sin6_port = port.to_be();
        a.sin6_addr.s6_addr = std::net::Ipv6Addr::LOCALHOST.octets();
        Addr::from(a)
    }

    /// A unix socket path; a leading '@' makes it abstract (no NUL kept).
    fn unix(path: &str) -> Addr {
        let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        a.sun_family = AF_UNIX as u16;
        let (name, nul) = match path.strip_prefix('@') {
            Some(n) => ([&[0u8][..], n.as_bytes()].concat(), 0),
            None => (path.as_bytes().to_vec(), 1),
        };
        for (d, &s) in a.sun_path.iter_mut().zip(&name) {
            *d = s as libc::c_char;
        }
        let mut addr = Addr::from(a);
        addr.len = (2 + name.len() + nul) as u32;
        addr
    }

    /// The address a socket is bound to (getsockname, not under test).
    fn of(fd: i64) -> Addr {
        let mut a = Addr { ss: unsafe { std::mem::zeroed() }, len: 128 };
        let r = unsafe { libc::getsockname(fd as i32, a.mut_ptr() as *mut _, &mut a.len) };
        assert_eq!(r, 0, "getsockname");
        a
    }

    fn port(&self) -> u16 {
        let b = self.bytes();
        u16::from_be_bytes([b[2], b[3]])
    }

    fn bytes(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(&self.ss as *const _ as *const u8, self.len as usize) }
    }

    fn ptr(&self) -> i64 {
        &self.ss as *const _ as i64
    }

    fn mut_ptr(&mut self) -> i64 {
        &mut self.ss as *mut _ as i64
    }
}

/// Room for an address the kernel writes back, with its length word.
struct AddrOut {
    addr: Addr,
    len: u32,
}

impl AddrOut {
    fn new() -> AddrOut {
        AddrOut { addr: Addr { ss: unsafe { std::mem::zeroed() }, len: 0 }, len: 128 }
    }

    /// (address pointer, length pointer) for accept/recvfrom.
    fn ptrs(&mut self) -> (i64, i64) {
        (self.addr.mut_ptr(), &mut self.len as *mut u32 as i64)
    }
}

/// Closes every descriptor it was given when dropped.
#[derive(Default)]
struct Fds(Vec<i64>);

impl Fds {
    /// Keeps `fd` (a syscall's result) for closing; returns it.
    fn keep(&mut self, fd: i64) -> i64 {
        if fd >= 0 {
            self.0.push(fd);
        }
        fd
    }
}

impl Drop for Fds {
    fn drop(&mut self) {
        for &fd in &self.0 {
            unsafe { libc::close(fd as i32) };
        }
    }
}

/// The decoded address parameter, as `harrier capture` prints it.
fn addr(e: &SyscallEvent, name: &str) -> String {
    harrier_schema::sockaddr::format(bytes(e, name))
}

fn socket(domain: i32, ty: i32) -> i64 {
    sys(libc::SYS_socket, &[domain as i64, ty as i64, 0])
}

/// A loopback UDP socket bound to a free port.
fn udp(fds: &mut Fds) -> (i64, Addr) {
    let fd = fds.keep(socket(AF_INET, libc::SOCK_DGRAM));
    let a = Addr::v4(0);
    assert_eq!(sys(libc::SYS_bind, &[fd, a.ptr(), a.len as i64]), 0);
    (fd, Addr::of(fd))
}

/// A TCP port nobody listens on: bound, never listening, then closed.
fn closed_port() -> u16 {
    let fd = socket(AF_INET, libc::SOCK_STREAM);
    let a = Addr::v4(0);
    assert_eq!(sys(libc::SYS_bind, &[fd, a.ptr(), a.len as i64]), 0);
    let port = Addr::of(fd).port();
    sys(libc::SYS_close, &[fd]);
    port
}

fn ok_socket(e: &SyscallEvent, fd: i64, domain: i32, ty: i32) {
    expect(e, fd, &[("domain", domain as i64), ("type", ty as i64), ("protocol", 0)]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn tcp_ipv4_socket_bind_listen_connect_accept(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut fds = Fds::default();
    let refused = Addr::v4(closed_port());
    let any = Addr::v4(0);
    let stream = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    let (mut server, mut client, mut other, mut conn, mut server_addr) = (0, 0, 0, 0, any);
    let mut peer = AddrOut::new();
    let (pa, pl) = peer.ptrs();
    let mut not_listening = AddrOut::new();
    let (na, nl) = not_listening.ptrs();
    let c = capture("socket,bind,listen,connect,accept", || {
        server = fds.keep(socket(AF_INET, stream));
        sys(libc::SYS_socket, &[9999, stream as i64, 0]);
        sys(libc::SYS_bind, &[server, any.ptr(), 16]);
        sys(libc::SYS_bind, &[server, any.ptr(), 16]); // already bound
        sys(libc::SYS_listen, &[server, 16]);
        sys(libc::SYS_listen, &[BADFD, 1]);
        server_addr = Addr::of(server);
        client = fds.keep(socket(AF_INET, libc::SOCK_STREAM));
        sys(libc::SYS_connect, &[client, server_addr.ptr(), 16]);
        conn = fds.keep(sys(libc::SYS_accept, &[server, pa, pl]));
        sys(libc::SYS_connect, &[client, refused.ptr(), 16]); // already connected
        other = fds.keep(socket(AF_INET, libc::SOCK_STREAM));
        sys(libc::SYS_connect, &[other, refused.ptr(), 16]);
        sys(libc::SYS_accept, &[client, na, nl]);
    });
    assert!(conn > 0, "accept failed: {conn}");
    let port = server_addr.port();
    let client_addr = Addr::of(client);

    let e = exactly(&c, "socket", 4);
    ok_socket(&e[0], server, AF_INET, stream);
    assert_eq!(names(&e[0], "domain"), "AF_INET");
    assert_eq!(names(&e[0], "type"), "SOCK_STREAM|SOCK_CLOEXEC");
    expect(&e[1], -libc::EAFNOSUPPORT as i64, &[("domain", 9999), ("type", stream as i64)]);
    ok_socket(&e[2], client, AF_INET, libc::SOCK_STREAM);
    ok_socket(&e[3], other, AF_INET, libc::SOCK_STREAM);

    let e = exactly(&c, "bind", 2);
    expect(&e[0], 0, &[("fd", server)]);
    assert_eq!(addr(&e[0], "addr"), "127.0.0.1:0");
    assert_eq!(bytes(&e[0], "addr"), any.bytes());
    expect(&e[1], -EINVAL as i64, &[("fd", server)]);
    assert_eq!(addr(&e[1], "addr"), "127.0.0.1:0");

    let e = exactly(&c, "listen", 2);
    expect(&e[0], 0, &[("fd", server), ("backlog", 16)]);
    expect(&e[1], -EBADF as i64, &[("fd", BADFD), ("backlog", 1)]);

    let e = exactly(&c, "connect", 3);
    expect(&e[0], 0, &[("fd", client)]);
    assert_eq!(addr(&e[0], "addr"), format!("127.0.0.1:{port}"));
    // The peer the kernel holds: only for a connect that took effect.
    assert_eq!(addr(&e[0], "peer"), format!("127.0.0.1:{port}"));
    expect(&e[1], -libc::EISCONN as i64, &[("fd", client)]);
    assert_eq!(addr(&e[1], "addr"), format!("127.0.0.1:{}", refused.port()));
    assert_eq!(addr(&e[1], "peer"), "");
    expect(&e[2], -libc::ECONNREFUSED as i64, &[("fd", other)]);
    assert_eq!(addr(&e[2], "addr"), format!("127.0.0.1:{}", refused.port()));
    assert_eq!(addr(&e[2], "peer"), "");

    let e = exactly(&c, "accept", 2);
    expect(&e[0], conn, &[("fd", server)]);
    assert_eq!(bytes(&e[0], "addr"), client_addr.bytes(), "the peer: the client's address");
    assert_eq!(addr(&e[0], "addr"), format!("127.0.0.1:{}", client_addr.port()));
    expect(&e[1], -EINVAL as i64, &[("fd", client)]);
    // The kernel wrote no address: none may be reported (the buffer could
    // hold a stale one from an earlier call).
    assert_eq!(bytes(&e[1], "addr"), b"", "a failed accept has no peer");
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn tcp_ipv6_connect_accept4(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut fds = Fds::default();
    // Non-blocking, so the second accept4 fails instead of waiting.
    let server = fds.keep(socket(AF_INET6, libc::SOCK_STREAM | libc::SOCK_NONBLOCK));
    let any = Addr::v6(0);
    assert_eq!(sys(libc::SYS_bind, &[server, any.ptr(), any.len as i64]), 0);
    assert_eq!(sys(libc::SYS_listen, &[server, 4]), 0);
    let server_addr = Addr::of(server);
    let client = fds.keep(socket(AF_INET6, libc::SOCK_STREAM));
    let flags = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as i64;
    let mut peer = AddrOut::new();
    let (pa, pl) = peer.ptrs();
    let mut conn = 0;
    let c = capture("connect,accept4", || {
        sys(libc::SYS_connect, &[client, server_addr.ptr(), server_addr.len as i64]);
        conn = fds.keep(sys(libc::SYS_accept4, &[server, pa, pl, flags]));
        // Nobody else is connecting.
        sys(libc::SYS_accept4, &[server, pa, pl, flags]);
    });
    assert!(conn > 0, "accept4 failed: {conn}");
    let client_addr = Addr::of(client);

    let e = only(&c, "connect");
    expect(&e, 0, &[("fd", client)]);
    assert_eq!(addr(&e, "addr"), format!("[::1]:{}", server_addr.port()));
    assert_eq!(bytes(&e, "addr"), server_addr.bytes());
    assert_eq!(addr(&e, "peer"), format!("[::1]:{}", server_addr.port()));

    let e = exactly(&c, "accept4", 2);
    expect(&e[0], conn, &[("fd", server), ("flags", flags)]);
    assert_eq!(names(&e[0], "flags"), "SOCK_NONBLOCK|SOCK_CLOEXEC");
    assert_eq!(addr(&e[0], "addr"), format!("[::1]:{}", client_addr.port()));
    assert_eq!(bytes(&e[0], "addr"), client_addr.bytes());
    expect(&e[1], -EAGAIN as i64, &[("fd", server), ("flags", flags)]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn unix_path_and_abstract_addresses(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("unix");
    let (path, missing) = (d.path("s.sock"), d.path("missing.sock"));
    let abs = format!("@harrier-test-{}-{}", std::process::id(), gettid());
    let (at_path, at_missing, at_abs) = (Addr::unix(&path), Addr::unix(&missing), Addr::unix(&abs));
    let mut fds = Fds::default();
    let (server, abstract_server, client, lost) = (
        fds.keep(socket(AF_UNIX, libc::SOCK_STREAM)),
        fds.keep(socket(AF_UNIX, libc::SOCK_STREAM)),
        fds.keep(socket(AF_UNIX, libc::SOCK_STREAM)),
        fds.keep(socket(AF_UNIX, libc::SOCK_STREAM)),
    );
    let c = capture("bind,connect", || {
        sys(libc::SYS_bind, &[server, at_path.ptr(), at_path.len as i64]);
        sys(libc::SYS_bind, &[abstract_server, at_abs.ptr(), at_abs.len as i64]);
        sys(libc::SYS_listen, &[server, 1]);
        sys(libc::SYS_connect, &[client, at_path.ptr(), at_path.len as i64]);
        sys(libc::SYS_connect, &[lost, at_missing.ptr(), at_missing.len as i64]);
    });
    let e = exactly(&c, "bind", 2);
    expect(&e[0], 0, &[("fd", server)]);
    assert_eq!(addr(&e[0], "addr"), path);
    assert_eq!(bytes(&e[0], "addr"), at_path.bytes());
    expect(&e[1], 0, &[("fd", abstract_server)]);
    assert_eq!(addr(&e[1], "addr"), abs);
    assert_eq!(bytes(&e[1], "addr"), at_abs.bytes());

    let e = exactly(&c, "connect", 2);
    expect(&e[0], 0, &[("fd", client)]);
    assert_eq!(addr(&e[0], "addr"), path);
    assert_eq!(addr(&e[0], "peer"), path, "the listener's name, from the kernel's peer socket");
    expect(&e[1], -ENOENT as i64, &[("fd", lost)]);
    assert_eq!(addr(&e[1], "addr"), missing);
    assert_eq!(addr(&e[1], "peer"), "");
}

/// 200 recognisable bytes: longer than the default snaplen (80).
fn payload() -> Vec<u8> {
    (0..200u32).map(|i| b'A' + (i % 26) as u8).collect()
}

/// Sends a 200-byte datagram and receives it, capturing sendto/recvfrom with
/// `snaplen`; checks sizes and addresses, returns the two data parameters.
fn sendto_recvfrom_cut_at(snaplen: u32) -> (Vec<u8>, Vec<u8>) {
    let mut fds = Fds::default();
    let ((a, a_addr), (b, b_addr)) = (udp(&mut fds), udp(&mut fds));
    let data = payload();
    let mut buf = vec![0u8; 500];
    let mut from = AddrOut::new();
    let (fa, fl) = from.ptrs();
    let mut cfg = Config::new(parse_syscalls("sendto,recvfrom").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.snaplen = snaplen;
    let c = capture_with(cfg, || {
        sys(libc::SYS_sendto, &[a, data.as_ptr() as i64, 200, 0, b_addr.ptr(), b_addr.len as i64]);
        sys(libc::SYS_recvfrom, &[b, buf.as_mut_ptr() as i64, 500, 0, fa, fl]);
    });
    assert_eq!(&buf[..200], &data[..]);
    let s = only(&c, "sendto");
    expect(&s, 200, &[("fd", a), ("size", 200), ("flags", 0)]);
    assert_eq!(addr(&s, "addr"), format!("127.0.0.1:{}", b_addr.port()));
    let r = only(&c, "recvfrom");
    expect(&r, 200, &[("fd", b), ("size", 500), ("flags", 0)]);
    assert_eq!(addr(&r, "addr"), format!("127.0.0.1:{}", a_addr.port()), "the sender");
    assert_eq!(bytes(&r, "addr"), a_addr.bytes());
    (bytes(&s, "data").to_vec(), bytes(&r, "data").to_vec())
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn sendto_recvfrom_data_cut_at_default_snaplen(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (sent, received) = sendto_recvfrom_cut_at(harrier_capture::DEFAULT_SNAPLEN);
    assert_eq!(harrier_capture::DEFAULT_SNAPLEN, 80);
    assert_eq!(sent, &payload()[..80]);
    assert_eq!(received, &payload()[..80]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn sendto_recvfrom_data_cut_at_snaplen_16(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (sent, received) = sendto_recvfrom_cut_at(16);
    assert_eq!(sent, &payload()[..16]);
    assert_eq!(received, &payload()[..16]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn sendto_recvfrom_failures(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut fds = Fds::default();
    let (b, _) = udp(&mut fds);
    let mut buf = [0u8; 64];
    let dontwait = libc::MSG_DONTWAIT as i64;
    // The address buffer still holds an address from an earlier call.
    let mut stale = AddrOut { addr: Addr::v4(9), len: 16 };
    let (sa, sl) = stale.ptrs();
    let c = capture("sendto,recvfrom", || {
        sys(libc::SYS_sendto, &[BADFD, b"lost".as_ptr() as i64, 4, 0, 0, 0]);
        // Nothing queued.
        sys(libc::SYS_recvfrom, &[b, buf.as_mut_ptr() as i64, 64, dontwait, sa, sl]);
    });
    let s = only(&c, "sendto");
    expect(&s, -EBADF as i64, &[("fd", BADFD), ("size", 4), ("flags", 0)]);
    assert_eq!(bytes(&s, "data"), b"lost", "sendto data is the caller's");
    assert_eq!(bytes(&s, "addr"), b"", "no address given");
    let r = only(&c, "recvfrom");
    expect(&r, -EAGAIN as i64, &[("fd", b), ("size", 64), ("flags", dontwait)]);
    assert_eq!(names(&r, "flags"), "MSG_DONTWAIT");
    assert_eq!(bytes(&r, "data"), b"");
    assert_eq!(bytes(&r, "addr"), b"", "a failed recvfrom has no sender, stale or not");
}

/// A msghdr over `iov`, with room for (or the value of) an address.
fn msghdr(name: &mut Addr, iov: &mut [libc::iovec]) -> libc::msghdr {
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_name = name.mut_ptr() as *mut _;
    m.msg_namelen = name.len;
    m.msg_iov = iov.as_mut_ptr();
    m.msg_iovlen = iov.len();
    m
}

fn iovec(b: &mut [u8]) -> libc::iovec {
    libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() }
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn sendmsg_recvmsg(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut fds = Fds::default();
    let ((a, a_addr), (b, mut b_addr)) = (udp(&mut fds), udp(&mut fds));
    let (mut hello, mut world, mut long) = (*b"hello ", *b"msg", payload());
    let mut out = [iovec(&mut hello), iovec(&mut world)];
    let send = msghdr(&mut b_addr, &mut out);
    let mut out_long = [iovec(&mut long)];
    let send_long = msghdr(&mut b_addr, &mut out_long);
    let (mut r4, mut r300) = ([0u8; 4], [0u8; 300]);
    let mut inv = [iovec(&mut r4), iovec(&mut r300)];
    let mut from = Addr { ss: unsafe { std::mem::zeroed() }, len: 128 };
    let mut recv = msghdr(&mut from, &mut inv);
    let mut recv_long = msghdr(&mut from, &mut inv);
    let mut recv_none = msghdr(&mut from, &mut inv);
    let ptr = |m: &libc::msghdr| m as *const _ as i64;
    let (rp, rlp, rnp) =
        (&mut recv as *mut _ as i64, &mut recv_long as *mut _ as i64, &mut recv_none as *mut _ as i64);
    let dontwait = libc::MSG_DONTWAIT as i64;
    let c = capture("sendmsg,recvmsg", || {
        sys(libc::SYS_sendmsg, &[a, ptr(&send), 0]);
        sys(libc::SYS_recvmsg, &[b, rp, 0]);
        sys(libc::SYS_sendmsg, &[a, ptr(&send_long), 0]);
        sys(libc::SYS_recvmsg, &[b, rlp, 0]);
        sys(libc::SYS_sendmsg, &[BADFD, ptr(&send), 0]);
        sys(libc::SYS_recvmsg, &[b, rnp, dontwait]);
    });
    let to = format!("127.0.0.1:{}", b_addr.port());
    let sender = format!("127.0.0.1:{}", a_addr.port());
    let s = exactly(&c, "sendmsg", 3);
    expect(&s[0], 9, &[("fd", a), ("flags", 0)]);
    assert_eq!(addr(&s[0], "addr"), to);
    assert_eq!(bytes(&s[0], "data"), b"hello msg", "gathered from two iovecs");
    expect(&s[1], 200, &[("fd", a), ("flags", 0)]);
    assert_eq!(bytes(&s[1], "data"), &payload()[..80]);
    expect(&s[2], -EBADF as i64, &[("fd", BADFD), ("flags", 0)]);
    assert_eq!(addr(&s[2], "addr"), to);
    assert_eq!(bytes(&s[2], "data"), b"hello msg", "sendmsg data is the caller's");

    let r = exactly(&c, "recvmsg", 3);
    expect(&r[0], 9, &[("fd", b), ("flags", 0)]);
    assert_eq!(addr(&r[0], "addr"), sender);
    assert_eq!(bytes(&r[0], "addr"), a_addr.bytes());
    assert_eq!(bytes(&r[0], "data"), b"hello msg", "scattered over 4 + 300 bytes");
    expect(&r[1], 200, &[("fd", b), ("flags", 0)]);
    assert_eq!(bytes(&r[1], "data"), &payload()[..80]);
    expect(&r[2], -EAGAIN as i64, &[("fd", b), ("flags", dontwait)]);
    assert_eq!(bytes(&r[2], "data"), b"", "nothing received");
    assert_eq!(bytes(&r[2], "addr"), b"", "a failed recvmsg has no sender");
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn setsockopt_and_shutdown(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut fds = Fds::default();
    let (a, b) = {
        let mut sv = [0i32; 2];
        let r = unsafe { libc::socketpair(AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) };
        assert_eq!(r, 0);
        (fds.keep(sv[0] as i64), fds.keep(sv[1] as i64))
    };
    let tcp = fds.keep(socket(AF_INET, libc::SOCK_STREAM));
    let (one, rcvbuf) = (1i32.to_ne_bytes(), 65536i32.to_ne_bytes());
    let (sol, tcp_level) = (libc::SOL_SOCKET as i64, libc::IPPROTO_TCP as i64);
    let c = capture("setsockopt,shutdown", || {
        sys(libc::SYS_setsockopt, &[a, sol, libc::SO_RCVBUF as i64, rcvbuf.as_ptr() as i64, 4]);
        sys(libc::SYS_setsockopt, &[tcp, tcp_level, libc::TCP_NODELAY as i64, one.as_ptr() as i64, 4]);
        // An int option given 2 bytes.
        sys(libc::SYS_setsockopt, &[a, sol, libc::SO_RCVBUF as i64, one.as_ptr() as i64, 2]);
        sys(libc::SYS_shutdown, &[a, libc::SHUT_WR as i64]);
        sys(libc::SYS_shutdown, &[tcp, libc::SHUT_RDWR as i64]);
    });
    let _ = b;
    let e = exactly(&c, "setsockopt", 3);
    expect(&e[0], 0, &[("fd", a), ("level", sol), ("optname", libc::SO_RCVBUF as i64)]);
    assert_eq!(names(&e[0], "level"), "SOL_SOCKET");
    assert_eq!(bytes(&e[0], "optval"), rcvbuf);
    expect(&e[1], 0, &[("fd", tcp), ("level", tcp_level), ("optname", libc::TCP_NODELAY as i64)]);
    assert_eq!(bytes(&e[1], "optval"), one);
    expect(&e[2], -EINVAL as i64, &[("fd", a), ("level", sol), ("optname", libc::SO_RCVBUF as i64)]);
    assert_eq!(bytes(&e[2], "optval"), &one[..2]);

    let e = exactly(&c, "shutdown", 2);
    expect(&e[0], 0, &[("fd", a), ("how", libc::SHUT_WR as i64)]);
    assert_eq!(names(&e[0], "how"), "SHUT_WR");
    expect(&e[1], -ENOTCONN as i64, &[("fd", tcp), ("how", libc::SHUT_RDWR as i64)]);
}
