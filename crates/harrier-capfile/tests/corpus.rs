//! Crafted corrupt files (tests/corpus/*.hrcap): each must give a clear
//! error or stop naming a byte offset, never a panic or a huge allocation.
//! The expected results are in tests/corpus/expected.txt. The files are
//! committed (they also seed the fuzzer); `UPDATE_CORPUS=1 cargo test -p
//! harrier-capfile --test corpus` regenerates them from `craft()`.

mod common;

use common::{read_all, records, write, write_wire};
use harrier_capfile::format::*;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Offsets of the block headers of a well-formed file.
fn blocks(b: &[u8]) -> Vec<usize> {
    let mut at = FILE_HEADER_LEN + u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize;
    let mut v = Vec::new();
    while at + BLOCK_HEADER_LEN <= b.len() - TRAILER_LEN + 1 {
        let h = BlockHeader::parse(b[at..at + BLOCK_HEADER_LEN].try_into().unwrap()).unwrap();
        v.push(at);
        at += BLOCK_HEADER_LEN + h.stored_len as usize;
        if h.kind == 3 {
            break;
        }
    }
    v
}

fn header(b: &[u8], at: usize) -> BlockHeader {
    BlockHeader::parse(b[at..at + BLOCK_HEADER_LEN].try_into().unwrap()).unwrap()
}

/// Rewrites a block header (its checksum recomputed, so the next check fires).
fn set_header(b: &mut [u8], at: usize, f: impl FnOnce(&mut BlockHeader)) {
    let mut h = header(b, at);
    f(&mut h);
    b[at..at + BLOCK_HEADER_LEN].copy_from_slice(&h.encode());
}

/// Replaces a block's payload, fixing its lengths and checksum.
fn set_payload(b: &[u8], at: usize, payload: &[u8], raw_len: Option<u32>) -> Vec<u8> {
    let h = header(b, at);
    let end = at + BLOCK_HEADER_LEN + h.stored_len as usize;
    let mut out = b[..at].to_vec();
    let h2 = BlockHeader {
        stored_len: payload.len() as u32,
        raw_len: raw_len.unwrap_or(payload.len() as u32),
        payload_crc: crc32fast::hash(payload),
        ..h
    };
    out.extend_from_slice(&h2.encode());
    out.extend_from_slice(payload);
    out.extend_from_slice(&b[end..]);
    out
}

fn fix_header_crc(b: &mut [u8]) {
    let info_len = u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize;
    let mut h = crc32fast::Hasher::new();
    h.update(&b[..20]);
    h.update(&b[24..24 + info_len]);
    b[20..24].copy_from_slice(&h.finalize().to_le_bytes());
}

/// Packed payloads (block encoding 1) by hand: one close record, layout 0
/// defined inline (type 3: ret I64, fd I32), tid 100, ts delta 1000, fd 3.
const CLOSE: [u8; 11] = [0x01, 3, 0, 2, 0x08, 0x04, 100, 0xd0, 0x0f, 0, 6];
/// The same layout again: same tid, ts delta 1, ret 0, fd 3.
const CLOSE_AGAIN: [u8; 4] = [0x00, 2, 0, 6];

/// The packed file with `payload` as its event block of `records` records.
fn packed_block(file: &[u8], ev: usize, payload: &[u8], records: u32) -> Vec<u8> {
    let mut b = set_payload(file, ev, payload, None);
    set_header(&mut b, ev, |h| h.records = records);
    b
}

