//! Event blocks: one event each, in one of six block types (old header
//! without a parameter count, the v2 header with it, each with or without a
//! 32-bit flags word, and the "large" v2 blocks).

use crate::error::{Cursor, Error, Result};
use crate::source::Block;
use crate::table::{event_info, EventInfo};

/// Parameters kept per event; any beyond (only a newer writer's) are ignored.
pub const MAX_PARAMS: usize = 48;

pub fn is_event_block(kind: u32) -> bool {
    matches!(kind, 0x204 | 0x8010ABCD | 0x216 | 0x221 | 0x208 | 0x217 | 0x222)
}

/// One legacy event, borrowing its block's bytes.
#[derive(Debug)]
pub struct LegacyEvent<'a> {
    /// File offset of the event header.
    pub offset: u64,
    pub cpu: u16,
    pub flags: u32,
    pub ts: u64,
    pub tid: u64,
    pub kind: u16,
    pub info: Option<&'static EventInfo>,
    nparams: usize,
    /// (start, len) of each parameter in `data`.
    spans: [(u32, u32); MAX_PARAMS],
    data: &'a [u8],
    /// Parameters past MAX_PARAMS that were ignored.
    pub dropped_params: usize,
}

const HDR_V1: usize = 22; // ts u64, tid u64, len u32, type u16
const HDR_V2: usize = 26; // + nparams u32

impl<'a> LegacyEvent<'a> {
    pub fn nparams(&self) -> usize {
        self.nparams
    }

    /// Parameter i's bytes.
    pub fn raw(&self, i: usize) -> Option<&'a [u8]> {
        if i >= self.nparams {
            return None;
        }
        let (s, l) = self.spans[i];
        Some(&self.data[s as usize..(s + l) as usize])
    }

    /// Parameter i's name in the table ("p<i>" when the table does not know it).
    pub fn name(&self, i: usize) -> Option<&'static str> {
        self.info.and_then(|e| e.params.get(i)).map(|p| p.0)
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        let info = self.info?;
        info.params.iter().take(self.nparams).position(|p| p.0 == name)
    }

    pub fn is_enter(&self) -> bool {
        self.kind & 1 == 0
    }

    /// Parses the event in an event block.
    pub fn parse(b: &Block<'a>) -> Result<LegacyEvent<'a>> {
        let v2 = matches!(b.kind, 0x216 | 0x221 | 0x217 | 0x222);
        let with_flags = matches!(b.kind, 0x208 | 0x217 | 0x222);
        let mut c = Cursor::new(b.body, b.body_offset());
        let cpu = c.u16("event cpu")?;
        let flags = if with_flags { c.u32("event flags")? } else { 0 };
        let offset = c.offset();
        let at = c.at;
        let ts = c.u64("event header")?;
        let tid = c.u64("event header")?;
        let len = c.u32("event header")? as usize;
        let kind = c.u16("event header")?;
        let info = event_info(kind);
        let hdr = if v2 { HDR_V2 } else { HDR_V1 };
        let mut ev = LegacyEvent {
            offset,
            cpu,
            flags,
            ts,
            tid,
            kind,
            info,
            nparams: 0,
            spans: [(0, 0); MAX_PARAMS],
            data: &[],
            dropped_params: 0,
        };
        let avail = b.body.len() - at;
        // Old writers stored notification and infrastructure events 3 bytes too long.
        let len = if !v2 && (kind == 280 || kind == 286) { len.saturating_sub(3) } else { len };
        if len < hdr || len > avail {
            return Err(Error::new(
                offset + 16,
                format!("event length {len} outside {hdr}..{avail} (header to end of block)"),
            ));
        }
        let body = &b.body[at + hdr..at + len];
        let large = info.is_some_and(|i| i.large);
        let lsize = if large { 4 } else { 2 };
        let read_len = |i: usize| -> usize {
            let p = &body[i * lsize..];
            if large {
                u32::from_le_bytes(p[..4].try_into().unwrap()) as usize
            } else {
                u16::from_le_bytes(p[..2].try_into().unwrap()) as usize
            }
        };
        let n = if v2 {
            let n = c.u32("event parameter count")? as usize;
            if n.saturating_mul(lsize) > body.len() {
                return Err(Error::new(
                    offset + 22,
                    format!("{n} parameters do not fit in event length {len}"),
                ));
            }
            n
        } else {
            // No count in the header: the largest count (at most the table's)
            // whose lengths add up exactly to the event's length.
            let max = info.map_or(MAX_PARAMS, |i| i.params.len()).min(body.len() / lsize);
            (0..=max)
                .rev()
                .find(|&n| {
                    let mut total = n * lsize;
                    for i in 0..n {
                        total += read_len(i);
                    }
                    total == body.len()
                })
                .ok_or_else(|| {
                    Error::new(
                        offset,
                        format!("event type {kind}: parameter lengths do not add up to its length {len}"),
                    )
                })?
        };
        let mut pos = n * lsize;
        for i in 0..n {
            let l = read_len(i);
            if l > body.len() - pos {
                return Err(Error::new(
                    offset + (hdr + i * lsize) as u64,
                    format!(
                        "event type {kind}: parameter {i} length {l} exceeds the event's remaining {} bytes",
                        body.len() - pos
                    ),
                ));
            }
            if i < MAX_PARAMS {
                ev.spans[i] = (pos as u32, l as u32);
            }
            pos += l;
        }
        ev.nparams = n.min(MAX_PARAMS);
        ev.dropped_params = n.saturating_sub(MAX_PARAMS);
        ev.data = body;
        Ok(ev)
    }
}

impl LegacyEvent<'_> {
    /// The same event over another copy of its parameter bytes (a stored enter event).
    pub(crate) fn rebind<'b>(&self, data: &'b [u8]) -> LegacyEvent<'b> {
        LegacyEvent {
            offset: self.offset,
            cpu: self.cpu,
            flags: self.flags,
            ts: self.ts,
            tid: self.tid,
            kind: self.kind,
            info: self.info,
            nparams: self.nparams,
            spans: self.spans,
            data,
            dropped_params: self.dropped_params,
        }
    }

    pub(crate) fn data(&self) -> &[u8] {
        self.data
    }

    /// Parameter `name`'s bytes and kind.
    pub fn get(&self, name: &str) -> Option<(&[u8], crate::table::PKind)> {
        let i = self.index_of(name)?;
        Some((self.raw(i)?, self.info?.params[i].1))
    }

    /// Parameter `name` as an integer.
    pub fn int(&self, name: &str) -> Option<i64> {
        let (b, k) = self.get(name)?;
        crate::values::int(b, k)
    }
}
