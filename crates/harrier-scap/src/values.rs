//! Reading and converting legacy parameter values: integers of any stored
//! width, strings, the libs' own sockaddr/tuple layouts (turned into the
//! kernel's struct sockaddr bytes that Harrier's events carry), and flag
//! sets whose bits differ from Linux's.

use crate::table::PKind;
use std::net::{Ipv4Addr, Ipv6Addr};

/// An integer parameter of 1, 2, 4 or 8 bytes, sign-extended when signed.
pub fn int(b: &[u8], kind: PKind) -> Option<i64> {
    let signed = kind == PKind::Int;
    Some(match b.len() {
        1 if signed => b[0] as i8 as i64,
        1 => b[0] as i64,
        2 if signed => i16::from_le_bytes([b[0], b[1]]) as i64,
        2 => u16::from_le_bytes([b[0], b[1]]) as i64,
        4 if signed => i32::from_le_bytes(b.try_into().unwrap()) as i64,
        4 => u32::from_le_bytes(b.try_into().unwrap()) as i64,
        8 => i64::from_le_bytes(b.try_into().unwrap()),
        _ => return None,
    })
}

const AF_UNIX: u8 = 1;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// One endpoint of a legacy address: family, address bytes, port (host order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint<'a> {
    V4([u8; 4], u16),
    V6([u8; 16], u16),
    Unix(&'a [u8]),
}

fn port(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

/// A legacy sockaddr: family byte, then ip+port (ports in host order) or a unix path.
pub fn sockaddr(b: &[u8]) -> Option<Endpoint<'_>> {
    match (*b.first()?, b.len()) {
        (AF_INET, 7..) => Some(Endpoint::V4(b[1..5].try_into().unwrap(), port(&b[5..7]))),
        (AF_INET6, 19..) => Some(Endpoint::V6(b[1..17].try_into().unwrap(), port(&b[17..19]))),
        (AF_UNIX, _) => Some(Endpoint::Unix(crate::error::trim_nul(&b[1..]))),
        _ => None,
    }
}

/// A legacy socket tuple: (source, destination).
pub fn tuple(b: &[u8]) -> Option<(Endpoint<'_>, Endpoint<'_>)> {
    match (*b.first()?, b.len()) {
        (AF_INET, 13..) => Some((
            Endpoint::V4(b[1..5].try_into().unwrap(), port(&b[5..7])),
            Endpoint::V4(b[7..11].try_into().unwrap(), port(&b[11..13])),
        )),
        (AF_INET6, 37..) => Some((
            Endpoint::V6(b[1..17].try_into().unwrap(), port(&b[17..19])),
            Endpoint::V6(b[19..35].try_into().unwrap(), port(&b[35..37])),
        )),
        // Unix tuples carry two kernel pointers, then the path.
        (AF_UNIX, 17..) => Some((Endpoint::Unix(b""), Endpoint::Unix(crate::error::trim_nul(&b[17..])))),
        _ => None,
    }
}

/// The kernel's struct sockaddr bytes for an endpoint, appended to `out`.
pub fn to_kernel_sockaddr(e: Endpoint, out: &mut Vec<u8>) {
    match e {
        Endpoint::V4(ip, p) => {
            out.extend_from_slice(&(AF_INET as u16).to_le_bytes());
            out.extend_from_slice(&p.to_be_bytes());
            out.extend_from_slice(&ip);
            out.extend_from_slice(&[0; 8]);
        }
        Endpoint::V6(ip, p) => {
            out.extend_from_slice(&(AF_INET6 as u16).to_le_bytes());
            out.extend_from_slice(&p.to_be_bytes());
            out.extend_from_slice(&[0; 4]); // flowinfo
            out.extend_from_slice(&ip);
            out.extend_from_slice(&[0; 4]); // scope id
        }
        Endpoint::Unix(path) => {
            out.extend_from_slice(&(AF_UNIX as u16).to_le_bytes());
            out.extend_from_slice(path);
            out.push(0);
        }
    }
}

pub fn endpoint_text(e: Endpoint) -> String {
    match e {
        Endpoint::V4(ip, p) => format!("{}:{p}", Ipv4Addr::from(ip)),
        Endpoint::V6(ip, p) => format!("[{}]:{p}", Ipv6Addr::from(ip)),
        Endpoint::Unix(path) => String::from_utf8_lossy(path).into_owned(),
    }
}

/// Printable text of any parameter, for events kept in their legacy form.
pub fn render(b: &[u8], kind: PKind) -> String {
    match kind {
        PKind::Int | PKind::UInt => match int(b, kind) {
            Some(v) if kind == PKind::UInt && b.len() == 8 => (v as u64).to_string(),
            Some(v) => v.to_string(),
            None => hex(b),
        },
        PKind::Str => crate::error::text(b),
        PKind::Bytes => harrier_schema::decode::printable(b),
        PKind::Sockaddr => sockaddr(b).map_or_else(|| hex(b), endpoint_text),
        PKind::Socktuple => {
            tuple(b).map_or_else(|| hex(b), |(s, d)| format!("{}->{}", endpoint_text(s), endpoint_text(d)))
        }
        PKind::Strings => crate::meta::strings(b).join(" "),
        PKind::IpAddr => match b.len() {
            4 => Ipv4Addr::from(<[u8; 4]>::try_from(b).unwrap()).to_string(),
            16 => Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap()).to_string(),
            _ => hex(b),
        },
        PKind::FdList => {
            // u16 count, then (u64 fd, u16 flags) each.
            let n = b.get(..2).map_or(0, |c| u16::from_le_bytes([c[0], c[1]]) as usize);
            b.get(2..)
                .unwrap_or_default()
                .chunks_exact(10)
                .take(n)
                .map(|e| i64::from_le_bytes(e[..8].try_into().unwrap()).to_string())
                .collect::<Vec<_>>()
                .join(",")
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02x}")).collect()
}

