//! Per-process file descriptor tables.

use crate::IdMap;
use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// What a descriptor refers to (Falco's fd.type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdType {
    File,
    Directory,
    Ipv4,
    Ipv6,
    Unix,
    Netlink,
    /// Any other socket family (packet, vsock...).
    Socket,
    Pipe,
    Memfd,
    Event,
    Signalfd,
    Timerfd,
    Inotify,
    Eventpoll,
    /// Any other anonymous inode (bpf-map, pidfd, userfaultfd...).
    Other,
}

impl FdType {
    /// Falco's fd.type names.
    pub fn name(self) -> &'static str {
        match self {
            FdType::File => "file",
            FdType::Directory => "directory",
            FdType::Ipv4 => "ipv4",
            FdType::Ipv6 => "ipv6",
            FdType::Unix => "unix",
            FdType::Netlink => "netlink",
            // A socket of another family (packet, ...): Falco's SCAP_FD_UNKNOWN.
            FdType::Socket => "<NA>",
            FdType::Pipe => "pipe",
            FdType::Memfd => "memfd",
            FdType::Event => "event",
            FdType::Signalfd => "signalfd",
            FdType::Timerfd => "timerfd",
            FdType::Inotify => "inotify",
            FdType::Eventpoll => "eventpoll",
            FdType::Other => "unknown",
        }
    }

    /// Falco's fd.typechar.
    pub fn typechar(self) -> char {
        match self {
            FdType::File => 'f',
            FdType::Directory => 'd',
            FdType::Ipv4 => '4',
            FdType::Ipv6 => '6',
            FdType::Unix => 'u',
            FdType::Netlink => 'n',
            FdType::Socket => 'o',
            FdType::Pipe => 'p',
            FdType::Memfd => 'm',
            FdType::Event => 'e',
            FdType::Signalfd => 's',
            FdType::Timerfd => 't',
            FdType::Inotify => 'i',
            FdType::Eventpoll => 'l',
            FdType::Other => 'o',
        }
    }

    pub fn is_socket(self) -> bool {
        matches!(self, FdType::Ipv4 | FdType::Ipv6 | FdType::Unix | FdType::Netlink | FdType::Socket)
    }
}

/// Layer-4 protocol of an inet socket (Falco's fd.l4proto).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum L4 {
    #[default]
    Unknown,
    Tcp,
    Udp,
    Icmp,
    Raw,
}

impl L4 {
    pub fn name(self) -> &'static str {
        match self {
            L4::Unknown => "<NA>",
            L4::Tcp => "tcp",
            L4::Udp => "udp",
            L4::Icmp => "icmp",
            L4::Raw => "raw",
        }
    }
}

/// Addresses of an inet socket: 16-byte IPs (IPv4 as ::ffff:a.b.c.d is not
/// used; `v6` says how to read them). Ports in host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tuple {
    pub v6: bool,
    pub l4: L4,
    pub sip: [u8; 16],
    pub dip: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    /// This side accepted the connection: Falco's client is the peer (d*).
    pub server: bool,
}

impl Tuple {
    fn ip(&self, b: &[u8; 16]) -> IpAddr {
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(*b))
        } else {
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        }
    }
    pub fn sip(&self) -> IpAddr {
        self.ip(&self.sip)
    }
    pub fn dip(&self) -> IpAddr {
        self.ip(&self.dip)
    }
    /// Falco's fd.name for a connected inet socket: "client:port->server:port"
    /// (local->peer after connect, peer->local after accept).
    pub fn name(&self) -> String {
        self.name_arc().to_string()
    }

    /// [`Tuple::name`] as the fd keeps it.
    pub fn name_arc(&self) -> Arc<str> {
        Arc::from(self.name_buf().as_str())
    }

    /// [`Tuple::name`] written on the stack: every connect and accept
    /// renames its fd (harrier-state's Names reuses the fd's string).
    pub(crate) fn name_buf(&self) -> NameBuf {
        let (c, cp, s, sp) = match self.server {
            false => (&self.sip, self.sport, &self.dip, self.dport),
            true => (&self.dip, self.dport, &self.sip, self.sport),
        };
        let mut w = NameBuf { buf: [0; 128], len: 0 };
        self.put_end(&mut w, c, cp);
        w.put(b"->");
        self.put_end(&mut w, s, sp);
        w
    }

    fn put_end(&self, w: &mut NameBuf, ip: &[u8; 16], port: u16) {
        if self.v6 {
            // Rare enough for the formatter: "[v6]".
            let _ = write!(w, "[{}]", Ipv6Addr::from(*ip));
        } else {
            for (i, &b) in ip[..4].iter().enumerate() {
                if i > 0 {
                    w.put(b".");
                }
                w.put_num(b as u64);
            }
        }
        w.put(b":");
        w.put_num(port as u64);
    }
}

