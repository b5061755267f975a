//! Byte layouts of the file (docs/capture-format.md is the prose version).
//! Everything is little-endian.

use serde::{Deserialize, Serialize};

/// First 8 bytes of every file. The 0x89 and CR LF catch 7-bit and
/// line-ending mangling, as PNG's signature does.
pub const MAGIC: [u8; 8] = *b"\x89HRCAP\r\n";
/// Last 8 bytes of a finished file.
pub const END_MAGIC: [u8; 8] = *b"HRCAPEND";
/// First 4 bytes of every block header.
pub const BLOCK_MAGIC: [u8; 4] = *b"HRBK";

/// This layout, which writers write. Version 2 added the block header's
/// encoding byte (packed event blocks, src/pack.rs); readers also read
/// version 1 (that byte reserved, 0) and refuse any other version.
pub const FORMAT_VERSION: u16 = 2;
/// The oldest format version readers still read.
pub const OLDEST_FORMAT_VERSION: u16 = 1;

/// Fixed part of the file header; the JSON info follows.
pub const FILE_HEADER_LEN: usize = 24;
pub const BLOCK_HEADER_LEN: usize = 64;
pub const TRAILER_LEN: usize = 24;
/// Index block payload: totals, then one entry per event block.
pub const INDEX_HEAD_LEN: usize = 32;
pub const INDEX_ENTRY_LEN: usize = 32;

/// Largest JSON info a reader accepts.
pub const MAX_INFO_LEN: u32 = 1 << 20;
/// Largest uncompressed block payload a reader accepts (writers stay far below).
pub const MAX_BLOCK_LEN: u32 = 64 << 20;
/// Default uncompressed size at which the writer closes an event block.
pub const DEFAULT_BLOCK_LEN: usize = 1 << 20;

/// Type of a foreign record (an event Harrier has no typed form for). Above
/// every syscall number and life-cycle type, below the ARGS_AT_EXIT bit.
pub const FOREIGN_TYPE: u16 = 0x7000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockKind {
    Snapshot = 1,
    Events = 2,
    Index = 3,
}

impl BlockKind {
    pub fn from_u8(b: u8) -> Option<BlockKind> {
        match b {
            1 => Some(BlockKind::Snapshot),
            2 => Some(BlockKind::Events),
            3 => Some(BlockKind::Index),
            _ => None,
        }
    }
}

pub const CODEC_NONE: u8 = 0;
pub const CODEC_ZSTD: u8 = 1;

/// What the file header's JSON says about the capture.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileInfo {
    /// Host name of the machine captured.
    pub host: String,
    /// Its kernel release (uname -r).
    pub kernel: String,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC at capture start: wall time of an
    /// event = ts + epoch_offset. 0 when record times are already wall times.
    pub epoch_offset: u64,
    /// The program that wrote the file ("harrier 0.1.0", "harrier convert ...").
    #[serde(default)]
    pub writer: String,
    /// The capture's settings as the writer chose to record them.
    #[serde(default)]
    pub settings: serde_json::Value,
}

/// The fixed part of a block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHeader {
    pub kind: u8,
    pub codec: u8,
    /// Event blocks: how the payload holds the records (`pack::ENCODING_*`);
    /// 0 in other blocks and in format version 1.
    pub encoding: u8,
    pub stored_len: u32,
    pub raw_len: u32,
    pub records: u32,
    pub payload_crc: u32,
    pub first_ts: u64,
    pub last_ts: u64,
    /// Events the kernel dropped while this block was being filled.
    pub drops: u64,
    /// Events lost between the rings and the writer (full queue).
    pub lost: u64,
}

pub(crate) fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
}
pub(crate) fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap())
}

