//! Reading a capture file, trusting nothing in it.
//!
//! Every length is checked against what is left of the file before anything
//! is read or allocated: a payload buffer never exceeds the bytes the file
//! still holds, and a decompressed block grows only as zstd really produces
//! output, up to the length its header declares (at most `MAX_BLOCK_LEN`).
//! A file that ends early (killed writer, full disk) is read up to its last
//! whole block and [`Reader::stop`] says where and why reading ended.

use crate::foreign::Foreign;
use crate::format::*;
use crate::pack::ENCODING_PACKED;
use crate::unpack::Unpacker;
use crate::SCHEMA_VERSION;
use harrier_schema::wire::{Header, HEADER_LEN};
use harrier_state::Snapshot;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// A corrupt file: what is wrong and the byte offset in the file where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub offset: u64,
    pub msg: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.msg)
    }
}

impl std::error::Error for Error {}

fn err<T>(offset: u64, msg: impl Into<String>) -> Result<T, Error> {
    Err(Error { offset, msg: msg.into() })
}

/// Why reading ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The index and trailer were reached: the writer finished the file.
    Complete,
    /// The file ends early; everything before `offset` was read.
    Truncated { offset: u64, reason: String },
}

/// One thing read from the file, in file order.
#[derive(Debug)]
pub enum Item<'a> {
    /// A wire record, as the rings delivered it (header checked, length
    /// matches; the parameters are the decoder's business).
    Event(&'a [u8]),
    /// An event without a typed form.
    Foreign(Foreign<'a>),
    /// A snapshot of the state tables (the first block of a live capture).
    Snapshot(Box<Snapshot>),
}

/// Counters of what has been read so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    pub blocks: u64,
    pub event_blocks: u64,
    /// Event blocks whose records were packed (encoding 1).
    pub packed_blocks: u64,
    pub records: u64,
    pub drops: u64,
    pub lost: u64,
    /// Payload bytes as stored and uncompressed (event and snapshot blocks).
    pub stored_bytes: u64,
    pub raw_bytes: u64,
    /// Bytes of the event blocks' records in wire form (unpacked).
    pub wire_bytes: u64,
    pub first_ts: Option<u64>,
    pub last_ts: u64,
}

pub struct Reader<R> {
    src: R,
    file_len: u64,
    pub format_version: u16,
    pub schema_version: u16,
    pub info: FileInfo,
    /// Offset of the next block header.
    next: u64,
    /// The current event block, uncompressed and unpacked.
    block: Vec<u8>,
    /// A packed block's payload while it is unpacked into `block` (reused).
    packed: Vec<u8>,
    unpacker: Unpacker,
    /// Offset of the current block's header, for error messages.
    block_at: u64,
    pos: usize,
    stored: Vec<u8>,
    stop: Option<Stop>,
    failed: bool,
    /// Blocks were skipped by a seek: totals cannot be checked against the index.
    seeked: bool,
    stats: ReadStats,
    /// A record of an older schema rewritten in the current layout.
    upgraded: Vec<u8>,
}