/// A tuple's name as it is written: room for two bracketed IPv6 ends.
pub(crate) struct NameBuf {
    buf: [u8; 128],
    len: usize,
}

impl NameBuf {
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }

    fn put(&mut self, b: &[u8]) {
        let n = b.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&b[..n]);
        self.len += n;
    }

    fn put_num(&mut self, v: u64) {
        self.put(itoa::Buffer::new().format(v).as_bytes());
    }
}

impl std::fmt::Write for NameBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.put(s.as_bytes());
        Ok(())
    }
}

/// One open descriptor. `name` is shared (Arc) so dup and fork copy it
/// without allocating.
#[derive(Debug, Clone)]
pub struct Fd {
    pub typ: FdType,
    /// Close-on-exec: dropped at a successful exec.
    pub cloexec: bool,
    /// open flags (O_*) for files; the socket type for sockets.
    pub flags: u32,
    /// Falco's fd.name: the path the kernel resolved, "sip:sport->dip:dport",
    /// a unix socket's path, "pipe:[ino]", "anon_inode:[eventfd]"...
    pub name: Arc<str>,
    /// Inet sockets only (boxed: most descriptors are files).
    pub tuple: Option<Box<Tuple>>,
}

impl Fd {
    pub fn new(typ: FdType, name: Arc<str>, cloexec: bool) -> Fd {
        Fd { typ, cloexec, flags: 0, name, tuple: None }
    }

    /// Falco's fd.directory: the name up to its last '/'.
    pub fn directory(&self) -> &str {
        match self.name.rfind('/') {
            Some(0) => "/",
            Some(i) => &self.name[..i],
            None => "",
        }
    }

    /// Falco's fd.filename: the name after its last '/'.
    pub fn filename(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or("")
    }
}

/// The descriptors of one process.
#[derive(Debug, Clone, Default)]
pub struct FdTable {
    fds: IdMap<i32, Fd>,
}

impl FdTable {
    pub fn get(&self, fd: i32) -> Option<&Fd> {
        self.fds.get(&fd)
    }
    pub fn get_mut(&mut self, fd: i32) -> Option<&mut Fd> {
        self.fds.get_mut(&fd)
    }
    pub fn insert(&mut self, fd: i32, f: Fd) {
        self.fds.insert(fd, f);
    }
    pub fn remove(&mut self, fd: i32) -> Option<Fd> {
        self.fds.remove(&fd)
    }
    /// dup/dup2/dup3/F_DUPFD: the new descriptor shares the open file.
    pub fn dup(&mut self, old: i32, new: i32, cloexec: bool) {
        if let Some(f) = self.fds.get(&old) {
            let f = Fd { cloexec, ..f.clone() };
            self.fds.insert(new, f);
        }
    }
    /// close_range(first, last).
    pub fn close_range(&mut self, first: u32, last: u32, only_set_cloexec: bool) {
        let in_range = |fd: i32| fd >= 0 && (first..=last).contains(&(fd as u32));
        if only_set_cloexec {
            self.fds.iter_mut().filter(|(fd, _)| in_range(**fd)).for_each(|(_, f)| f.cloexec = true);
        } else {
            self.fds.retain(|fd, _| !in_range(*fd));
        }
    }
    /// A successful exec closes the close-on-exec descriptors.
    pub fn exec(&mut self) {
        self.fds.retain(|_, f| !f.cloexec);
    }
    pub fn len(&self) -> usize {
        self.fds.len()
    }
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = (i32, &Fd)> {
        self.fds.iter().map(|(k, v)| (*k, v))
    }
}

