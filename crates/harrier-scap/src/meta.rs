//! The metadata blocks: section header, machine info, process lists (v1-v9),
//! fd lists (v1, v2), user/group lists (v1, v2), interface lists (v1, v2).
//! Each parser reads only inside its block's body and reports the file
//! offset of the first field that does not fit.

use crate::error::{text, Cursor, Error, Result};
use crate::snapshot::*;
use crate::source::{Block, SHB_MAGIC};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const MI: [u32; 2] = [0x201, 0x8002ABCD];
pub const FDL: [u32; 3] = [0x203, 0x8001ABCD, 0x218];
pub const IL: [u32; 3] = [0x205, 0x8011ABCD, 0x219];
pub const UL: [u32; 3] = [0x206, 0x8012ABCD, 0x220];

/// Process-list version of a block type (1-9), if it is one.
pub fn proclist_version(kind: u32) -> Option<u32> {
    Some(match kind {
        0x202 | 0x8000ABCD => 1,
        0x207 | 0x8013ABCD => 2,
        0x209 | 0x8014ABCD => 3,
        0x210..=0x215 => kind - 0x210 + 4,
        _ => return None,
    })
}

pub fn section_header(b: &Block) -> Result<SectionHeader> {
    let mut c = Cursor::new(b.body, b.body_offset());
    let at = c.offset();
    let magic = c.u32("section header magic")?;
    if magic == SHB_MAGIC.swap_bytes() {
        return Err(Error::new(at, "big-endian capture: not supported"));
    }
    if magic != SHB_MAGIC {
        return Err(Error::new(at, format!("bad section header magic {magic:#x}")));
    }
    let major = c.u16("section header version")?;
    let minor = c.u16("section header version")?;
    if major != 1 {
        return Err(Error::new(at + 4, format!("section header version {major}.{minor}: only 1.x is known")));
    }
    // section length (u64) and pcapng options (comments) follow: not needed.
    Ok(SectionHeader { major, minor })
}

pub fn machine_info(b: &Block) -> Result<MachineInfo> {
    let mut c = Cursor::new(b.body, b.body_offset());
    let mut m = MachineInfo {
        num_cpus: c.u32("machine info")?,
        memory_bytes: c.u64("machine info")?,
        max_pid: c.u64("machine info")?,
        hostname: text(split_nul(c.bytes(128, "machine info hostname")?)),
        ..Default::default()
    };
    // Older writers ended here or had reserved words; boot time came later.
    if c.left() >= 8 {
        m.boot_ts = c.u64("machine info")?;
    }
    Ok(m)
}

fn split_nul(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

/// NUL-separated strings (argv, env, cgroups), without empty trailing ones.
pub fn strings(b: &[u8]) -> Vec<String> {
    let b = crate::error::trim_nul(b);
    if b.is_empty() {
        return Vec::new();
    }
    b.split(|&c| c == 0).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
}

/// One process-list block: its threads in file order.
pub fn proclist(b: &Block, version: u32) -> Result<Vec<ProcessSnapshot>> {
    let mut c = Cursor::new(b.body, b.body_offset());
    let mut out = Vec::new();
    while c.left() >= 4 {
        let start = c.at;
        // v9 entries start with their own length (the length word included),
        // so fields added by newer writers can be skipped.
        let sub_len = if version >= 9 { c.u32("process entry length")? as usize } else { 0 };
        if version >= 9 && (sub_len < 4 || sub_len > c.left() + 4) {
            return Err(Error::new(
                c.base + start as u64,
                format!("process entry length {sub_len} does not fit its block"),
            ));
        }
        let mut p = ProcessSnapshot {
            sid: -1,
            vpgid: -1,
            vtid: -1,
            vpid: -1,
            loginuid: u32::MAX,
            ..Default::default()
        };
        p.tid = c.u64("tid")?;
        p.pid = c.u64("pid")?;
        p.ppid = c.u64("ptid")?;
        if version >= 6 {
            p.sid = c.u64("sid")? as i64;
        }
        if version >= 8 {
            p.vpgid = c.u64("vpgid")? as i64;
        }
        p.comm = c.str16("comm")?;
        p.exe = c.str16("exe")?;
        if version >= 7 {
            p.exepath = c.str16("exepath")?;
        }
        let n = c.u16("args")? as usize;
        p.args = strings(c.bytes(n, "args")?);
        p.cwd = c.str16("cwd")?;
        p.fdlimit = c.u64("fdlimit")?;
        p.flags = c.u32("flags")?;
        p.uid = c.u32("uid")?;
        p.gid = c.u32("gid")?;
        if version >= 2 {
            c.skip(4 * 3 + 8 * 2, "memory counters")?; // vmsize, vmrss, vmswap, pfmajor, pfminor
        }
        if version >= 3 {
            let n = c.u16("env")? as usize;
            p.env = strings(c.bytes(n, "env")?);
        }
        if version >= 4 {
            p.vtid = c.u64("vtid")? as i64;
            p.vpid = c.u64("vpid")? as i64;
            let n = c.u16("cgroups")? as usize;
            p.cgroups = strings(c.bytes(n, "cgroups")?);
        }
        if version >= 5 {
            p.root = c.str16("root")?;
        }
        if version >= 9 {
            let end = start + sub_len;
            let room = |c: &Cursor, n: usize| c.at + n <= end;
            // Writers from libs 0.10 on put pidns_init_start_ts and tty before
            // loginuid; older v9 writers had at most the 29 bytes of loginuid,
            // exe_writable and the three capability sets left at this point.
            if end.saturating_sub(c.at) > 29 {
                if room(&c, 8) {
                    c.skip(8, "pidns_init_start_ts")?;
                }
                if room(&c, 4) {
                    p.tty = c.u32("tty")?;
                }
            }
            if room(&c, 4) {
                p.loginuid = c.u32("loginuid")?;
            }
            if room(&c, 1) {
                c.skip(1, "exe_writable")?;
            }
            if room(&c, 16) {
                p.cap_inheritable = c.u64("cap_inheritable")?;
                p.cap_permitted = c.u64("cap_permitted")?;
            }
            if room(&c, 8) {
                p.cap_effective = c.u64("cap_effective")?;
            }
            if room(&c, 1) {
                c.skip(1, "exe_upper_layer")?;
            }
            if room(&c, 24) {
                p.exe_ino = c.u64("exe_ino")?;
                p.exe_ino_ctime = c.u64("exe_ino_ctime")?;
                p.exe_ino_mtime = c.u64("exe_ino_mtime")?;
            }
            if c.at > end {
                return Err(c.err(format!("process entry read past its length {sub_len}")));
            }
            c.at = end; // whatever newer writers added
        }
        p.container_id = container_id_of(&p.cgroups);
        out.push(p);
    }
    Ok(out)
}

fn ip4(v: u32) -> IpAddr {
    // Stored as the kernel holds it: network order in memory.
    IpAddr::V4(Ipv4Addr::from(v.to_le_bytes()))
}

fn ip6(b: &[u8]) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap()))
}