impl Reader<BufReader<File>> {
    pub fn open(path: impl AsRef<Path>) -> io::Result<Result<Self, Error>> {
        let f = File::open(path)?;
        Ok(Reader::new(BufReader::with_capacity(1 << 16, f)))
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, or says how many were there.
fn read_at<R: Read + Seek>(src: &mut R, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
    let io = |e: io::Error| Error { offset, msg: format!("read error: {e}") };
    src.seek(SeekFrom::Start(offset)).map_err(io)?;
    src.read_exact(buf).map_err(io)
}

impl<R: Read + Seek> Reader<R> {
    /// Checks the file header; the first block is read by the first `next`.
    pub fn new(mut src: R) -> Result<Reader<R>, Error> {
        let file_len =
            src.seek(SeekFrom::End(0)).map_err(|e| Error { offset: 0, msg: format!("cannot seek: {e}") })?;
        if file_len < FILE_HEADER_LEN as u64 {
            if file_len >= 8 {
                let mut m = [0u8; 8];
                read_at(&mut src, 0, &mut m)?;
                if m != MAGIC {
                    return err(0, "not a Harrier capture file (bad magic)");
                }
            }
            return err(
                file_len,
                format!("file of {file_len} bytes ends inside the {FILE_HEADER_LEN}-byte file header"),
            );
        }
        let mut h = [0u8; FILE_HEADER_LEN];
        read_at(&mut src, 0, &mut h)?;
        if h[0..8] != MAGIC {
            return err(0, "not a Harrier capture file (bad magic)");
        }
        let format_version = u16::from_le_bytes([h[8], h[9]]);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&format_version) {
            return err(
                8,
                format!(
                    "format version {format_version} is not supported (this reader knows {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})"
                ),
            );
        }
        let schema_version = u16::from_le_bytes([h[10], h[11]]);
        if u32_at(&h, 12) != 0 {
            return err(12, "reserved header bytes are not zero");
        }
        let info_len = u32_at(&h, 16);
        if info_len > MAX_INFO_LEN {
            return err(16, format!("header info of {info_len} bytes is over the {MAX_INFO_LEN}-byte limit"));
        }
        if info_len as u64 > file_len - FILE_HEADER_LEN as u64 {
            return err(
                FILE_HEADER_LEN as u64,
                format!("header info of {info_len} bytes runs past the end of the file ({file_len} bytes)"),
            );
        }
        let mut json = vec![0u8; info_len as usize];
        read_at(&mut src, FILE_HEADER_LEN as u64, &mut json)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&h[..20]);
        crc.update(&json);
        if crc.finalize() != u32_at(&h, 20) {
            return err(20, "file header checksum does not match");
        }
        let info: FileInfo = serde_json::from_slice(&json).map_err(|e| Error {
            offset: FILE_HEADER_LEN as u64,
            msg: format!("header info is not valid JSON: {e}"),
        })?;
        Ok(Reader {
            src,
            file_len,
            format_version,
            schema_version,
            info,
            next: (FILE_HEADER_LEN + json.len()) as u64,
            block: Vec::new(),
            packed: Vec::new(),
            unpacker: Unpacker::default(),
            block_at: 0,
            pos: 0,
            stored: Vec::new(),
            stop: None,
            failed: false,
            seeked: false,
            upgraded: Vec::new(),
            stats: ReadStats::default(),
        })
    }

    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// Why reading ended (None while items remain, and after an error).
    pub fn stop(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }

