//! Packed event blocks (block encoding 1): the same wire records in fewer
//! bytes, and exactly the same bytes back.
//!
//! A record is its header as deltas against the previous record of the
//! block (ts) or a "same as before" bit (tid), and its body as varints by a
//! per-block field layout that the block itself defines, so a reader needs
//! no event table to unpack (docs/capture-format.md, "Packed event blocks"):
//!
//! ```text
//! record  = key [layout definition] [tid] ts_delta field*
//! key     = varint (layout number << 1 | tid follows)
//! definition (when the layout number is the count defined so far in the block):
//!           type u16 LE, n u8, n field codes
//! tid     = varint;  ts_delta = varint zigzag(ts - previous ts), both starting at 0
//! field   = I32: varint zigzag(i32) | I64: varint zigzag(i64)
//!         | VAR: varint len, bytes (len 0xffff: absent, no bytes)
//!         | FIXED(n): n bytes | REST: varint len, bytes
//! ```
//!
//! The writer only ever appends to buffers it sized once; the reader writes
//! the unpacked records into one buffer reused from block to block.

use crate::format::FOREIGN_TYPE;
use harrier_schema::wire::{var_bytes, ARGS_AT_EXIT, HEADER_LEN, META_COMM, META_EXEC, META_EXIT, META_FORK};
use harrier_schema::{syscall_by_nr, Wire, MAX_SYSCALL_NR};
use std::sync::OnceLock;

/// The reader's side, in unpack.rs.
pub use crate::unpack::unpack;

/// Block header byte 6 of an event block: how its payload holds the records.
pub const ENCODING_WIRE: u8 = 0;
pub const ENCODING_PACKED: u8 = 1;

/// Field codes of a layout (what follows the 16-byte record header).
/// u16 length + bytes on the wire; varint length + bytes packed.
pub const F_VAR: u8 = 0x00;
/// A 4-byte integer; packed as the varint of its zigzag as an i32.
pub const F_I32: u8 = 0x04;
/// An 8-byte integer; packed as the varint of its zigzag as an i64.
pub const F_I64: u8 = 0x08;
/// `F_FIXED | n` (n 1..=126): n bytes copied as they are (a 16-byte comm).
pub const F_FIXED: u8 = 0x80;
/// The rest of the record as it is: varint length + bytes. Last code only.
pub const F_REST: u8 = 0xff;

/// The layout a record falls back to when it does not match its type's.
const REST: &[u8] = &[F_REST];

/// The layout records of this type field normally have (the ARGS_AT_EXIT and
/// NO_RET bits do not change it): ret, then the parameters in wire order.
fn layout_of(type_field: u16) -> &'static [u8] {
    static TABLE: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let comm = F_FIXED | 16;
        let mut t = vec![REST.to_vec(); META_COMM as usize + 1];
        for nr in 0..=MAX_SYSCALL_NR {
            let Some(s) = syscall_by_nr(nr) else { continue };
            let mut l = vec![F_I64];
            match s.params {
                Some(ps) => l.extend(ps.iter().map(|p| match p.wire {
                    Wire::I32 | Wire::U32 => F_I32,
                    Wire::I64 | Wire::U64 => F_I64,
                    Wire::Bytes => F_VAR,
                })),
                None => l.extend([F_I64; 6]),
            }
            t[nr as usize] = l;
        }
        // The life-cycle records of wire.rs (schema 3 on).
        t[META_FORK as usize] = vec![F_I64, F_I32, F_I32, comm, F_I32, F_I32];
        t[META_EXEC as usize] = vec![F_I64, F_I32, comm, F_VAR];
        t[META_EXIT as usize] = vec![F_I64, F_I32];
        t[META_COMM as usize] = vec![F_I64, comm];
        t
    });
    let kind = type_field & !(ARGS_AT_EXIT | harrier_schema::wire::NO_RET);
    if kind == FOREIGN_TYPE {
        return REST;
    }
    t.get(kind as usize).map_or(REST, |l| l.as_slice())
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn unzigzag(z: u64) -> i64 {
    (z >> 1) as i64 ^ -((z & 1) as i64)
}

