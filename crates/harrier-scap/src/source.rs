//! The block layer: a capture is a sequence of pcapng-style blocks
//! (`type u32, total length u32, body, total length u32`), gzip-compressed
//! or not. Blocks are read one at a time into one reused buffer, so memory
//! stays at the largest block actually present in the file.

use crate::error::{Error, Result};
use std::io::{BufRead, BufReader, Read};

pub const SHB: u32 = 0x0A0D0D0A;
pub const SHB_MAGIC: u32 = 0x1A2B3C4D;

/// No block may claim more than this (the libs cap large event blocks far lower).
pub const MAX_BLOCK: u32 = 256 << 20;

/// One block: its type, where it starts and its body (without header and trailer).
#[derive(Debug)]
pub struct Block<'a> {
    pub offset: u64,
    pub kind: u32,
    pub body: &'a [u8],
}

impl Block<'_> {
    /// File offset of the body's first byte.
    pub fn body_offset(&self) -> u64 {
        self.offset + 8
    }
}

pub struct BlockReader<R> {
    src: R,
    pos: u64,
    buf: Vec<u8>,
    compressed: bool,
    /// Bytes the file has, when known (uncompressed files): a block claiming
    /// more is refused before anything is allocated for it.
    size: Option<u64>,
}

/// Opens a capture file, gzip-compressed or not.
pub fn open(path: &std::path::Path) -> Result<BlockReader<Box<dyn Read + Send>>> {
    let f = std::fs::File::open(path).map_err(|e| Error::new(0, format!("cannot open: {e}")))?;
    let size = f.metadata().ok().map(|m| m.len());
    BlockReader::detect(f, size)
}

impl BlockReader<Box<dyn Read + Send>> {
    /// Wraps any byte source: gzip is recognised by its magic bytes.
    /// `size`: the source's length if known (used only for early length checks).
    pub fn detect<R: Read + Send + 'static>(src: R, size: Option<u64>) -> Result<Self> {
        let mut br = BufReader::with_capacity(64 << 10, src);
        let head = br.fill_buf().map_err(|e| Error::new(0, format!("read: {e}")))?;
        if head.starts_with(&[0x1f, 0x8b]) {
            let gz = flate2::bufread::MultiGzDecoder::new(br);
            Ok(BlockReader {
                src: Box::new(BufReader::with_capacity(64 << 10, gz)),
                pos: 0,
                buf: Vec::new(),
                compressed: true,
                size: None,
            })
        } else {
            Ok(BlockReader { src: Box::new(br), pos: 0, buf: Vec::new(), compressed: false, size })
        }
    }
}

impl<R: Read> BlockReader<R> {
    pub fn is_compressed(&self) -> bool {
        self.compressed
    }

    /// Bytes consumed so far (decompressed, for gzip files).
    pub fn position(&self) -> u64 {
        self.pos
    }

    fn err(&self, offset: u64, msg: impl Into<String>) -> Error {
        Error { offset, msg: msg.into(), decompressed: self.compressed }
    }

    /// Reads up to `n` bytes into `buf` (appended); returns how many arrived.
    /// The buffer grows with the data that really arrives, never ahead of it.
    fn fill(&mut self, n: u64) -> Result<u64> {
        let start = self.buf.len();
        let got = (&mut self.src).take(n).read_to_end(&mut self.buf);
        match got {
            Ok(k) => {
                self.pos += k as u64;
                Ok(k as u64)
            }
            Err(e) => {
                let at = self.pos + (self.buf.len() - start) as u64;
                Err(self.err(at, format!("read: {e}")))
            }
        }
    }

    /// The next block, or None at a clean end of file (between blocks).
    pub fn next_block(&mut self) -> Result<Option<Block<'_>>> {
        let offset = self.pos;
        self.buf.clear();
        match self.fill(8)? {
            0 => return Ok(None),
            8 => {}
            n => return Err(self.err(offset, format!("file ends inside a block header ({n} of 8 bytes)"))),
        }
        let kind = u32::from_le_bytes(self.buf[0..4].try_into().unwrap());
        let total = u32::from_le_bytes(self.buf[4..8].try_into().unwrap());
        if offset == 0 && kind != SHB {
            return Err(
                self.err(0, format!("not a scap capture: first block type {kind:#x}, not a section header"))
            );
        }
        if total < 12 {
            return Err(self.err(
                offset + 4,
                format!("block of type {kind:#x} claims {total} bytes, less than its 12-byte frame"),
            ));
        }
        if total > MAX_BLOCK {
            return Err(self.err(
                offset + 4,
                format!("block of type {kind:#x} claims {total} bytes, more than the {MAX_BLOCK} allowed"),
            ));
        }
        if let Some(size) = self.size {
            if offset + total as u64 > size {
                return Err(self.err(offset + 4, format!(
                    "block of type {kind:#x} claims {total} bytes but the file ends {} bytes later (truncated?)",
                    size - offset
                )));
            }
        }
        self.buf.clear();
        let want = total as u64 - 8;
        let got = self.fill(want)?;
        if got < want {
            return Err(self.err(offset, format!("file ends inside a block of type {kind:#x}: {got} of {want} bytes after its header (truncated?)")));
        }
        let body_len = self.buf.len() - 4;
        let trailer = u32::from_le_bytes(self.buf[body_len..].try_into().unwrap());
        if trailer != total {
            return Err(self.err(
                offset + total as u64 - 4,
                format!(
                    "block of type {kind:#x}: trailing length {trailer} differs from the header's {total}"
                ),
            ));
        }
        Ok(Some(Block { offset, kind, body: &self.buf[..body_len] }))
    }
}
