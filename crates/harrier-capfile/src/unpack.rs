//! The reader's side of packed event blocks (block encoding 1; the layout
//! is in pack.rs and docs/capture-format.md): a packed payload back into the
//! exact wire records, every length checked against the payload.

use crate::foreign::Foreign;
use crate::format::{FOREIGN_TYPE, MAX_BLOCK_LEN};
use crate::pack::{unzigzag, F_FIXED, F_I32, F_I64, F_REST, F_VAR};
use harrier_schema::wire::{var_bytes, ARGS_AT_EXIT, HEADER_LEN};

/// The reader's side: the layouts a block defined so far (reused).
#[derive(Default)]
pub(crate) struct Unpacker {
    /// (type field, start in `codes`, number of codes) per layout number.
    layouts: Vec<(u16, u32, u8)>,
    codes: Vec<u8>,
}

/// A cursor over the payload whose errors name the payload byte.
pub(crate) struct Cur<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) at: usize,
}

impl Cur<'_> {
    #[inline]
    pub(crate) fn varint(&mut self, what: &str) -> Result<u64, String> {
        // Most values (keys, lengths, small ints) are one byte.
        if let Some(&byte) = self.b.get(self.at) {
            if byte < 0x80 {
                self.at += 1;
                return Ok(byte as u64);
            }
        }
        self.long_varint(what)
    }

    fn long_varint(&mut self, what: &str) -> Result<u64, String> {
        let start = self.at;
        let mut v = 0u64;
        // At most 10 bytes; the 10th holds bit 63 alone.
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.b.get(self.at) else {
                return Err(format!("{what} at payload byte {start} runs past the end of the payload"));
            };
            self.at += 1;
            if shift == 63 && byte > 1 {
                break;
            }
            v |= ((byte & 0x7f) as u64) << shift;
            if byte < 0x80 {
                return Ok(v);
            }
        }
        Err(format!("{what} at payload byte {start} is larger than 64 bits"))
    }

    fn bytes(&mut self, n: usize, what: &str) -> Result<&[u8], String> {
        let left = self.b.len() - self.at;
        if n > left {
            return Err(format!(
                "{what} of {n} bytes at payload byte {} runs past the end of the payload ({left} bytes left)",
                self.at
            ));
        }
        self.at += n;
        Ok(&self.b[self.at - n..self.at])
    }
}

impl Unpacker {
    /// Unpacks a packed payload into wire records appended to `out`
    /// (cleared first). Returns the number of records. Every length is
    /// checked against the payload; `out` grows only with real output, at
    /// most `MAX_BLOCK_LEN` bytes, and stops after `max_records` records.
    pub fn unpack(&mut self, p: &[u8], max_records: u32, out: &mut Vec<u8>) -> Result<u32, String> {
        out.clear();
        self.layouts.clear();
        self.codes.clear();
        let mut c = Cur { b: p, at: 0 };
        let (mut prev_ts, mut prev_tid, mut n) = (0u64, 0u32, 0u32);
        while c.at < p.len() {
            let rec_at = c.at;
            let at = |m: String| format!("packed record {n} at payload byte {rec_at}: {m}");
            if n == max_records {
                return Err(at(format!("more records than the {max_records} the block header says")));
            }
            let key = c.varint("record key").map_err(at)?;
            let layout = key >> 1;
            if layout > self.layouts.len() as u64 {
                return Err(at(format!(
                    "layout {layout} is not defined ({} defined so far)",
                    self.layouts.len()
                )));
            }
            if layout == self.layouts.len() as u64 {
                self.define(&mut c).map_err(at)?;
            }
            let (typ, start, ncodes) = self.layouts[layout as usize];
            if key & 1 != 0 {
                let tid = c.varint("tid").map_err(at)?;
                prev_tid = u32::try_from(tid).map_err(|_| at(format!("tid {tid} does not fit 32 bits")))?;
            }
            prev_ts = prev_ts.wrapping_add(unzigzag(c.varint("ts delta").map_err(at)?) as u64);
            let base = out.len();
            if base + HEADER_LEN > MAX_BLOCK_LEN as usize {
                return Err(at(format!("the block unpacks to more than {MAX_BLOCK_LEN} bytes")));
            }
            out.extend_from_slice(&prev_ts.to_le_bytes());
            out.extend_from_slice(&prev_tid.to_le_bytes());
            out.extend_from_slice(&typ.to_le_bytes());
            out.extend_from_slice(&[0, 0]);
            let codes = &self.codes[start as usize..start as usize + ncodes as usize];
            for &code in codes {
                field(&mut c, code, out).map_err(at)?;
                let len = out.len() - base;
                if len > u16::MAX as usize {
                    return Err(at(format!("the record unpacks to {len} bytes, more than 65535")));
                }
                if out.len() > MAX_BLOCK_LEN as usize {
                    return Err(at(format!("the block unpacks to more than {MAX_BLOCK_LEN} bytes")));
                }
            }
            let len = (out.len() - base) as u16;
            out[base + 14..base + 16].copy_from_slice(&len.to_le_bytes());
            // Checked here so that the error names the packed byte.
            if typ & !ARGS_AT_EXIT == FOREIGN_TYPE {
                Foreign::parse(&out[base..]).map_err(at)?;
            }
            n += 1;
        }
        Ok(n)
    }