/// Appends `v` as LEB128 (7 bits a byte, low first).
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Whether `body` (a record after its header) is exactly what `codes` lay out.
fn fits(codes: &[u8], body: &[u8]) -> bool {
    let mut i = 0;
    for &c in codes {
        let n = match c {
            F_I32 => 4,
            F_I64 => 8,
            F_VAR => match body.get(i..i + 2) {
                Some(l) => 2 + var_bytes(u16::from_le_bytes([l[0], l[1]])),
                None => return false,
            },
            F_REST => return true,
            c => (c & !F_FIXED) as usize,
        };
        i += n;
        if i > body.len() {
            return false;
        }
    }
    i == body.len()
}

/// The writer's side: packs records into a block payload.
pub struct Packer {
    /// Per type field: 1 + the block's layout number for its own layout
    /// ([0]) and for REST ([1]); 0 when not defined in this block yet.
    slot: Vec<[u32; 2]>,
    /// Type fields whose slot is set, cleared at the next block.
    used: Vec<u16>,
    defined: u32,
    prev_ts: u64,
    prev_tid: u32,
    /// For [`Packer::packed_size`].
    scratch: Vec<u8>,
}

impl Default for Packer {
    fn default() -> Packer {
        Packer::new()
    }
}

impl Packer {
    pub fn new() -> Packer {
        Packer {
            slot: vec![[0; 2]; 1 << 16],
            used: Vec::new(),
            defined: 0,
            prev_ts: 0,
            prev_tid: 0,
            scratch: Vec::new(),
        }
    }

    /// The bytes `rec` takes packed after the records given before it since
    /// the last [`Packer::reset`] (for measurements); None when it is not a
    /// whole record (header length = its length).
    pub fn packed_size(&mut self, rec: &[u8]) -> Option<usize> {
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        let n = self.pack(rec, &mut out).then_some(out.len());
        self.scratch = out;
        n
    }

    /// Appends the packed form of `rec` to `out`; false (nothing appended)
    /// when it is not a whole record (header length = its length).
    pub fn pack(&mut self, rec: &[u8], out: &mut Vec<u8>) -> bool {
        let whole = rec.len() >= HEADER_LEN && u16::from_le_bytes([rec[14], rec[15]]) as usize == rec.len();
        if whole {
            self.push(rec, out);
        }
        whole
    }

    /// Starts a new block: layouts, ts and tid start over.
    pub fn reset(&mut self) {
        for &t in &self.used {
            self.slot[t as usize] = [0; 2];
        }
        self.used.clear();
        self.defined = 0;
        self.prev_ts = 0;
        self.prev_tid = 0;
    }

