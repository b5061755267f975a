//! Writing a capture file: header, snapshot, event blocks, index, trailer.
//!
//! Each block goes out with one `write_all` once it is whole, so a file cut
//! off at any moment holds whole blocks up to the cut. Records are packed
//! (src/pack.rs) into a buffer allocated once; compression reuses one zstd
//! context and one output buffer: nothing is allocated per event.

use crate::foreign::{self, ForeignEvent};
use crate::format::*;
use crate::pack::{Packer, ENCODING_PACKED, ENCODING_WIRE};
use harrier_schema::wire::{Header, HEADER_LEN};
use harrier_state::Snapshot;
use std::io::{self, Write};

#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// zstd level (1-22; 3 is zstd's default), or None for no compression.
    pub compression: Option<i32>,
    /// Wire-record bytes at which an event block is closed.
    pub block_len: usize,
    /// Packed event blocks (encoding 1, the default) or the wire records
    /// as they are (encoding 0, as format version 1 stored them).
    pub packed: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { compression: Some(3), block_len: DEFAULT_BLOCK_LEN, packed: true }
    }
}

/// The most a packed record is longer than its wire form (a layout
/// definition of 255 codes, varints a byte or two longer than their field).
const PACK_GROWTH: usize = 1024;

/// What a finished writer wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub records: u64,
    pub blocks: u64,
    pub bytes: u64,
    /// Uncompressed payload bytes of the event blocks (packed).
    pub raw_bytes: u64,
    /// Bytes of the event blocks' records in wire form (what packing shrank).
    pub wire_bytes: u64,
    pub drops: u64,
    pub lost: u64,
}

pub struct Writer<W: Write> {
    out: W,
    opts: Options,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    /// The event block being filled (packed records, or wire records).
    raw: Vec<u8>,
    /// Wire bytes of the records in it.
    wire_len: usize,
    packer: Packer,
    /// A foreign record in wire form, before packing (reused).
    scratch: Vec<u8>,
    records: u32,
    first_ts: u64,
    last_ts: u64,
    drops: u64,
    lost: u64,
    /// Compressed payload, reused.
    packed: Vec<u8>,
    pos: u64,
    index: Vec<IndexEntry>,
    summary: Summary,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl<W: Write> Writer<W> {
    /// Writes the file header at once (so an unwritable target fails before
    /// any event is taken).
    pub fn new(mut out: W, info: &FileInfo, opts: Options) -> io::Result<Writer<W>> {
        let json = serde_json::to_vec(info).map_err(io::Error::other)?;
        if json.len() > MAX_INFO_LEN as usize {
            return Err(invalid(format!(
                "file info of {} bytes is over the {MAX_INFO_LEN}-byte limit",
                json.len()
            )));
        }
        let block_len = opts.block_len.clamp(4096, (MAX_BLOCK_LEN as usize) / 2);
        let zstd = match opts.compression {
            Some(level) => Some(zstd::bulk::Compressor::new(level)?),
            None => None,
        };
        let head = encode_file_header(harrier_schema::SCHEMA_VERSION as u16, &json);
        out.write_all(&head)?;
        // Room for a whole block plus one maximal record: no growth later.
        let cap = block_len + u16::MAX as usize + PACK_GROWTH;
        Ok(Writer {
            out,
            opts: Options { block_len, ..opts },
            zstd,
            raw: Vec::with_capacity(cap),
            wire_len: 0,
            packer: Packer::new(),
            scratch: Vec::with_capacity(u16::MAX as usize),
            records: 0,
            first_ts: u64::MAX,
            last_ts: 0,
            drops: 0,
            lost: 0,
            packed: Vec::with_capacity(zstd::zstd_safe::compress_bound(cap)),
            pos: head.len() as u64,
            index: Vec::new(),
            summary: Summary::default(),
        })
    }

    /// A snapshot of the state tables. Written before the events that follow
    /// it (the pending event block is closed first).
    pub fn snapshot(&mut self, s: &Snapshot) -> io::Result<()> {
        self.close_block()?;
        let json = serde_json::to_vec(s).map_err(io::Error::other)?;
        if json.len() > MAX_BLOCK_LEN as usize {
            return Err(invalid(format!("snapshot of {} bytes is over the block limit", json.len())));
        }
        let mut packed = Vec::new();
        let codec = self.pack(&json, &mut packed)?;
        let payload = if codec == CODEC_NONE { &json } else { &packed };
        let h = BlockHeader {
            kind: BlockKind::Snapshot as u8,
            codec,
            stored_len: payload.len() as u32,
            raw_len: json.len() as u32,
            payload_crc: crc32fast::hash(payload),
            ..Default::default()
        };
        self.put_block(&h.encode(), payload)
    }

    /// One wire record, exactly as the rings deliver it (header.len must be
    /// the slice's length). A malformed record is refused, not written.
    pub fn event(&mut self, rec: &[u8]) -> io::Result<()> {
        let h = Header::parse(rec)
            .ok_or_else(|| invalid(format!("record of {} bytes has no header", rec.len())))?;
        if h.len as usize != rec.len() {
            return Err(invalid(format!("record says {} bytes but is {}", h.len, rec.len())));
        }
        if h.kind == FOREIGN_TYPE {
            return Err(invalid("wire records may not use the foreign type".into()));
        }
        self.make_room(rec.len())?;
        self.put(rec);
        self.note(h.ts);
        Ok(())
    }

    /// An event Harrier has no typed form for (e.g. from a legacy capture).
    pub fn foreign(&mut self, f: &ForeignEvent) -> io::Result<()> {
        let need = HEADER_LEN
            + 4
            + f.name.len()
            + f.params.iter().map(|(k, v)| 4 + k.len() + v.len()).sum::<usize>();
        self.make_room(need.min(u16::MAX as usize))?;
        let mut rec = std::mem::take(&mut self.scratch);
        rec.clear();
        let r = foreign::encode(f, &mut rec).map_err(invalid);
        if r.is_ok() {
            self.put(&rec);
            self.note(f.ts);
        }
        self.scratch = rec;
        r
    }

    /// Adds a checked record to the block, packed or as it is.
    fn put(&mut self, rec: &[u8]) {
        if self.opts.packed {
            self.packer.push(rec, &mut self.raw);
        } else {
            self.raw.extend_from_slice(rec);
        }
        self.wire_len += rec.len();
    }

    /// Events dropped in the kernel (`drops`) or before reaching the writer
    /// (`lost`) since the last call: counted in the block being filled.
    pub fn add_drops(&mut self, drops: u64, lost: u64) {
        self.drops += drops;
        self.lost += lost;
    }

    /// Writes the pending block (if any) and flushes the output: everything
    /// given so far is in the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.close_block()?;
        self.out.flush()
    }