fn craft() -> Vec<(&'static str, Vec<u8>)> {
    let recs = records(10);
    // Encoding 0 (the records as they are): the record framing cases below
    // edit those bytes; the packed cases come at the end.
    let plain = write_wire(&recs, None, 1 << 20);
    let zstd = write_wire(&recs, Some(3), 1 << 20);
    let packed = write(&recs, None, 1 << 20);
    let bl = blocks(&plain); // [snapshot, events, index]
    let (snap, ev, idx) = (bl[0], bl[1], bl[2]);
    let zev = blocks(&zstd)[1];
    let pev = blocks(&packed)[1];
    let mut v: Vec<(&str, Vec<u8>)> = Vec::new();
    let m = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = plain.clone();
        f(&mut b);
        b
    };
    v.push(("empty", Vec::new()));
    v.push(("short-header", plain[..10].to_vec()));
    v.push(("bad-magic", m(&|b| b[1] = b'X')));
    v.push(("future-format-version", m(&|b| b[8] = 9)));
    v.push(("info-len-huge", m(&|b| b[16..20].copy_from_slice(&u32::MAX.to_le_bytes()))));
    v.push((
        "info-len-past-end",
        m(&|b| {
            let n = b.len() as u32;
            b[16..20].copy_from_slice(&n.to_le_bytes());
        }),
    ));
    v.push(("header-checksum", m(&|b| b[30] ^= 0x20)));
    v.push((
        "info-not-json",
        m(&|b| {
            b[24] = b'[';
            fix_header_crc(b);
        }),
    ));
    v.push(("block-bad-magic", m(&|b| b[ev] = b'X')));
    v.push(("block-header-checksum", m(&|b| b[ev + 30] ^= 1)));
    v.push(("block-kind-unknown", m(&|b| set_header(b, ev, |h| h.kind = 7))));
    v.push(("block-codec-unknown", m(&|b| set_header(b, ev, |h| h.codec = 5))));
    let mz = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = zstd.clone();
        f(&mut b);
        b
    };
    v.push(("block-raw-len-over-limit", mz(&|b| set_header(b, zev, |h| h.raw_len = u32::MAX))));
    v.push(("block-stored-len-past-end", mz(&|b| set_header(b, zev, |h| h.stored_len = 1 << 30))));
    v.push(("block-payload-checksum", m(&|b| b[ev + BLOCK_HEADER_LEN + 3] ^= 1)));
    v.push(("snapshot-not-json", set_payload(&plain, snap, b"{\"processes\": 5}", None)));
    v.push(("zstd-garbage", set_payload(&zstd, zev, &[0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3, 4, 5, 6], Some(100))));
    // A payload that decompresses to far more than its header declares.
    let bomb = zstd::bulk::compress(&vec![0u8; 1 << 20], 3).unwrap();
    v.push(("zstd-more-than-declared", set_payload(&zstd, zev, &bomb, Some(1000))));
    let hz = header(&zstd, zev);
    v.push(("zstd-less-than-declared", {
        let mut b = zstd.clone();
        set_header(&mut b, zev, |h| h.raw_len = hz.raw_len + 10);
        b
    }));
    // Records that do not frame the payload.
    let evp = &plain[ev + BLOCK_HEADER_LEN..ev + BLOCK_HEADER_LEN + header(&plain, ev).stored_len as usize];
    let mut short = evp.to_vec();
    short[14..16].copy_from_slice(&3u16.to_le_bytes());
    v.push(("record-len-below-header", set_payload(&plain, ev, &short, None)));
    let mut long = evp.to_vec();
    long[14..16].copy_from_slice(&u16::MAX.to_le_bytes());
    v.push(("record-len-past-block", set_payload(&plain, ev, &long, None)));
    v.push(("record-count-mismatch", m(&|b| set_header(b, ev, |h| h.records += 1))));
    // The fifth record (index 4) is foreign: break its name's UTF-8.
    let mut i = 0;
    for _ in 0..4 {
        i += u16::from_le_bytes([evp[i + 14], evp[i + 15]]) as usize;
    }
    let mut bad_utf8 = evp.to_vec();
    bad_utf8[i + 18] = 0xff;
    v.push(("foreign-name-not-utf8", set_payload(&plain, ev, &bad_utf8, None)));
    let mut bad_count = evp.to_vec();
    let name_len = u16::from_le_bytes([evp[i + 16], evp[i + 17]]) as usize;
    bad_count[i + 18 + name_len] = 9;
    v.push(("foreign-param-count-too-high", set_payload(&plain, ev, &bad_count, None)));
    let idxp = plain[idx + BLOCK_HEADER_LEN..plain.len() - TRAILER_LEN].to_vec();
    let mut bad_idx = idxp.clone();
    bad_idx[24] = 5;
    v.push(("index-entry-count", set_payload(&plain, idx, &bad_idx, None)));
    let mut bad_totals = idxp.clone();
    bad_totals[0] = 99;
    v.push(("index-totals-differ", set_payload(&plain, idx, &bad_totals, None)));
    v.push((
        "trailer-points-elsewhere",
        m(&|b| {
            let t = b.len() - TRAILER_LEN;
            let tr = encode_trailer(snap as u64);
            b[t..].copy_from_slice(&tr);
        }),
    ));
    v.push((
        "trailer-checksum",
        m(&|b| {
            let t = b.len() - TRAILER_LEN;
            b[t] ^= 1;
        }),
    ));
    v.push(("bytes-after-trailer", m(&|b| b.extend_from_slice(b"junk"))));
    v.push(("cut-inside-trailer", plain[..plain.len() - 5].to_vec()));
    v.push(("cut-inside-block-header", plain[..ev + 20].to_vec()));
    // Packed event blocks (encoding 1).
    let pk = |payload: &[u8], records: u32| packed_block(&packed, pev, payload, records);
    let two = [&CLOSE[..], &CLOSE_AGAIN[..]].concat();
    v.push(("packed-varint-cut", pk(&[&CLOSE[..], &[0x00, 0x80]].concat(), 2)));
    v.push(("packed-varint-over-64-bits", pk(&[&CLOSE[..6], &[0xff; 10], &[1]].concat(), 1)));
    // unlink (87): ret, path; the path says 50 bytes, 3 follow.
    v.push(("packed-length-past-end", pk(&[0x01, 87, 0, 2, 0x08, 0x00, 100, 2, 0, 50, b'a', b'b', b'c'], 1)));
    v.push(("packed-record-count-low", pk(&two, 1)));
    v.push(("packed-record-count-high", pk(&two, 3)));
    v.push(("packed-layout-undefined", pk(&[&CLOSE[..], &[0x04, 2, 0, 6]].concat(), 2)));
    v.push(("packed-layout-code-unknown", pk(&[0x01, 3, 0, 2, 0x08, 0x05, 100, 2, 0, 6], 1)));
    v.push(("packed-field-over-32-bits", pk(&[&CLOSE[..10], &[0x80, 0x80, 0x80, 0x80, 0x10]].concat(), 1)));
    // A foreign record (type 0x7000, one rest field) whose name is not UTF-8.
    v.push(("packed-foreign-not-utf8", pk(&[0x01, 0, 0x70, 1, 0xff, 1, 2, 5, 1, 0, 0xff, 0, 0], 1)));
    v.push(("packed-encoding-unknown", {
        let mut b = packed.clone();
        set_header(&mut b, pev, |h| h.encoding = 7);
        b
    }));
    v.push(("packed-in-format-version-1", {
        let mut b = packed.clone();
        b[8] = 1;
        fix_header_crc(&mut b);
        b
    }));
    v
}