    /// The next item; Ok(None) at the end (see [`Reader::stop`]); Err on
    /// corruption, after which nothing more is read.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Item<'_>>, Error> {
        if self.failed {
            return Ok(None);
        }
        let r = self.advance();
        if r.is_err() {
            self.failed = true;
        }
        let (start, end, foreign) = match r? {
            Next::Record(s, e, f) => (s, e, f),
            Next::Snapshot(s) => return Ok(Some(Item::Snapshot(s))),
            Next::End => return Ok(None),
        };
        let rec = &self.block[start..end];
        Ok(Some(if foreign {
            // Checked in advance(); parse again to borrow (cheap, rare).
            Item::Foreign(Foreign::parse(rec).map_err(|m| Error { offset: self.block_at, msg: m })?)
        } else if self.schema_version < SCHEMA_VERSION
            && crate::upgrade::upgrade(self.schema_version, rec, &mut self.upgraded)
        {
            Item::Event(&self.upgraded)
        } else {
            Item::Event(rec)
        }))
    }

    /// Finds the next record in the current block or loads blocks until one
    /// has records.
    fn advance(&mut self) -> Result<Next, Error> {
        loop {
            if self.pos < self.block.len() {
                return self.record();
            }
            if self.stop.is_some() {
                return Ok(Next::End);
            }
            if let Some(s) = self.load_block()? {
                return Ok(Next::Snapshot(s));
            }
        }
    }

    /// Frames the record at `pos`.
    fn record(&mut self) -> Result<Next, Error> {
        let at = self.pos;
        let rest = &self.block[at..];
        let where_ = |m: String| Error {
            offset: self.block_at,
            msg: format!("block record at payload byte {at}: {m}"),
        };
        let h = Header::parse(rest)
            .ok_or_else(|| where_(format!("{} bytes left, less than a record header", rest.len())))?;
        let len = h.len as usize;
        if len < HEADER_LEN || len > rest.len() {
            return Err(where_(format!("record length {len} does not fit ({} bytes left)", rest.len())));
        }
        let foreign = h.kind == FOREIGN_TYPE;
        if foreign {
            Foreign::parse(&rest[..len]).map_err(where_)?;
        }
        self.pos += len;
        self.stats.records += 1;
        Ok(Next::Record(at, at + len, foreign))
    }

    fn truncated(&mut self, offset: u64, reason: String) -> Result<Option<Box<Snapshot>>, Error> {
        self.stop = Some(Stop::Truncated { offset, reason });
        Ok(None)
    }

    /// Reads the block at `next`. Event blocks become the current block;
    /// a snapshot is returned; the index ends the file.
    fn load_block(&mut self) -> Result<Option<Box<Snapshot>>, Error> {
        self.block.clear();
        self.pos = 0;
        let at = self.next;
        let left = self.file_len.saturating_sub(at);
        if left == 0 {
            return self.truncated(at, "the file ends after its last whole block, without index and trailer (the writer did not finish)".into());
        }
        if left < BLOCK_HEADER_LEN as u64 {
            return self.truncated(
                at,
                format!("the file ends inside a block header ({left} of {BLOCK_HEADER_LEN} bytes)"),
            );
        }
        let mut hb = [0u8; BLOCK_HEADER_LEN];
        read_at(&mut self.src, at, &mut hb)?;
        let h = BlockHeader::parse(&hb).map_err(|m| Error { offset: at, msg: m })?;
        if self.format_version < 2 && h.encoding != 0 {
            return err(
                at,
                format!("block encoding {} needs format version 2, the file is version 1", h.encoding),
            );
        }
        let left = left - BLOCK_HEADER_LEN as u64;
        if h.stored_len as u64 > left {
            return self.truncated(
                at,
                format!(
                    "the file ends inside a block: it declares {} payload bytes, {left} remain",
                    h.stored_len
                ),
            );
        }
        let payload_at = at + BLOCK_HEADER_LEN as u64;
        self.stored.clear();
        self.stored.resize(h.stored_len as usize, 0);
        read_at(&mut self.src, payload_at, &mut self.stored)?;
        if crc32fast::hash(&self.stored) != h.payload_crc {
            return err(at, "block payload checksum does not match");
        }
        self.next = payload_at + h.stored_len as u64;
        self.block_at = at;
        self.stats.blocks += 1;
        let kind = BlockKind::from_u8(h.kind).expect("checked by parse");
        if kind == BlockKind::Index {
            return self.end_at_index(at, &h);
        }
        self.unpack(&h, at)?;
        self.stats.stored_bytes += h.stored_len as u64;
        self.stats.raw_bytes += h.raw_len as u64;
        match kind {
            BlockKind::Snapshot => {
                let s: Snapshot = serde_json::from_slice(&self.block).map_err(|e| Error {
                    offset: at,
                    msg: format!("snapshot block is not a valid snapshot: {e}"),
                })?;
                self.block.clear();
                Ok(Some(Box::new(s)))
            }
            _ => {
                self.stats.event_blocks += 1;
                self.stats.drops += h.drops;
                self.stats.lost += h.lost;
                if h.records > 0 {
                    self.stats.first_ts = Some(self.stats.first_ts.map_or(h.first_ts, |t| t.min(h.first_ts)));
                    self.stats.last_ts = self.stats.last_ts.max(h.last_ts);
                }
                let n = if h.encoding == ENCODING_PACKED {
                    self.stats.packed_blocks += 1;
                    std::mem::swap(&mut self.block, &mut self.packed);
                    let n = self.unpacker.unpack(&self.packed, h.records, &mut self.block);
                    n.map_err(|m| Error { offset: at, msg: m })? as usize
                } else {
                    count_records(&self.block).map_err(|m| Error { offset: at, msg: m })?
                };
                self.stats.wire_bytes += self.block.len() as u64;
                if n != h.records as usize {
                    return err(
                        at,
                        format!("block header says {} records, its payload holds {n}", h.records),
                    );
                }
                Ok(None)
            }
        }
    }

    /// Uncompresses the stored payload into `block`, never past raw_len.
    fn unpack(&mut self, h: &BlockHeader, at: u64) -> Result<(), Error> {
        if h.codec == CODEC_NONE {
            std::mem::swap(&mut self.block, &mut self.stored);
            return Ok(());
        }
        let mut dec = zstd::stream::read::Decoder::with_buffer(&self.stored[..])
            .map_err(|e| Error { offset: at, msg: format!("zstd: {e}") })?;
        // Growth follows real output; one byte more than declared is caught.
        (&mut dec)
            .take(h.raw_len as u64 + 1)
            .read_to_end(&mut self.block)
            .map_err(|e| Error { offset: at, msg: format!("block payload does not decompress: {e}") })?;
        let (got, want) = (self.block.len(), h.raw_len as usize);
        if got > want {
            return err(at, format!("block decompresses to more than the {want} bytes its header says"));
        }
        if got < want {
            return err(at, format!("block decompresses to {got} bytes, its header says {want}"));
        }
        Ok(())
    }

    /// The index block: check it against what was read and its trailer.
    fn end_at_index(&mut self, at: u64, h: &BlockHeader) -> Result<Option<Box<Snapshot>>, Error> {
        if h.codec != CODEC_NONE {
            return err(at, "the index block must not be compressed");
        }
        let (totals, entries) = parse_index(&self.stored).map_err(|m| Error { offset: at, msg: m })?;
        let differs = entries.len() as u64 != self.stats.event_blocks || totals.records != self.stats.records;
        if differs && !self.seeked {
            return err(
                at,
                format!(
                    "index lists {} blocks and {} records, the file holds {} and {}",
                    entries.len(),
                    totals.records,
                    self.stats.event_blocks,
                    self.stats.records
                ),
            );
        }
        let left = self.file_len - self.next;
        if left < TRAILER_LEN as u64 {
            return self.truncated(
                self.next,
                format!("the file ends inside the trailer ({left} of {TRAILER_LEN} bytes)"),
            );
        }
        if left > TRAILER_LEN as u64 {
            return err(self.next, format!("{} unexpected bytes after the index", left - TRAILER_LEN as u64));
        }
        let mut t = [0u8; TRAILER_LEN];
        read_at(&mut self.src, self.next, &mut t)?;
        let index_at = parse_trailer(&t).map_err(|m| Error { offset: self.next, msg: m })?;
        if index_at != at {
            return err(self.next, format!("trailer points at byte {index_at}, the index is at {at}"));
        }
        self.stop = Some(Stop::Complete);
        Ok(None)
    }

    /// The index of a finished file, read from its trailer (None when the
    /// file has no valid trailer: cut off, or still being written).
    pub fn index(&mut self) -> Result<Option<(Totals, Vec<IndexEntry>)>, Error> {
        if self.file_len < (FILE_HEADER_LEN + BLOCK_HEADER_LEN + TRAILER_LEN) as u64 {
            return Ok(None);
        }
        let tat = self.file_len - TRAILER_LEN as u64;
        let mut t = [0u8; TRAILER_LEN];
        read_at(&mut self.src, tat, &mut t)?;
        let Ok(at) = parse_trailer(&t) else { return Ok(None) };
        if at >= tat || tat - at < BLOCK_HEADER_LEN as u64 {
            return err(tat, format!("trailer points at byte {at}, outside the file"));
        }
        let mut hb = [0u8; BLOCK_HEADER_LEN];
        read_at(&mut self.src, at, &mut hb)?;
        let h = BlockHeader::parse(&hb).map_err(|m| Error { offset: at, msg: m })?;
        if h.kind != BlockKind::Index as u8 || h.stored_len as u64 != tat - at - BLOCK_HEADER_LEN as u64 {
            return err(at, "trailer does not point at an index block that ends at the trailer");
        }
        let mut b = vec![0u8; h.stored_len as usize];
        read_at(&mut self.src, at + BLOCK_HEADER_LEN as u64, &mut b)?;
        if crc32fast::hash(&b) != h.payload_crc {
            return err(at, "index payload checksum does not match");
        }
        let (t, e) = parse_index(&b).map_err(|m| Error { offset: at, msg: m })?;
        if let Some(bad) = e.iter().find(|e| e.offset >= at) {
            return err(at, format!("index entry points at byte {}, past the index", bad.offset));
        }
        Ok(Some((t, e)))
    }

    /// Continues reading at the first event block that may hold events at
    /// or after `ts` (by the index; the block's earlier events come too).
    /// False when the file has no index.
    pub fn seek_time(&mut self, ts: u64) -> Result<bool, Error> {
        let Some((_, entries)) = self.index()? else { return Ok(false) };
        let target = entries.iter().find(|e| e.last_ts >= ts).map(|e| e.offset);
        self.block.clear();
        self.pos = 0;
        self.failed = false;
        self.seeked = true;
        match target {
            Some(off) => {
                self.next = off;
                self.stop = None;
            }
            None => self.stop = Some(Stop::Complete),
        }
        Ok(true)
    }
}

enum Next {
    Record(usize, usize, bool),
    Snapshot(Box<Snapshot>),
    End,
}

/// The number of records a payload frames exactly, or which one does not fit.
fn count_records(b: &[u8]) -> Result<usize, String> {
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        let len = Header::parse(&b[i..]).map_or(0, |h| h.len as usize);
        if len < HEADER_LEN || len > b.len() - i {
            return Err(format!(
                "block record at payload byte {i}: length {len} does not fit ({} bytes left, {HEADER_LEN} at least)",
                b.len() - i
            ));
        }
        i += len;
        n += 1;
    }
    Ok(n)
}
