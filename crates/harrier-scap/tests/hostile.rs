//! Corrupt and crafted captures: an error naming the byte offset, never a
//! panic, a hang or an allocation the file does not justify.

mod common;

use common::build::*;
/// Gives the largest single allocation a test's thread made.
#[global_allocator]
static A: harrier_alloc_count::Counting = harrier_alloc_count::Counting;

fn err(bytes: Vec<u8>) -> String {
    match common::convert_bytes(bytes) {
        Ok(o) => panic!("crafted input accepted: {}", o.stats.table()),
        Err(e) => e.to_string(),
    }
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn crafted_lengths_are_errors_with_offsets() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "empty file"),
        ("not scap", b"hello world, this is text".to_vec(), "not a scap capture"),
        (
            "bad magic",
            {
                let mut f = shb(1, 0);
                f[8] ^= 1;
                f
            },
            "byte 8: bad section header magic",
        ),
        (
            "big endian",
            {
                let mut f = shb(1, 0);
                f[8..12].copy_from_slice(&0x1A2B3C4Du32.to_be_bytes());
                f
            },
            "big-endian",
        ),
        ("version 2", shb(2, 0), "only 1.x"),
        (
            "block over the file",
            {
                let mut f = shb(1, 0);
                f.extend(block(0x201, &[0; 180]));
                f[32..36].copy_from_slice(&(1u32 << 20).to_le_bytes());
                f
            },
            "byte 32: block of type 0x201 claims 1048576 bytes but the file ends 192 bytes later",
        ),
        (
            "short block",
            {
                let mut f = shb(1, 0);
                f.extend([1, 2, 0, 0, 8, 0, 0, 0]);
                f
            },
            "less than its 12-byte frame",
        ),
        (
            "bad trailer",
            {
                let mut f = shb(1, 0);
                let n = f.len();
                f[n - 1] ^= 0x40;
                f
            },
            "trailing length",
        ),
        (
            "cut header",
            {
                let mut f = shb(1, 0);
                f.extend([4, 2, 0]);
                f
            },
            "inside a block header",
        ),
        (
            "event longer than its block",
            {
                let mut f = shb(1, 2);
                let mut e = event(0x216, 1, 1, 4, &[&i64b(3)], false);
                e[8 + 2 + 16] = 200;
                f.extend(e);
                f
            },
            "event length 200",
        ),
        (
            "parameter past the event",
            {
                let mut f = shb(1, 2);
                let mut e = event(0x216, 1, 1, 4, &[&i64b(3)], false);
                e[8 + 2 + 26] = 9;
                f.extend(e);
                f
            },
            "parameter 0 length 9",
        ),
        (
            "huge parameter count",
            {
                let mut f = shb(1, 2);
                let mut e = event(0x216, 1, 1, 4, &[&i64b(3)], false);
                e[8 + 2 + 22..8 + 2 + 26].copy_from_slice(&u32::MAX.to_le_bytes());
                f.extend(e);
                f
            },
            "parameters do not fit",
        ),
        (
            "v1 lengths that add up to nothing",
            {
                let mut f = shb(1, 0);
                let mut e = event(0x204, 1, 1, 4, &[&i64b(3)], false);
                e[8 + 2 + 22] = 7;
                f.extend(e);
                f
            },
            "do not add up",
        ),
        (
            "process entry past its block",
            {
                let mut f = shb(1, 2);
                let mut p = proc_entry(9, 1);
                p[0..4].copy_from_slice(&5000u32.to_le_bytes());
                f.extend(block(0x215, &p));
                f
            },
            "process entry length 5000",
        ),
        (
            "process strings past the block",
            {
                let mut f = shb(1, 0);
                let mut p = proc_entry(5, 1);
                p[24] = 0xff;
                p[25] = 0xff;
                f.extend(block(0x211, &p));
                f
            },
            "comm: 65535 bytes needed",
        ),
        (
            "unknown fd type in a v1 list",
            {
                let mut f = shb(1, 0);
                let mut b = 1u64.to_le_bytes().to_vec();
                b.extend([0; 16]);
                b.push(99);
                b.extend([0; 8]);
                f.extend(block(0x203, &b));
                f
            },
            "fd type 99",
        ),
        (
            "unknown interface type",
            {
                let mut f = shb(1, 0);
                f.extend(block(0x205, &[9, 0, 0, 0, 0, 0, 0, 0]));
                f
            },
            "unknown interface type 9",
        ),
    ];
    for (name, bytes, want) in cases {
        eprintln!("case {name}");
        let e = err(bytes);
        assert!(e.contains(want), "{name}: {e:?} does not say {want:?}");
        assert!(e.contains("byte "), "{name}: {e:?} names no offset");
    }
}

#[test]
fn a_block_claiming_more_than_a_gzip_stream_holds_allocates_only_what_arrives() {
    // 200 MB claimed, 1 KB present: the reader must not reserve the claim.
    let mut f = shb(1, 0);
    f.extend(0x201u32.to_le_bytes());
    f.extend((200u32 << 20).to_le_bytes());
    f.extend([0u8; 1024]);
    let bytes = gz(&f);
    harrier_alloc_count::reset_largest();
    let e = err(bytes);
    assert!(e.contains("decompressed byte") && e.contains("file ends inside a block"), "{e}");
    let largest = harrier_alloc_count::this_thread().largest;
    assert!(largest < 4 << 20, "largest allocation {largest} bytes for a 1 KB block");
}

/// A real capture cut at many offsets and with bytes flipped: errors or
/// successes, never a panic. Deterministic (a fixed LCG), bounded in time.
#[test]
fn truncated_and_mutated_captures_never_panic() {
    let Some(dir) = common::scap_dir() else { return };
    let gzipped = std::fs::read(dir.join("cat_write.scap")).unwrap();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&gzipped[..]), &mut raw).unwrap();
    let n = raw.len();
    // Block boundaries: a cut there is a shorter capture, not an error.
    let mut bounds = vec![0];
    while *bounds.last().unwrap() < n {
        let at = *bounds.last().unwrap();
        bounds.push(at + u32::from_le_bytes(raw[at + 4..at + 8].try_into().unwrap()) as usize);
    }
    let mut cuts = 0;
    for cut in (1..n).step_by(97).chain(n - 64..n) {
        match common::convert_bytes(raw[..cut].to_vec()) {
            Ok(_) => assert!(bounds.contains(&cut), "cut at {cut} inside a block accepted"),
            Err(e) => assert!(e.to_string().contains("byte "), "cut at {cut}: {e}"),
        }
        cuts += 1;
    }
    let mut seed: u64 = 0x2545F4914F6CDD1D;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    for _ in 0..300 {
        let mut m = raw.clone();
        for _ in 0..1 + next() % 8 {
            let i = next() % n;
            m[i] ^= 1 << (next() % 8);
        }
        let _ = common::convert_bytes(m);
    }
    // The same through gzip: the offsets are then in the decompressed stream.
    match common::convert_bytes(gzipped[..gzipped.len() / 2].to_vec()) {
        Ok(_) => panic!("half a gzip file accepted"),
        Err(e) => assert!(e.to_string().contains("decompressed byte "), "{e}"),
    }
    assert!(cuts > 100);
}