    /// Reads a layout definition at the cursor and adds it.
    fn define(&mut self, c: &mut Cur) -> Result<(), String> {
        let d = c.bytes(3, "layout definition")?;
        let typ = u16::from_le_bytes([d[0], d[1]]);
        let n = d[2];
        let def_at = c.at;
        let codes = c.bytes(n as usize, "layout field codes")?;
        for (i, &code) in codes.iter().enumerate() {
            let ok = match code {
                F_I32 | F_I64 | F_VAR => true,
                F_REST => i + 1 == codes.len(),
                c => c > F_FIXED,
            };
            if !ok {
                return Err(format!(
                    "layout field code {code:#04x} at payload byte {} is not valid",
                    def_at + i
                ));
            }
        }
        self.layouts.push((typ, self.codes.len() as u32, n));
        self.codes.extend_from_slice(codes);
        Ok(())
    }
}

/// Unpacks a packed event-block payload into wire records appended to
/// `out` (cleared first), at most `max_records` of them; returns how many.
/// The errors name the payload byte.
pub fn unpack(payload: &[u8], max_records: u32, out: &mut Vec<u8>) -> Result<u32, String> {
    Unpacker::default().unpack(payload, max_records, out)
}

/// Unpacks one field into its wire form.
fn field(c: &mut Cur, code: u8, out: &mut Vec<u8>) -> Result<(), String> {
    match code {
        F_I32 => {
            let z = c.varint("4-byte field")?;
            let z = u32::try_from(z).map_err(|_| format!("4-byte field {z} does not fit 32 bits"))?;
            let v = (z >> 1) as i32 ^ -((z & 1) as i32);
            out.extend_from_slice(&v.to_le_bytes());
        }
        F_I64 => {
            let v = unzigzag(c.varint("8-byte field")?);
            out.extend_from_slice(&v.to_le_bytes());
        }
        F_VAR => {
            let n = c.varint("field length")?;
            let n = u16::try_from(n).map_err(|_| format!("field length {n} is over 65535"))?;
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(c.bytes(var_bytes(n), "field")?);
        }
        F_REST => {
            let n = c.varint("record rest length")?;
            if n > u16::MAX as u64 {
                return Err(format!("record rest length {n} is over 65535"));
            }
            out.extend_from_slice(c.bytes(n as usize, "record rest")?);
        }
        code => out.extend_from_slice(c.bytes((code & !F_FIXED) as usize, "fixed field")?),
    }
    Ok(())
}