fn l4(p: u8) -> String {
    match p {
        2 => "tcp".into(),
        3 => "udp".into(),
        4 => "raw".into(),
        5 => "icmp".into(),
        n => n.to_string(),
    }
}

fn fd_kind(t: u8) -> FdKind {
    use FdKind::*;
    match t {
        1 | 16 => File,
        2 => Directory,
        3 => Ipv4Socket,
        4 => Ipv6Socket,
        5 => Ipv4Server,
        6 => Ipv6Server,
        7 => Fifo,
        8 => Unix,
        9 => Event,
        10 => Unsupported,
        11 => Signalfd,
        12 => Eventpoll,
        13 => Inotify,
        14 => Timerfd,
        15 => Netlink,
        17 => Bpf,
        18 => Userfaultfd,
        19 => IoUring,
        20 => Memfd,
        21 => Pidfd,
        n => Other(n),
    }
}

/// One fd-list block: the thread it belongs to and its fds.
pub fn fdlist(b: &Block) -> Result<(u64, Vec<FdSnapshot>)> {
    let v2 = b.kind == 0x218;
    let mut c = Cursor::new(b.body, b.body_offset());
    let tid = c.u64("fd list tid")?;
    let mut out = Vec::new();
    while c.left() >= 4 {
        let start = c.at;
        let sub_len = if v2 { c.u32("fd entry length")? as usize } else { 0 };
        if v2 && (sub_len < 4 || sub_len > c.left() + 4) {
            return Err(Error::new(
                c.base + start as u64,
                format!("fd entry length {sub_len} does not fit its block"),
            ));
        }
        let fd = c.u64("fd")? as i64;
        let ino = c.u64("fd inode")?;
        let t = c.u8("fd type")?;
        let mut e = FdSnapshot { fd, ino, kind: fd_kind(t), name: String::new(), open_flags: 0, tuple: None };
        match t {
            3 => {
                let sip = ip4(c.u32("fd sip")?);
                let dip = ip4(c.u32("fd dip")?);
                let sport = c.u16("fd sport")?;
                let dport = c.u16("fd dport")?;
                let t = Tuple { l4proto: l4(c.u8("fd l4proto")?), sip, sport, dip, dport };
                e.name = format!("{sip}:{sport}->{dip}:{dport}");
                e.tuple = Some(t);
            }
            5 => {
                let ip = ip4(c.u32("fd ip")?);
                let port = c.u16("fd port")?;
                let p = l4(c.u8("fd l4proto")?);
                e.name = format!("{ip}:{port}");
                e.tuple = Some(Tuple { l4proto: p, sip: ip, sport: port, dip: ip, dport: 0 });
            }
            4 => {
                let sip = ip6(c.bytes(16, "fd sip")?);
                let dip = ip6(c.bytes(16, "fd dip")?);
                let sport = c.u16("fd sport")?;
                let dport = c.u16("fd dport")?;
                let t = Tuple { l4proto: l4(c.u8("fd l4proto")?), sip, sport, dip, dport };
                e.name = format!("[{sip}]:{sport}->[{dip}]:{dport}");
                e.tuple = Some(t);
            }
            6 => {
                let ip = ip6(c.bytes(16, "fd ip")?);
                let port = c.u16("fd port")?;
                let p = l4(c.u8("fd l4proto")?);
                e.name = format!("[{ip}]:{port}");
                e.tuple = Some(Tuple { l4proto: p, sip: ip, sport: port, dip: ip, dport: 0 });
            }
            8 => {
                c.skip(16, "fd unix endpoints")?;
                e.name = c.str16("fd unix path")?;
            }
            16 => {
                e.open_flags = c.u32("fd open flags")?;
                e.name = c.str16("fd name")?;
                // dev (u32) may follow in v2 entries: skipped with the rest below.
            }
            0 => {} // unknown: no name stored
            1 | 2 | 7 | 9..=15 | 17..=21 => e.name = c.str16("fd name")?,
            _ if v2 => {} // a newer type: its entry length lets us skip it
            n => return Err(c.err(format!("fd type {n} unknown in a v1 fd list (its size cannot be known)"))),
        }
        if v2 {
            let end = start + sub_len;
            if c.at > end {
                return Err(c.err(format!("fd entry read past its length {sub_len}")));
            }
            c.at = end;
        }
        out.push(e);
    }
    Ok((tid, out))
}

