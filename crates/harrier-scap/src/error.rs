//! Errors of the legacy reader: every one names the byte offset it is about.

use std::fmt;

/// A malformed, truncated or unsupported capture, or an I/O failure.
#[derive(Debug)]
pub struct Error {
    /// Byte offset in the capture (in the decompressed stream for a gzip file).
    pub offset: u64,
    pub msg: String,
    /// True when the offset is in the decompressed stream of a gzip file.
    pub decompressed: bool,
}

impl Error {
    pub fn new(offset: u64, msg: impl Into<String>) -> Error {
        Error { offset, msg: msg.into(), decompressed: false }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.decompressed { "decompressed byte" } else { "byte" };
        write!(f, "{what} {}: {}", self.offset, self.msg)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Bounds-checked little-endian reads over one block's body; errors carry
/// the file offset of the field that did not fit.
pub(crate) struct Cursor<'a> {
    pub b: &'a [u8],
    pub at: usize,
    /// File offset of `b[0]`.
    pub base: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(b: &'a [u8], base: u64) -> Cursor<'a> {
        Cursor { b, at: 0, base }
    }

    pub fn offset(&self) -> u64 {
        self.base + self.at as u64
    }

    pub fn left(&self) -> usize {
        self.b.len() - self.at
    }

    pub fn err(&self, msg: impl Into<String>) -> Error {
        Error::new(self.offset(), msg)
    }

    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.left() {
            return Err(self.err(format!("{what}: {n} bytes needed, {} left in the block", self.left())));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    pub fn skip(&mut self, n: usize, what: &str) -> Result<()> {
        self.bytes(n, what).map(|_| ())
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.bytes(1, what)?[0])
    }

    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.bytes(2, what)?.try_into().unwrap()))
    }

    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes(4, what)?.try_into().unwrap()))
    }

    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes(8, what)?.try_into().unwrap()))
    }

    /// A u16 length, then that many bytes of text (lossy UTF-8, NULs at the end dropped).
    pub fn str16(&mut self, what: &str) -> Result<String> {
        let n = self.u16(what)? as usize;
        Ok(text(self.bytes(n, what)?))
    }
}

/// Text from a legacy string: lossy UTF-8, without the trailing NULs the
/// format often stores.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(trim_nul(b)).into_owned()
}

pub fn trim_nul(mut b: &[u8]) -> &[u8] {
    while let [rest @ .., 0] = b {
        b = rest;
    }
    b
}