    /// What whole blocks hold so far (records still in the pending block are not counted).
    pub fn summary(&self) -> Summary {
        Summary { bytes: self.pos, ..self.summary }
    }

    /// Bytes written so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Writes the last block, the index and the trailer.
    pub fn finish(mut self) -> io::Result<(W, Summary)> {
        self.close_block()?;
        let totals =
            Totals { records: self.summary.records, drops: self.summary.drops, lost: self.summary.lost };
        let mut raw = Vec::new();
        encode_index(&totals, &self.index, &mut raw);
        let h = BlockHeader {
            kind: BlockKind::Index as u8,
            codec: CODEC_NONE,
            stored_len: raw.len() as u32,
            raw_len: raw.len() as u32,
            records: self.index.len() as u32,
            payload_crc: crc32fast::hash(&raw),
            ..Default::default()
        };
        let index_at = self.pos;
        self.put_block(&h.encode(), &raw)?;
        self.out.write_all(&encode_trailer(index_at))?;
        self.pos += TRAILER_LEN as u64;
        self.out.flush()?;
        self.summary.bytes = self.pos;
        Ok((self.out, self.summary))
    }

    fn note(&mut self, ts: u64) {
        self.records += 1;
        self.first_ts = self.first_ts.min(ts);
        self.last_ts = self.last_ts.max(ts);
    }

    fn make_room(&mut self, n: usize) -> io::Result<()> {
        let full = self.wire_len + n > self.opts.block_len || self.raw.len() + n > self.opts.block_len;
        if full && !self.raw.is_empty() {
            self.close_block()?;
        }
        Ok(())
    }

    /// Compresses `raw` into `out`; returns the codec the payload uses
    /// (none when compression is off or would not save anything).
    fn pack(&mut self, raw: &[u8], out: &mut Vec<u8>) -> io::Result<u8> {
        let Some(z) = self.zstd.as_mut() else { return Ok(CODEC_NONE) };
        out.clear();
        let bound = zstd::zstd_safe::compress_bound(raw.len());
        if out.capacity() < bound {
            out.reserve(bound);
        }
        let n = z.compress_to_buffer(raw, out)?;
        Ok(if n < raw.len() { CODEC_ZSTD } else { CODEC_NONE })
    }

    fn close_block(&mut self) -> io::Result<()> {
        if self.records == 0 && self.drops == 0 && self.lost == 0 {
            return Ok(());
        }
        let raw = std::mem::take(&mut self.raw);
        let mut packed = std::mem::take(&mut self.packed);
        let codec = self.pack(&raw, &mut packed);
        let result = codec.and_then(|codec| {
            let payload = if codec == CODEC_NONE { &raw } else { &packed };
            let h = BlockHeader {
                kind: BlockKind::Events as u8,
                codec,
                encoding: if self.opts.packed { ENCODING_PACKED } else { ENCODING_WIRE },
                stored_len: payload.len() as u32,
                raw_len: raw.len() as u32,
                records: self.records,
                payload_crc: crc32fast::hash(payload),
                first_ts: if self.records == 0 { 0 } else { self.first_ts },
                last_ts: self.last_ts,
                drops: self.drops,
                lost: self.lost,
            };
            let at = self.pos;
            self.put_block(&h.encode(), payload)?;
            self.index.push(IndexEntry {
                offset: at,
                first_ts: h.first_ts,
                last_ts: h.last_ts,
                records: self.records as u64,
            });
            self.summary.records += self.records as u64;
            self.summary.raw_bytes += raw.len() as u64;
            self.summary.wire_bytes += self.wire_len as u64;
            self.summary.drops += self.drops;
            self.summary.lost += self.lost;
            Ok(())
        });
        self.raw = raw;
        self.raw.clear();
        self.wire_len = 0;
        self.packer.reset();
        self.packed = packed;
        self.records = 0;
        self.first_ts = u64::MAX;
        self.last_ts = 0;
        self.drops = 0;
        self.lost = 0;
        result
    }

    /// A whole block, written only once complete: a file cut off at any
    /// moment ends in whole blocks plus at most one partial one.
    fn put_block(&mut self, head: &[u8], payload: &[u8]) -> io::Result<()> {
        self.out.write_all(head)?;
        self.out.write_all(payload)?;
        self.pos += (head.len() + payload.len()) as u64;
        self.summary.blocks += 1;
        Ok(())
    }
}