impl BlockHeader {
    pub fn encode(&self) -> [u8; BLOCK_HEADER_LEN] {
        let mut b = [0u8; BLOCK_HEADER_LEN];
        b[0..4].copy_from_slice(&BLOCK_MAGIC);
        b[4] = self.kind;
        b[5] = self.codec;
        b[6] = self.encoding;
        b[8..12].copy_from_slice(&self.stored_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.records.to_le_bytes());
        b[20..24].copy_from_slice(&self.payload_crc.to_le_bytes());
        b[24..32].copy_from_slice(&self.first_ts.to_le_bytes());
        b[32..40].copy_from_slice(&self.last_ts.to_le_bytes());
        b[40..48].copy_from_slice(&self.drops.to_le_bytes());
        b[48..56].copy_from_slice(&self.lost.to_le_bytes());
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and checks magic, header checksum, reserved bytes, kind and
    /// codec; the message says which failed.
    pub fn parse(b: &[u8; BLOCK_HEADER_LEN]) -> Result<BlockHeader, String> {
        if b[0..4] != BLOCK_MAGIC {
            return Err(format!("no block magic (found {:02x?})", &b[0..4]));
        }
        let crc = crc32fast::hash(&b[..60]);
        if crc != u32_at(b, 60) {
            return Err(format!("block header checksum {:08x} does not match {:08x}", u32_at(b, 60), crc));
        }
        let h = BlockHeader {
            kind: b[4],
            codec: b[5],
            encoding: b[6],
            stored_len: u32_at(b, 8),
            raw_len: u32_at(b, 12),
            records: u32_at(b, 16),
            payload_crc: u32_at(b, 20),
            first_ts: u64_at(b, 24),
            last_ts: u64_at(b, 32),
            drops: u64_at(b, 40),
            lost: u64_at(b, 48),
        };
        if b[7] != 0 || u32_at(b, 56) != 0 {
            return Err("reserved block header bytes are not zero".into());
        }
        if BlockKind::from_u8(h.kind).is_none() {
            return Err(format!("unknown block kind {}", h.kind));
        }
        match h.encoding {
            crate::pack::ENCODING_WIRE => {}
            crate::pack::ENCODING_PACKED if h.kind == BlockKind::Events as u8 => {}
            e => return Err(format!("unknown record encoding {e} for a block of kind {}", h.kind)),
        }
        match h.codec {
            CODEC_NONE if h.stored_len != h.raw_len => {
                return Err(format!(
                    "uncompressed block with stored {} != raw {} bytes",
                    h.stored_len, h.raw_len
                ))
            }
            CODEC_NONE | CODEC_ZSTD => {}
            c => return Err(format!("unknown compression codec {c}")),
        }
        if h.raw_len > MAX_BLOCK_LEN {
            return Err(format!("block of {} bytes exceeds the {} byte limit", h.raw_len, MAX_BLOCK_LEN));
        }
        Ok(h)
    }
}

/// One entry of the index: where an event block starts and its time span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Byte offset of the block header.
    pub offset: u64,
    pub first_ts: u64,
    pub last_ts: u64,
    pub records: u64,
}

/// The totals at the head of the index block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    pub records: u64,
    pub drops: u64,
    pub lost: u64,
}