/// The libs' open flags (PPM_O_*) as Linux's O_* bits.
pub fn open_flags(ppm: u32) -> u32 {
    // Access mode: PPM has RDONLY=1, WRONLY=2, RDWR=3; Linux 0, 1, 2.
    let mut f = match ppm & 3 {
        2 => 0o1,
        3 => 0o2,
        _ => 0,
    };
    const MAP: [(u32, u32); 11] = [
        (1 << 2, 0o100),      // O_CREAT
        (1 << 3, 0o2000),     // O_APPEND
        (1 << 4, 0o10000),    // O_DSYNC
        (1 << 5, 0o200),      // O_EXCL
        (1 << 6, 0o4000),     // O_NONBLOCK
        (1 << 7, 0o4010000),  // O_SYNC
        (1 << 8, 0o1000),     // O_TRUNC
        (1 << 9, 0o40000),    // O_DIRECT
        (1 << 10, 0o200000),  // O_DIRECTORY
        (1 << 11, 0o100000),  // O_LARGEFILE
        (1 << 12, 0o2000000), // O_CLOEXEC
    ];
    for (p, l) in MAP {
        if ppm & p != 0 {
            f |= l;
        }
    }
    if ppm & (1 << 13) != 0 {
        f |= 0o20200000; // O_TMPFILE (includes O_DIRECTORY)
    }
    f
}

/// The libs' clone flags (PPM_CL_*) as Linux's CLONE_* bits; bits with no
/// Linux counterpart (the libs' own markers) are dropped.
pub fn clone_flags(ppm: u64) -> u64 {
    const MAP: [(u32, u64); 23] = [
        (0, 0x400),       // FILES
        (1, 0x200),       // FS
        (2, 0x80000000),  // IO
        (3, 0x8000000),   // NEWIPC
        (4, 0x40000000),  // NEWNET
        (5, 0x20000),     // NEWNS
        (6, 0x20000000),  // NEWPID
        (7, 0x4000000),   // NEWUTS
        (8, 0x8000),      // PARENT
        (9, 0x100000),    // PARENT_SETTID
        (10, 0x2000),     // PTRACE
        (11, 0x800),      // SIGHAND
        (12, 0x40000),    // SYSVSEM
        (13, 0x10000),    // THREAD
        (14, 0x800000),   // UNTRACED
        (15, 0x100),      // VM
        (20, 0x10000000), // NEWUSER
        (23, 0x200000),   // CHILD_CLEARTID
        (24, 0x1000000),  // CHILD_SETTID
        (25, 0x80000),    // SETTLS
        (26, 0x2000000),  // STOPPED
        (27, 0x4000),     // VFORK
        (28, 0x2000000),  // NEWCGROUP
    ];
    let mut f = 0;
    for (bit, l) in MAP {
        if ppm & (1 << bit) != 0 {
            f |= l;
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_of_every_width() {
        assert_eq!(int(&[0xff], PKind::Int), Some(-1));
        assert_eq!(int(&[0xff], PKind::UInt), Some(255));
        assert_eq!(int(&(-100i64).to_le_bytes(), PKind::Int), Some(-100));
        assert_eq!(int(&(-2i32).to_le_bytes(), PKind::Int), Some(-2));
        assert_eq!(int(&[1, 2, 3], PKind::Int), None);
    }

    #[test]
    fn addresses_become_kernel_sockaddrs() {
        let mut b = vec![AF_INET, 127, 0, 0, 1];
        b.extend(8080u16.to_le_bytes());
        let mut out = Vec::new();
        to_kernel_sockaddr(sockaddr(&b).unwrap(), &mut out);
        assert_eq!(harrier_schema::sockaddr::format(&out), "127.0.0.1:8080");
        let mut t = vec![AF_INET6];
        t.extend(std::net::Ipv6Addr::LOCALHOST.octets());
        t.extend(5000u16.to_le_bytes());
        t.extend(std::net::Ipv6Addr::LOCALHOST.octets());
        t.extend(80u16.to_le_bytes());
        let (s, d) = tuple(&t).unwrap();
        out.clear();
        to_kernel_sockaddr(d, &mut out);
        assert_eq!(harrier_schema::sockaddr::format(&out), "[::1]:80");
        assert_eq!(endpoint_text(s), "[::1]:5000");
        out.clear();
        to_kernel_sockaddr(sockaddr(b"\x01/run/x.sock\0").unwrap(), &mut out);
        assert_eq!(harrier_schema::sockaddr::format(&out), "/run/x.sock");
        assert!(sockaddr(&[AF_INET, 1]).is_none(), "short");
    }

    #[test]
    fn flags_are_translated() {
        assert_eq!(open_flags(1 | (1 << 12)), 0o2000000, "O_RDONLY|O_CLOEXEC");
        assert_eq!(open_flags(2 | (1 << 2) | (1 << 8)), 0o1101, "O_WRONLY|O_CREAT|O_TRUNC");
        assert_eq!(open_flags(3), 0o2, "O_RDWR");
        assert_eq!(clone_flags((1 << 13) | (1 << 15)), 0x10100, "CLONE_THREAD|CLONE_VM");
    }
}