    /// Appends the packed form of `rec` (a whole record whose length field
    /// was checked) to `out`.
    pub(crate) fn push(&mut self, rec: &[u8], out: &mut Vec<u8>) {
        let ts = u64::from_le_bytes(rec[0..8].try_into().unwrap());
        let tid = u32::from_le_bytes(rec[8..12].try_into().unwrap());
        let typ = u16::from_le_bytes([rec[12], rec[13]]);
        let body = &rec[HEADER_LEN..];
        let own = layout_of(typ);
        let (codes, form) = if fits(own, body) { (own, 0) } else { (REST, 1) };
        let slot = &mut self.slot[typ as usize][form];
        let new = *slot == 0;
        if new {
            if self.slot[typ as usize] == [0; 2] {
                self.used.push(typ);
            }
            self.defined += 1;
            self.slot[typ as usize][form] = self.defined;
        }
        let layout = self.slot[typ as usize][form] - 1;
        let tid_follows = tid != self.prev_tid;
        put_varint(out, (layout as u64) << 1 | tid_follows as u64);
        if new {
            out.extend_from_slice(&typ.to_le_bytes());
            out.push(codes.len() as u8);
            out.extend_from_slice(codes);
        }
        if tid_follows {
            put_varint(out, tid as u64);
        }
        put_varint(out, zigzag(ts.wrapping_sub(self.prev_ts) as i64));
        self.prev_ts = ts;
        self.prev_tid = tid;
        let mut i = 0;
        for &c in codes {
            match c {
                F_I32 => {
                    let v = i32::from_le_bytes(body[i..i + 4].try_into().unwrap());
                    put_varint(out, zigzag(v as i64));
                    i += 4;
                }
                F_I64 => {
                    let v = i64::from_le_bytes(body[i..i + 8].try_into().unwrap());
                    put_varint(out, zigzag(v));
                    i += 8;
                }
                F_VAR => {
                    // An absent field packs as its length word alone.
                    let word = u16::from_le_bytes([body[i], body[i + 1]]);
                    let n = var_bytes(word);
                    put_varint(out, word as u64);
                    out.extend_from_slice(&body[i + 2..i + 2 + n]);
                    i += 2 + n;
                }
                F_REST => {
                    put_varint(out, (body.len() - i) as u64);
                    out.extend_from_slice(&body[i..]);
                    i = body.len();
                }
                c => {
                    let n = (c & !F_FIXED) as usize;
                    out.extend_from_slice(&body[i..i + n]);
                    i += n;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::MAX_BLOCK_LEN;
    use crate::unpack::{Cur, Unpacker};

    fn rec(ts: u64, tid: u32, typ: u16, body: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(ts.to_le_bytes());
        b.extend(tid.to_le_bytes());
        b.extend(typ.to_le_bytes());
        b.extend(((16 + body.len()) as u16).to_le_bytes());
        b.extend(body);
        b
    }

    fn unpack(p: &[u8]) -> Result<(u32, Vec<u8>), String> {
        let mut out = Vec::new();
        let n = Unpacker::default().unpack(p, u32::MAX, &mut out)?;
        Ok((n, out))
    }

    #[test]
    fn varints_and_zigzag_round_trip_at_every_width() {
        for v in [0i64, 1, -1, 63, -64, 64, 1 << 20, i32::MIN as i64, i64::MAX, i64::MIN] {
            let mut b = Vec::new();
            put_varint(&mut b, zigzag(v));
            let mut c = Cur { b: &b, at: 0 };
            assert_eq!(unzigzag(c.varint("x").unwrap()), v, "{v}");
            assert_eq!(c.at, b.len(), "{v}: all bytes used");
        }
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX);
        assert_eq!(b.len(), 10);
        assert_eq!(Cur { b: &b, at: 0 }.varint("x"), Ok(u64::MAX));
        b[9] = 2; // bit 64
        assert!(Cur { b: &b, at: 0 }.varint("x").unwrap_err().contains("larger than 64 bits"));
    }

    #[test]
    fn a_close_record_packs_to_seven_bytes_and_back() {
        let r = rec(1000, 100, 3, &[0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0]);
        let mut p = Vec::new();
        let mut k = Packer::new();
        k.push(&r, &mut p);
        // key (layout 0, tid follows), definition (type 3, 2 codes), tid, ts, ret, fd
        assert_eq!(p, [0x01, 3, 0, 2, F_I64, F_I32, 100, 0xd0, 0x0f, 0, 6]);
        let mut p2 = Vec::new();
        k.push(&rec(1001, 100, 3, &r[16..]), &mut p2);
        assert_eq!(p2, [0x00, 2, 0, 6], "same layout and tid: key, ts delta 1, ret, fd");
        p.extend(&p2);
        let (n, out) = unpack(&p).unwrap();
        assert_eq!(n, 2);
        assert_eq!(&out[..28], &r[..]);
        assert_eq!(&out[28..], &rec(1001, 100, 3, &r[16..])[..]);
        k.reset();
        let mut p3 = Vec::new();
        k.push(&r, &mut p3);
        assert_eq!(p3[..6], p[..6], "a new block defines its layouts again");
    }

    #[test]
    fn corrupt_payloads_are_errors_naming_the_payload_byte() {
        let def = [0x01u8, 87, 0, 2, F_I64, F_VAR, 100, 2]; // unlink: ret, path; tid 100, ts 1
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("key cut", vec![0x80], "record key at payload byte 0 runs past the end"),
            ("definition cut", vec![0x01, 87, 0], "layout definition of 3 bytes at payload byte 1 runs past"),
            (
                "codes cut",
                vec![0x01, 87, 0, 2, F_I64],
                "layout field codes of 2 bytes at payload byte 4 runs past",
            ),
            ("bad code", vec![0x01, 87, 0, 2, F_I64, 0x05], "layout field code 0x05 at payload byte 5"),
            (
                "rest not last",
                vec![0x01, 87, 0, 2, F_REST, F_I64],
                "layout field code 0xff at payload byte 4",
            ),
            ("fixed of 0", vec![0x01, 87, 0, 1, F_FIXED], "layout field code 0x80"),
            ("undefined layout", vec![0x04], "layout 2 is not defined (0 defined so far)"),
            ("tid cut", vec![0x01, 87, 0, 0, 0x80], "tid at payload byte 4 runs past"),
            (
                "tid too wide",
                vec![0x01, 87, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0],
                "tid 4294967296 does not fit",
            ),
            (
                "ts too long",
                [&[0x01, 87, 0, 0, 1][..], &[0xff; 10]].concat(),
                "ts delta at payload byte 5 is larger than 64 bits",
            ),
            ("ret cut", def.to_vec(), "8-byte field at payload byte 8 runs past"),
            (
                "length past end",
                [&def[..], &[0, 50, b'a']].concat(),
                "field of 50 bytes at payload byte 10 runs past the end of the payload (1 bytes left)",
            ),
            (
                "length over u16",
                [&def[..], &[0, 0x80, 0x80, 0x04]].concat(),
                "field length 65536 is over 65535",
            ),
            (
                "i32 too wide",
                vec![0x01, 3, 0, 2, F_I64, F_I32, 1, 2, 0, 0x80, 0x80, 0x80, 0x80, 0x10],
                "4-byte field 4294967296 does not fit",
            ),
            (
                "fixed cut",
                vec![0x01, 0xe8, 0x03, 1, F_FIXED | 16, 1, 2, b'x'],
                "fixed field of 16 bytes at payload byte 7",
            ),
            (
                "rest over u16",
                vec![0x01, 0, 0x70, 1, F_REST, 1, 2, 0x80, 0x80, 0x04],
                "record rest length 65536 is over 65535",
            ),
            (
                "foreign not utf8",
                vec![0x01, 0, 0x70, 1, F_REST, 1, 2, 5, 1, 0, 0xff, 0, 0],
                "packed record 0 at payload byte 0: string at record byte 16 is not UTF-8",
            ),
        ];
        for (name, p, want) in cases {
            let e = unpack(&p).expect_err(name);
            assert!(e.contains(want), "{name}: {e}");
            assert!(e.starts_with("packed record 0 at payload byte 0: "), "{name}: {e}");
        }
        // The second record's errors name its own offset and number.
        let ok = [0x01u8, 3, 0, 2, F_I64, F_I32, 1, 2, 0, 6];
        let e = unpack(&[&ok[..], &[0x00, 2]].concat()).unwrap_err();
        assert_eq!(e, "packed record 1 at payload byte 10: 8-byte field at payload byte 12 runs past the end of the payload");
        let e =
            Unpacker::default().unpack(&[&ok[..], &[0, 2, 0, 6]].concat(), 1, &mut Vec::new()).unwrap_err();
        assert_eq!(e, "packed record 1 at payload byte 10: more records than the 1 the block header says");
    }

    #[test]
    fn unpacked_sizes_are_bounded_per_record_and_per_block() {
        // Three variable fields of 30000 bytes: the record would be 90030 bytes.
        let mut p = vec![0x01, 0, 0, 4, F_I64, F_VAR, F_VAR, F_VAR, 1, 2, 0];
        for _ in 0..3 {
            p.extend([0xb0, 0xea, 0x01]); // 30000
            p.extend([7u8; 30000]);
        }
        let e = unpack(&p).unwrap_err();
        assert!(e.contains("the record unpacks to 90030 bytes, more than 65535"), "{e}");
        // 255 8-byte fields of one byte each: 2056 bytes out of 258 in, until 64 MiB.
        let mut p = vec![0x01, 0, 0, 255];
        p.extend([F_I64; 255]);
        p.extend([1, 2]);
        p.extend([0u8; 255]);
        let one = [&[0x00u8, 2][..], &[0u8; 255]].concat();
        while p.len() < 9 << 20 {
            p.extend(&one);
        }
        let mut out = Vec::new();
        let e = Unpacker::default().unpack(&p, u32::MAX, &mut out).unwrap_err();
        assert!(e.contains(&format!("the block unpacks to more than {MAX_BLOCK_LEN} bytes")), "{e}");
        assert!(out.len() <= MAX_BLOCK_LEN as usize + 2056, "{}", out.len());
    }
}