pub fn encode_index(t: &Totals, entries: &[IndexEntry], out: &mut Vec<u8>) {
    out.clear();
    for v in [t.records, t.drops, t.lost, entries.len() as u64] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for e in entries {
        for v in [e.offset, e.first_ts, e.last_ts, e.records] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

pub fn parse_index(b: &[u8]) -> Result<(Totals, Vec<IndexEntry>), String> {
    if b.len() < INDEX_HEAD_LEN {
        return Err(format!("index of {} bytes is shorter than its {INDEX_HEAD_LEN}-byte head", b.len()));
    }
    let t = Totals { records: u64_at(b, 0), drops: u64_at(b, 8), lost: u64_at(b, 16) };
    let n = u64_at(b, 24);
    let body = b.len() - INDEX_HEAD_LEN;
    if n != (body / INDEX_ENTRY_LEN) as u64 || body != (body / INDEX_ENTRY_LEN) * INDEX_ENTRY_LEN {
        return Err(format!(
            "index says {n} entries but holds {} bytes of entries",
            b.len() - INDEX_HEAD_LEN
        ));
    }
    let entries = b[INDEX_HEAD_LEN..]
        .chunks_exact(INDEX_ENTRY_LEN)
        .map(|c| IndexEntry {
            offset: u64_at(c, 0),
            first_ts: u64_at(c, 8),
            last_ts: u64_at(c, 16),
            records: u64_at(c, 24),
        })
        .collect();
    Ok((t, entries))
}

pub fn encode_trailer(index_offset: u64) -> [u8; TRAILER_LEN] {
    let mut b = [0u8; TRAILER_LEN];
    b[0..8].copy_from_slice(&index_offset.to_le_bytes());
    let crc = crc32fast::hash(&b[..12]);
    b[12..16].copy_from_slice(&crc.to_le_bytes());
    b[16..24].copy_from_slice(&END_MAGIC);
    b
}

/// The index offset a trailer names, or why it is not a trailer.
pub fn parse_trailer(b: &[u8; TRAILER_LEN]) -> Result<u64, String> {
    if b[16..24] != END_MAGIC {
        return Err("no end magic".into());
    }
    if crc32fast::hash(&b[..12]) != u32_at(b, 12) || u32_at(b, 8) != 0 {
        return Err("trailer checksum does not match".into());
    }
    Ok(u64_at(b, 0))
}

pub fn encode_file_header(schema_version: u16, info_json: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(FILE_HEADER_LEN + info_json.len());
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    b.extend_from_slice(&schema_version.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&(info_json.len() as u32).to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&b[..20]);
    h.update(info_json);
    b.extend_from_slice(&h.finalize().to_le_bytes());
    b.extend_from_slice(info_json);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_header_round_trips_and_each_check_fires() {
        let h = BlockHeader {
            kind: 2,
            codec: CODEC_ZSTD,
            encoding: 1,
            stored_len: 10,
            raw_len: 100,
            records: 3,
            payload_crc: 7,
            first_ts: 1,
            last_ts: 2,
            drops: 5,
            lost: 6,
        };
        let b = h.encode();
        assert_eq!(BlockHeader::parse(&b), Ok(h));
        let mut bad = b;
        bad[0] = b'X';
        assert!(BlockHeader::parse(&bad).unwrap_err().contains("magic"));
        let mut bad = b;
        bad[30] ^= 1;
        assert!(BlockHeader::parse(&bad).unwrap_err().contains("checksum"));
        let h2 = BlockHeader { kind: 9, ..h };
        assert!(BlockHeader::parse(&h2.encode()).unwrap_err().contains("kind 9"));
        let h2 = BlockHeader { codec: CODEC_NONE, ..h };
        assert!(BlockHeader::parse(&h2.encode()).unwrap_err().contains("stored 10 != raw 100"));
        let h2 = BlockHeader { raw_len: MAX_BLOCK_LEN + 1, ..h };
        assert!(BlockHeader::parse(&h2.encode()).unwrap_err().contains("limit"));
        let h2 = BlockHeader { encoding: 2, ..h };
        assert!(BlockHeader::parse(&h2.encode()).unwrap_err().contains("encoding 2"));
        let h2 = BlockHeader { kind: 1, ..h };
        assert!(BlockHeader::parse(&h2.encode()).unwrap_err().contains("encoding 1 for a block of kind 1"));
    }

    #[test]
    fn index_and_trailer_round_trip() {
        let t = Totals { records: 9, drops: 1, lost: 2 };
        let e = [IndexEntry { offset: 100, first_ts: 1, last_ts: 5, records: 9 }];
        let mut out = Vec::new();
        encode_index(&t, &e, &mut out);
        assert_eq!(parse_index(&out).unwrap(), (t, e.to_vec()));
        assert!(parse_index(&out[..out.len() - 1]).is_err());
        assert_eq!(parse_trailer(&encode_trailer(1234)), Ok(1234));
    }
}