fn outcome(b: &[u8]) -> String {
    let (got, stop) = read_all(b);
    match stop {
        Ok(s) => format!("{} items, {s:?}", got.len()),
        Err(e) => format!("{} items, error: {e}", got.len()),
    }
}

#[test]
fn crafted_files_give_errors_naming_a_byte_offset() {
    let path = dir().join("expected.txt");
    if std::env::var_os("UPDATE_CORPUS").is_some() {
        std::fs::create_dir_all(dir()).unwrap();
        let mut expected = String::new();
        for (name, bytes) in craft() {
            std::fs::write(dir().join(format!("{name}.hrcap")), &bytes).unwrap();
            expected.push_str(&format!("{name}\t{}\n", outcome(&bytes)));
        }
        std::fs::write(&path, expected).unwrap();
    }
    let expected = std::fs::read_to_string(&path).expect("tests/corpus/expected.txt");
    let mut n = 0;
    for line in expected.lines() {
        let (name, want) = line.split_once('\t').unwrap();
        let bytes = std::fs::read(dir().join(format!("{name}.hrcap"))).unwrap();
        let got = outcome(&bytes);
        assert_eq!(got, want, "{name}");
        assert!(got.contains("byte ") || got.contains("offset: "), "{name}: no byte offset in '{got}'");
        assert!(!got.contains("Complete"), "{name}: a corrupt file read as complete");
        n += 1;
    }
    assert!(n >= 41, "{n} corpus files");
}
