//! Packed event blocks (block encoding 1): every kind of record goes in and
//! comes back as exactly the same bytes, whatever its values, compressed or
//! not; packing shrinks the redis-shaped stream; files of format version 1
//! (unpacked) still read.

mod common;

use common::{read_all, snapshot, write_opts, Got};
use harrier_capfile::format::{BlockHeader, BLOCK_HEADER_LEN, FILE_HEADER_LEN};
use harrier_capfile::pack::{ENCODING_PACKED, ENCODING_WIRE};
use harrier_capfile::{ForeignEvent, Options, Stop};
use harrier_schema::wire::{ARGS_AT_EXIT, META_COMM};
use harrier_schema::{Wire, SYSCALLS};
use harrier_state::testing::{exec, exit, fork, syscall, P};

/// A record from its parts (header length filled in).
fn raw(ts: u64, tid: u32, kind: u16, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(ts.to_le_bytes());
    b.extend(tid.to_le_bytes());
    b.extend(kind.to_le_bytes());
    b.extend(((16 + body.len()) as u16).to_le_bytes());
    b.extend(body);
    b
}

/// The record cut or zero-extended to `n` bytes, its length field too.
fn resize(mut rec: Vec<u8>, n: usize) -> Vec<u8> {
    rec.resize(n, 0);
    rec[14..16].copy_from_slice(&(n as u16).to_le_bytes());
    rec
}

/// Integer values that hit every varint width and sign, per parameter index.
const INTS: [i64; 8] = [0, 1, -1, -100, 0x7fff_ffff, -0x8000_0000, i64::MAX, i64::MIN];

/// Every typed syscall with three sets of values, every generic syscall's
/// record, the life-cycle records, foreign records, and records that do
/// not match their type's layout (cut short, longer, flagged args-at-exit).
fn every_record() -> Vec<Got> {
    let mut v = Vec::new();
    let mut ts = 1_000_000_000_000u64;
    let mut tick = |d: u64| {
        ts = ts.wrapping_add(d);
        ts
    };
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    for (round, tid) in [(0usize, 4242u32), (1, 4242), (2, u32::MAX)] {
        for s in SYSCALLS {
            let Some(params) = s.params else {
                let mut body = Vec::new();
                for i in 0..7 {
                    body.extend(INTS[(i + round) % INTS.len()].to_le_bytes());
                }
                v.push(Got::Event(raw(tick(1), tid, s.nr as u16, &body)));
                continue;
            };
            let lens = [0usize, 1, 300];
            let given: Vec<(&str, P)> = params
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let val = match p.wire {
                        Wire::Bytes => P::B(&data[..lens[(i + round) % 3]]),
                        _ => P::I(INTS[(i * 3 + round) % INTS.len()]),
                    };
                    (p.name, val)
                })
                .collect();
            let ret = INTS[(s.nr as usize + round) % INTS.len()];
            v.push(Got::Event(syscall(tick(997), tid, s.name, ret, &given)));
        }
    }
    v.push(Got::Event(fork(tick(5), 100, 101, 101, "bash")));
    v.push(Got::Event(exec(tick(5), 101, 101, "cat", "/user.slice/x.scope")));
    v.push(Got::Event(exit(tick(5), 101, 101)));
    let mut comm = vec![0u8; 8];
    comm.extend(*b"newname\0\0\0\0\0\0\0\0\0");
    v.push(Got::Event(raw(tick(5), 101, META_COMM, &comm)));
    // A schema-2 fork (no vpid, flags): shorter than today's layout.
    let mut old_fork = vec![0u8; 8];
    old_fork.extend(7u32.to_le_bytes());
    old_fork.extend(7u32.to_le_bytes());
    old_fork.extend(*b"sh\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
    v.push(Got::Event(raw(tick(5), 101, harrier_schema::wire::META_FORK, &old_fork)));
    // Cut short at a field boundary (unlink without its path), cut inside a
    // field, one byte too long, and flagged as read at exit.
    v.push(Got::Event(resize(syscall(tick(5), 101, "unlink", -2, &[]), 24)));
    v.push(Got::Event(resize(syscall(tick(5), 101, "close", 0, &[("fd", P::I(3))]), 26)));
    v.push(Got::Event(resize(syscall(tick(5), 101, "close", 0, &[("fd", P::I(3))]), 29)));
    let mut rec = syscall(tick(5), 101, "openat", -2, &[("path", P::B(b"/etc/x"))]);
    let t = u16::from_le_bytes([rec[12], rec[13]]) | ARGS_AT_EXIT;
    rec[12..14].copy_from_slice(&t.to_le_bytes());
    v.push(Got::Event(rec));
    // Variable fields the kernel did not collect (length 0xffff, no bytes),
    // first and last, with a collected one between.
    let mut body = vec![0u8; 8 + 12];
    for field in [&[0xff, 0xff][..], &[2, 0, b'/', b'x'], &[0xff, 0xff]] {
        body.extend(field);
    }
    v.push(Got::Event(raw(tick(5), 101, 257, &body)));
    // A variable field whose length runs past the record: stored as it is.
    let mut rec = syscall(tick(5), 101, "unlink", 0, &[("path", P::B(b"/tmp/a"))]);
    rec[24..26].copy_from_slice(&100u16.to_le_bytes());
    v.push(Got::Event(rec));
    // An unknown type, the largest record, time going backwards.
    v.push(Got::Event(raw(tick(5), 1, 999, &[1, 2, 3])));
    v.push(Got::Event(raw(tick(5), 1, 0, &vec![0xab; 65535 - 16])));
    v.push(Got::Event(syscall(tick(u64::MAX - 1_000_000), 1, "close", 0, &[])));
    v.push(Got::Event(syscall(0, 0, "close", 0, &[])));
    v.push(Got::Event(syscall(u64::MAX, 0, "close", 0, &[])));
    for i in 0..3 {
        v.push(Got::Foreign(ForeignEvent {
            ts: tick(3),
            tid: 100 + i,
            name: "signaldeliver".into(),
            params: vec![("sig".into(), "SIGCHLD".into()), ("x".into(), "é".repeat(i as usize))],
        }));
    }
    v
}

