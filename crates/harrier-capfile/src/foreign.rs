//! Foreign records: events Harrier has no typed form for (from legacy
//! captures), kept as a name and text parameters instead of being dropped.
//!
//! ```text
//! 0    8     12           14         16              18        20
//! | ts | tid | 0x7000 u16 | len u16  | name_len u16 | name ... | nparams u16 | (klen u16, k, vlen u16, v)* |
//! ```

use crate::format::FOREIGN_TYPE;
use harrier_schema::wire::HEADER_LEN;

/// An event without a typed form: its name as the source called it and its
/// parameters as text, in their order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForeignEvent {
    pub ts: u64,
    pub tid: u32,
    pub name: String,
    pub params: Vec<(String, String)>,
}

/// A foreign record as read, borrowing the block (checked when read).
#[derive(Debug, Clone, Copy)]
pub struct Foreign<'a> {
    pub ts: u64,
    pub tid: u32,
    pub name: &'a str,
    nparams: u16,
    params: &'a [u8],
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*b.get(i)?, *b.get(i + 1)?]))
}

/// A u16-length-prefixed UTF-8 string at `i`: (text, next offset).
fn text_at(b: &[u8], i: usize) -> Result<(&str, usize), String> {
    let n = u16_at(b, i).ok_or_else(|| format!("length at record byte {i} cut off"))? as usize;
    let s = b
        .get(i + 2..i + 2 + n)
        .ok_or_else(|| format!("{n}-byte string at record byte {i} runs past the record"))?;
    let s = std::str::from_utf8(s).map_err(|_| format!("string at record byte {i} is not UTF-8"))?;
    Ok((s, i + 2 + n))
}

impl<'a> Foreign<'a> {
    /// Checks a whole record (header included); the error names the byte
    /// inside the record.
    pub fn parse(rec: &'a [u8]) -> Result<Foreign<'a>, String> {
        if rec.len() < HEADER_LEN + 4 {
            return Err(format!("foreign record of {} bytes is too short", rec.len()));
        }
        let (name, mut i) = text_at(rec, HEADER_LEN)?;
        let nparams = u16_at(rec, i).ok_or("parameter count cut off")?;
        i += 2;
        let start = i;
        for _ in 0..nparams {
            i = text_at(rec, i)?.1;
            i = text_at(rec, i)?.1;
        }
        if i != rec.len() {
            return Err(format!("{} bytes left after the last parameter", rec.len() - i));
        }
        Ok(Foreign {
            ts: u64::from_le_bytes(rec[0..8].try_into().unwrap()),
            tid: u32::from_le_bytes(rec[8..12].try_into().unwrap()),
            name,
            nparams,
            params: &rec[start..],
        })
    }

    /// The parameters, (name, value), in order. No allocation.
    pub fn params(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let b = self.params;
        let mut i = 0;
        (0..self.nparams).map_while(move |_| {
            let (k, j) = text_at(b, i).ok()?;
            let (v, j) = text_at(b, j).ok()?;
            i = j;
            Some((k, v))
        })
    }

    pub fn param(&self, name: &str) -> Option<&'a str> {
        self.params().find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    pub fn to_owned(&self) -> ForeignEvent {
        ForeignEvent {
            ts: self.ts,
            tid: self.tid,
            name: self.name.to_string(),
            params: self.params().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }
}

/// Appends `f` as a record to `out`; Err (and `out` unchanged) if it would
/// not fit the 65,535-byte record limit or a string is longer than 65,535.
pub fn encode(f: &ForeignEvent, out: &mut Vec<u8>) -> Result<(), String> {
    let mut len = HEADER_LEN + 2 + f.name.len() + 2;
    for (k, v) in &f.params {
        len += 4 + k.len() + v.len();
    }
    if len > u16::MAX as usize {
        return Err(format!(
            "foreign event '{}' needs {len} bytes, over the 65535-byte record limit",
            f.name
        ));
    }
    out.extend_from_slice(&f.ts.to_le_bytes());
    out.extend_from_slice(&f.tid.to_le_bytes());
    out.extend_from_slice(&FOREIGN_TYPE.to_le_bytes());
    out.extend_from_slice(&(len as u16).to_le_bytes());
    fn put(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u16).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    put(out, &f.name);
    out.extend_from_slice(&(f.params.len() as u16).to_le_bytes());
    for (k, v) in &f.params {
        put(out, k);
        put(out, v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_limits() {
        let f = ForeignEvent {
            ts: 5,
            tid: 7,
            name: "mmap".into(),
            params: vec![("addr".into(), "0x7f00".into()), ("len".into(), "4096".into())],
        };
        let mut b = Vec::new();
        encode(&f, &mut b).unwrap();
        let r = Foreign::parse(&b).unwrap();
        assert_eq!(r.to_owned(), f);
        assert_eq!(r.param("len"), Some("4096"));
        assert!(Foreign::parse(&b[..b.len() - 1]).is_err());
        let big = ForeignEvent { params: vec![("x".into(), "y".repeat(70000))], ..f };
        let mut out = Vec::new();
        assert!(encode(&big, &mut out).unwrap_err().contains("limit"));
        assert!(out.is_empty());
    }
}