/// One user-list block: its users and groups.
pub fn userlist(b: &Block) -> Result<(Vec<User>, Vec<Group>)> {
    let v2 = b.kind == 0x220;
    let mut c = Cursor::new(b.body, b.body_offset());
    let (mut users, mut groups) = (Vec::new(), Vec::new());
    while c.left() >= 4 {
        let start = c.at;
        let sub_len = if v2 { c.u32("user entry length")? as usize } else { 0 };
        if v2 && (sub_len < 4 || sub_len > c.left() + 4) {
            return Err(Error::new(
                c.base + start as u64,
                format!("user entry length {sub_len} does not fit its block"),
            ));
        }
        if c.u8("user entry type")? == 0 {
            let uid = c.u32("uid")?;
            let gid = c.u32("gid")?;
            let name = c.str16("user name")?;
            let home = c.str16("home")?;
            let shell = c.str16("shell")?;
            users.push(User { uid, gid, name, home, shell, container_id: String::new() });
        } else {
            let gid = c.u32("gid")?;
            let name = c.str16("group name")?;
            groups.push(Group { gid, name, container_id: String::new() });
        }
        if v2 {
            let end = start + sub_len;
            if c.at > end {
                return Err(c.err(format!("user entry read past its length {sub_len}")));
            }
            c.at = end;
        }
    }
    Ok((users, groups))
}

/// One interface-list block.
pub fn iflist(b: &Block) -> Result<Vec<Interface>> {
    let v2 = b.kind == 0x219;
    let mut c = Cursor::new(b.body, b.body_offset());
    let mut out = Vec::new();
    while c.left() >= 4 {
        // v2 entries start with their length, not counting the length word.
        let end = if v2 {
            let n = c.u32("interface entry length")? as usize;
            if n > c.left() {
                return Err(c.err(format!("interface entry length {n} does not fit its block")));
            }
            Some(c.at + n)
        } else {
            None
        };
        let t = c.u16("interface type")?;
        let namelen = c.u16("interface name length")? as usize;
        let (addr, netmask, bcast, linkspeed) = match t {
            1 | 3 => {
                let a = ip4(c.u32("ipv4 address")?);
                let m = ip4(c.u32("ipv4 netmask")?);
                let b = ip4(c.u32("ipv4 broadcast")?);
                (a, m, b, if t == 1 { c.u64("link speed")? } else { 0 })
            }
            2 | 4 => {
                let a = ip6(c.bytes(16, "ipv6 address")?);
                let m = ip6(c.bytes(16, "ipv6 netmask")?);
                let b = ip6(c.bytes(16, "ipv6 broadcast")?);
                (a, m, b, if t == 2 { c.u64("link speed")? } else { 0 })
            }
            n => return Err(c.err(format!("unknown interface type {n}"))),
        };
        let name = text(c.bytes(namelen, "interface name")?);
        if let Some(end) = end {
            if c.at > end {
                return Err(c.err("interface entry read past its length"));
            }
            c.at = end;
        }
        out.push(Interface { name, addr, netmask, bcast, linkspeed });
    }
    Ok(out)
}