/// The encoding byte of every event block in a file.
fn encodings(bytes: &[u8]) -> Vec<u8> {
    let mut at = FILE_HEADER_LEN + u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let mut v = Vec::new();
    while at + BLOCK_HEADER_LEN <= bytes.len() {
        let Ok(h) = BlockHeader::parse(bytes[at..at + BLOCK_HEADER_LEN].try_into().unwrap()) else { break };
        if h.kind == 2 {
            v.push(h.encoding);
        }
        at += BLOCK_HEADER_LEN + h.stored_len as usize;
    }
    v
}

#[test]
fn every_record_comes_back_byte_for_byte() {
    let recs = every_record();
    assert!(recs.len() > 3 * SYSCALLS.len());
    for (packed, compression, block_len) in
        [(true, None, 1 << 20), (true, Some(3), 1 << 20), (true, None, 4096), (false, None, 4096)]
    {
        let case = format!("packed {packed}, compression {compression:?}, blocks of {block_len}");
        let bytes = write_opts(&recs, Options { compression, block_len, packed });
        let enc = encodings(&bytes);
        let want = if packed { ENCODING_PACKED } else { ENCODING_WIRE };
        assert!(!enc.is_empty() && enc.iter().all(|&e| e == want), "{case}: {enc:?}");
        let (got, stop) = read_all(&bytes);
        assert_eq!(stop, Ok(Stop::Complete), "{case}");
        assert_eq!(got.len(), recs.len() + 1, "{case}");
        assert_eq!(got[0], Got::Snapshot(snapshot()), "{case}");
        for (i, (g, r)) in got[1..].iter().zip(&recs).enumerate() {
            assert!(g == r, "{case}: record {i} differs:\n got {g:?}\nwant {r:?}");
        }
    }
}

#[test]
fn packing_shrinks_typical_records_and_the_stats_say_by_how_much() {
    // The bench's redis shape: epoll_wait, read of a request, write of a reply.
    let mut recs = Vec::new();
    for i in 0..3000u64 {
        let ts = 1_000_000_000 + i * 3000;
        let tid = 2000 + (i / 300) as u32;
        let req = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000012345\r\n$3\r\nxxx\r\n";
        recs.push(Got::Event(syscall(
            ts,
            tid,
            "epoll_wait",
            1,
            &[("epfd", P::I(5)), ("maxevents", P::I(1024))],
        )));
        recs.push(Got::Event(syscall(
            ts + 900,
            tid,
            "read",
            req.len() as i64,
            &[("fd", P::I(8)), ("size", P::I(16384)), ("data", P::B(req))],
        )));
        recs.push(Got::Event(syscall(
            ts + 2100,
            tid,
            "write",
            5,
            &[("fd", P::I(8)), ("data", P::B(b"+OK\r\n"))],
        )));
    }
    let wire = write_opts(&recs, Options { compression: None, packed: false, ..Options::default() });
    let packed = write_opts(&recs, Options { compression: None, ..Options::default() });
    assert!(packed.len() * 2 < wire.len(), "packed {} vs wire {} bytes", packed.len(), wire.len());
    let mut r = harrier_capfile::Reader::new(std::io::Cursor::new(&packed)).unwrap();
    while r.next().unwrap().is_some() {}
    let s = *r.stats();
    let wire_records: usize = recs.iter().map(|g| if let Got::Event(b) = g { b.len() } else { 0 }).sum();
    assert_eq!(s.wire_bytes, wire_records as u64);
    assert!(s.raw_bytes * 2 < s.wire_bytes, "{s:?}");
    assert!(s.event_blocks > 0 && s.packed_blocks == s.event_blocks, "{s:?}");
    let mut r = harrier_capfile::Reader::new(std::io::Cursor::new(&wire)).unwrap();
    while r.next().unwrap().is_some() {}
    assert_eq!((r.stats().packed_blocks, r.stats().wire_bytes), (0, wire_records as u64));
}
