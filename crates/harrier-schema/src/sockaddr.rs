//! struct sockaddr bytes → "1.2.3.4:80", "[::1]:443", "/run/x.sock", "@abstract".

use std::net::{Ipv4Addr, Ipv6Addr};

const AF_UNIX: u16 = 1;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

pub fn format(b: &[u8]) -> String {
    if b.len() < 2 {
        return String::new();
    }
    let family = u16::from_le_bytes([b[0], b[1]]);
    let port = || b.get(2..4).map(|p| u16::from_be_bytes([p[0], p[1]]));
    match family {
        AF_INET if b.len() >= 8 => {
            let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
            format!("{ip}:{}", port().unwrap_or(0))
        }
        AF_INET6 if b.len() >= 24 => {
            let ip: [u8; 16] = b[8..24].try_into().unwrap();
            format!("[{}]:{}", Ipv6Addr::from(ip), port().unwrap_or(0))
        }
        AF_UNIX => {
            let path = &b[2..];
            match path.first() {
                // Abstract names start with a NUL and are not NUL-terminated.
                Some(0) => format!("@{}", String::from_utf8_lossy(&path[1..]).trim_end_matches('\0')),
                _ => {
                    let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
                    String::from_utf8_lossy(&path[..end]).into_owned()
                }
            }
        }
        f => format!("family={f}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn families() {
        let v4 = [2, 0, 0x1f, 0x90, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(super::format(&v4), "127.0.0.1:8080");
        let mut v6 = vec![10, 0, 0x01, 0xbb, 0, 0, 0, 0];
        v6.extend(std::net::Ipv6Addr::LOCALHOST.octets());
        assert_eq!(super::format(&v6), "[::1]:443");
        assert_eq!(super::format(b"\x01\x00/run/a.sock\0junk"), "/run/a.sock");
        assert_eq!(super::format(b"\x01\x00\0name"), "@name");
        assert_eq!(super::format(&[]), "");
    }
}
