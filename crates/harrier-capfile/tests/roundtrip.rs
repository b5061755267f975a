//! Writing then reading: the same records back, in order; cut-off files read
//! up to their last whole block; seeking by time through the index.

mod common;

use common::{read_all, records, snapshot, write, Got};
use harrier_capfile::format::{BlockHeader, BLOCK_HEADER_LEN, FILE_HEADER_LEN};
use harrier_capfile::{Item, Options, Reader, Stop, Writer};
use std::io::Cursor;

fn expected(recs: &[Got]) -> Vec<Got> {
    let mut v = vec![Got::Snapshot(snapshot())];
    v.extend(recs.iter().cloned());
    v
}

/// (offset where each block ends, records before that end).
fn block_ends(bytes: &[u8]) -> Vec<(usize, usize)> {
    let info_len = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let mut at = FILE_HEADER_LEN + info_len;
    let (mut ends, mut n) = (Vec::new(), 0);
    while at + BLOCK_HEADER_LEN <= bytes.len() {
        let Ok(h) = BlockHeader::parse(bytes[at..at + BLOCK_HEADER_LEN].try_into().unwrap()) else { break };
        at += BLOCK_HEADER_LEN + h.stored_len as usize;
        // A snapshot block is one item, an event block its records.
        n += if h.kind == 1 {
            1
        } else if h.kind == 2 {
            h.records as usize
        } else {
            0
        };
        ends.push((at, n));
    }
    ends
}

#[test]
fn round_trip_compressed_and_not() {
    let recs = records(2000);
    let mut sizes = Vec::new();
    for comp in [Some(3), None, Some(19)] {
        let bytes = write(&recs, comp, 8192);
        let (got, stop) = read_all(&bytes);
        assert_eq!(stop, Ok(Stop::Complete), "compression {comp:?}");
        assert_eq!(got.len(), recs.len() + 1, "compression {comp:?}");
        assert!(got == expected(&recs), "compression {comp:?}: records differ");
        let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
        assert_eq!(r.info, common::info());
        assert_eq!(r.schema_version, harrier_capfile::SCHEMA_VERSION);
        while r.next().unwrap().is_some() {}
        let s = *r.stats();
        assert_eq!(s.records, 2000);
        assert_eq!((s.drops, s.lost), (286, 572), "one add_drops(1, 2) per 7 records");
        assert_eq!((s.first_ts, s.last_ts), (Some(1000), 1000 + 1999 * 10));
        assert!(s.event_blocks > 5, "8 KiB blocks: {} blocks", s.event_blocks);
        sizes.push(bytes.len());
    }
    assert!(sizes[0] * 3 < sizes[1], "zstd shrinks this capture at least 3x: {sizes:?}");
}

#[test]
fn an_empty_capture_is_complete() {
    let w = Writer::new(Vec::new(), &common::info(), Options::default()).unwrap();
    let (bytes, summary) = w.finish().unwrap();
    assert_eq!(summary.records, 0);
    assert_eq!(read_all(&bytes), (vec![], Ok(Stop::Complete)));
}

#[test]
fn malformed_records_are_refused_by_the_writer() {
    let mut w = Writer::new(Vec::new(), &common::info(), Options::default()).unwrap();
    let mut rec = harrier_state::testing::syscall(1, 2, "close", 0, &[]);
    assert!(w.event(&rec[..10]).unwrap_err().to_string().contains("no header"));
    rec.push(0);
    let msg = format!("says {} bytes but is {}", rec.len() - 1, rec.len());
    assert!(w.event(&rec).unwrap_err().to_string().contains(&msg));
    rec.pop();
    w.event(&rec).unwrap();
    assert_eq!(w.finish().unwrap().1.records, 1);
}

#[test]
fn a_cut_off_file_reads_up_to_its_last_whole_block() {
    let recs = records(600);
    for comp in [Some(3), None] {
        let bytes = write(&recs, comp, 4096);
        let ends = block_ends(&bytes);
        assert!(ends.len() > 4, "several blocks");
        let header_end = FILE_HEADER_LEN + u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
        // Every block boundary and the bytes around it, plus a stride through the rest.
        let mut cuts: Vec<usize> = ends.iter().flat_map(|&(e, _)| [e - 1, e, e + 1]).collect();
        cuts.extend((0..bytes.len()).step_by(37));
        cuts.extend(bytes.len() - 30..bytes.len());
        cuts.retain(|&c| c < bytes.len());
        for cut in cuts {
            let (got, stop) = read_all(&bytes[..cut]);
            if cut < header_end {
                let e = stop.expect_err("no header, no capture");
                assert!(e.starts_with("byte "), "cut {cut}: {e}");
                continue;
            }
            let whole = ends.iter().take_while(|&&(e, _)| e <= cut).last().map_or(0, |&(_, n)| n);
            let last_end = ends.iter().take_while(|&&(e, _)| e <= cut).last().map_or(header_end, |&(e, _)| e);
            assert_eq!(got.len(), whole.min(recs.len() + 1), "cut {cut} ({comp:?}): items of whole blocks");
            assert!(got[..] == expected(&recs)[..got.len()], "cut {cut}: items are the file's first ones");
            match stop {
                Ok(Stop::Truncated { offset, reason }) => {
                    assert!(offset as usize <= cut, "cut {cut}: stop offset {offset}");
                    if got.len() <= recs.len() {
                        assert_eq!(
                            offset as usize, last_end,
                            "cut {cut}: stops at the first partial block ({reason})"
                        );
                    }
                    assert!(reason.contains("ends"), "cut {cut}: {reason}");
                }
                other => panic!("cut {cut} ({comp:?}): {other:?}"),
            }
        }
    }
}

#[test]
fn seek_by_time_uses_the_index() {
    let recs = records(3000);
    let bytes = write(&recs, Some(3), 4096);
    let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
    let (totals, entries) = r.index().unwrap().expect("a finished file has an index");
    assert_eq!(totals.records, 3000);
    assert!(entries.len() > 10);
    assert!(entries.windows(2).all(|w| w[0].last_ts <= w[1].first_ts), "blocks in time order");
    let target = 1000 + 2345 * 10;
    assert!(r.seek_time(target).unwrap());
    let mut first = None;
    let mut seen_target = false;
    while let Some(item) = r.next().unwrap() {
        let ts = match item {
            Item::Event(b) => u64::from_le_bytes(b[..8].try_into().unwrap()),
            Item::Foreign(f) => f.ts,
            Item::Snapshot(_) => panic!("no snapshot after the seek"),
        };
        first.get_or_insert(ts);
        seen_target |= ts == target;
    }
    let first = first.unwrap();
    assert!(first <= target && target - first < 4096, "starts in the block holding the target: {first}");
    assert!(seen_target);
    assert_eq!(r.stop(), Some(&Stop::Complete));
    // A cut-off file has no index: seeking says so.
    let mut r = Reader::new(Cursor::new(&bytes[..bytes.len() - 1])).unwrap();
    assert!(!r.seek_time(target).unwrap());
}
