//! Building legacy captures byte by byte, for the block-version and
//! hostile-input tests.
#![allow(dead_code)]

pub fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let total = (12 + body.len()) as u32;
    let mut b = Vec::new();
    b.extend(kind.to_le_bytes());
    b.extend(total.to_le_bytes());
    b.extend(body);
    b.extend(total.to_le_bytes());
    b
}

pub fn shb(major: u16, minor: u16) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(0x1A2B3C4Du32.to_le_bytes());
    body.extend(major.to_le_bytes());
    body.extend(minor.to_le_bytes());
    body.extend(u64::MAX.to_le_bytes());
    block(0x0A0D0D0A, &body)
}

pub fn str16(out: &mut Vec<u8>, s: &[u8]) {
    out.extend((s.len() as u16).to_le_bytes());
    out.extend(s);
}

/// An event block of any of the seven kinds.
pub fn event(block_kind: u32, ts: u64, tid: u64, kind: u16, params: &[&[u8]], large: bool) -> Vec<u8> {
    let v2 = matches!(block_kind, 0x216 | 0x221 | 0x217 | 0x222);
    let flags = matches!(block_kind, 0x208 | 0x217 | 0x222);
    let lsize = if large { 4 } else { 2 };
    let hdr = if v2 { 26 } else { 22 };
    let len = hdr + params.len() * lsize + params.iter().map(|p| p.len()).sum::<usize>();
    let mut b = Vec::new();
    b.extend(3u16.to_le_bytes()); // cpu
    if flags {
        b.extend(0x5u32.to_le_bytes());
    }
    b.extend(ts.to_le_bytes());
    b.extend(tid.to_le_bytes());
    b.extend((len as u32).to_le_bytes());
    b.extend(kind.to_le_bytes());
    if v2 {
        b.extend((params.len() as u32).to_le_bytes());
    }
    for p in params {
        if large {
            b.extend((p.len() as u32).to_le_bytes());
        } else {
            b.extend((p.len() as u16).to_le_bytes());
        }
    }
    for p in params {
        b.extend(*p);
    }
    block(block_kind, &b)
}

pub fn i64b(v: i64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}
pub fn u32b(v: u32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// A process-list entry of the given version (1-9) for thread `tid`.
pub fn proc_entry(version: u32, tid: u64) -> Vec<u8> {
    let mut e = Vec::new();
    e.extend(tid.to_le_bytes());
    e.extend((tid + 1).to_le_bytes()); // pid
    e.extend(1u64.to_le_bytes()); // ptid
    if version >= 6 {
        e.extend(77u64.to_le_bytes()); // sid
    }
    if version >= 8 {
        e.extend(78u64.to_le_bytes()); // vpgid
    }
    str16(&mut e, b"bash");
    str16(&mut e, b"-bash");
    if version >= 7 {
        str16(&mut e, b"/usr/bin/bash");
    }
    str16(&mut e, b"-c\0echo hi\0");
    str16(&mut e, b"/home/u");
    e.extend(1024u64.to_le_bytes()); // fdlimit
    e.extend(0u32.to_le_bytes()); // flags
    e.extend(1000u32.to_le_bytes()); // uid
    e.extend(1001u32.to_le_bytes()); // gid
    if version >= 2 {
        e.extend([0u8; 12 + 16]);
    }
    if version >= 3 {
        str16(&mut e, b"HOME=/home/u\0");
    }
    if version >= 4 {
        e.extend(5u64.to_le_bytes()); // vtid
        e.extend(6u64.to_le_bytes()); // vpid
        let id = "a".repeat(64);
        str16(&mut e, format!("cpu=/docker/{id}\0").as_bytes());
    }
    if version >= 5 {
        str16(&mut e, b"/");
    }
    if version >= 9 {
        e.extend(0u64.to_le_bytes()); // pidns_init_start_ts
        e.extend(34816u32.to_le_bytes()); // tty
        e.extend(1000u32.to_le_bytes()); // loginuid
        e.push(0); // exe_writable
        e.extend([0u8; 16]); // cap inheritable, permitted
        e.extend(0x1ffu64.to_le_bytes()); // cap effective
        e.extend([9u8; 13]); // fields of a newer writer, skipped
        let mut with_len = ((e.len() + 4) as u32).to_le_bytes().to_vec();
        with_len.extend(e);
        return with_len;
    }
    e
}

pub fn proclist_kind(version: u32) -> u32 {
    match version {
        1 => 0x202,
        2 => 0x207,
        3 => 0x209,
        v => 0x210 + v - 4,
    }
}