/// The type of the fd an open made, from the name the kernel gave the file:
/// a directory if asked for one; a name that is no path (a pipe reopened
/// through /proc/self/fd: make's and cargo's jobservers) is named as /proc
/// names it and has that type; else a file.
pub fn type_of_open(name: &[u8], directory: bool) -> FdType {
    match name.first() {
        _ if directory => FdType::Directory,
        Some(&c) if c != b'/' => type_of_link(&String::from_utf8_lossy(name)),
        _ => FdType::File,
    }
}

/// The descriptor type an anonymous inode or special file's /proc link
/// name stands for ("anon_inode:[eventfd]", "pipe:[123]"...).
pub fn type_of_link(name: &str) -> FdType {
    if name.starts_with("pipe:") {
        FdType::Pipe
    } else if name.starts_with("/memfd:") || name.starts_with("memfd:") {
        FdType::Memfd
    } else if let Some(anon) = name.strip_prefix("anon_inode:") {
        match anon.trim_matches(|c| c == '[' || c == ']') {
            "eventfd" => FdType::Event,
            "signalfd" => FdType::Signalfd,
            "timerfd" => FdType::Timerfd,
            "inotify" => FdType::Inotify,
            "eventpoll" => FdType::Eventpoll,
            _ => FdType::Other,
        }
    } else if name.starts_with('/') {
        FdType::File
    } else {
        FdType::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dup_close_range_exec() {
        let mut t = FdTable::default();
        t.insert(3, Fd::new(FdType::File, "/etc/passwd".into(), false));
        t.insert(4, Fd::new(FdType::File, "/tmp/x".into(), true));
        t.dup(3, 10, true);
        assert_eq!(&*t.get(10).unwrap().name, "/etc/passwd");
        assert!(t.get(10).unwrap().cloexec);
        t.exec();
        assert!(t.get(4).is_none() && t.get(10).is_none() && t.get(3).is_some());
        t.close_range(0, 100, false);
        assert!(t.is_empty());
    }

    #[test]
    fn names_split_and_types() {
        let f = Fd::new(FdType::File, "/etc/shadow".into(), false);
        assert_eq!((f.directory(), f.filename()), ("/etc", "shadow"));
        let f = Fd::new(FdType::File, "/x".into(), false);
        assert_eq!((f.directory(), f.filename()), ("/", "x"));
        assert_eq!(type_of_link("anon_inode:[eventfd]"), FdType::Event);
        assert_eq!(type_of_link("anon_inode:inotify"), FdType::Inotify);
        assert_eq!(type_of_link("pipe:[42]"), FdType::Pipe);
        assert_eq!(type_of_link("/memfd:x (deleted)"), FdType::Memfd);
        assert_eq!(type_of_open(b"/etc", true), FdType::Directory);
        assert_eq!(type_of_open(b"/etc/passwd", false), FdType::File);
        assert_eq!(type_of_open(b"pipe:[42]", false), FdType::Pipe);
        let t = Tuple {
            v6: false,
            l4: L4::Tcp,
            sip: [127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dip: [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            sport: 5,
            dport: 80,
            server: false,
        };
        assert_eq!(t.name(), "127.0.0.1:5->10.0.0.2:80");
        let accepted = Tuple { server: true, ..t };
        assert_eq!(accepted.name(), "10.0.0.2:80->127.0.0.1:5", "the peer is the client");
        // Against std's formatting, at the widths' edges.
        let std_name = |t: &Tuple| {
            let ip = |a: IpAddr| if t.v6 { format!("[{a}]") } else { a.to_string() };
            format!("{}:{}->{}:{}", ip(t.sip()), t.sport, ip(t.dip()), t.dport)
        };
        for (v6, sip, sport) in [(false, [255; 16], 65535), (false, [0; 16], 0), (true, [0xfe; 16], 1)] {
            let mut dip = [0u8; 16];
            dip[15] = 1;
            let t = Tuple { v6, sip, sport, dip, dport: 443, ..t };
            assert_eq!(t.name(), std_name(&t));
        }
    }
}
