//! Building a syscall event's bytes in user space, exactly as the BPF handlers
//! emit them (see [`crate::wire`]): used by converters of other formats.
//!
//! The encoder writes into a caller-owned buffer, so encoding one event after
//! another reuses one allocation.

use crate::wire::{ARGS_AT_EXIT, HEADER_LEN, PARAMS_BASE};
use crate::{SyscallInfo, Wire, GENERIC_ARGS};

/// One parameter's value, in the order of the syscall's `ParamDesc`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodeError {
    /// More values than the syscall has parameters.
    TooManyArgs { syscall: &'static str, given: usize, max: usize },
    /// A byte string where the wire wants an integer, or the reverse.
    WrongKind { syscall: &'static str, param: &'static str },
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncodeError::TooManyArgs { syscall, given, max } => {
                write!(f, "{syscall}: {given} values for {max} parameters")
            }
            EncodeError::WrongKind { syscall, param } => {
                write!(f, "{syscall}: value of the wrong kind for parameter {param}")
            }
        }
    }
}

impl std::error::Error for EncodeError {}

/// Largest record: `len` is a u16.
pub const MAX_RECORD: usize = u16::MAX as usize;

/// What [`encode`] had to cut to keep the record within [`MAX_RECORD`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Encoded {
    /// Byte fields shortened (each by however much was needed).
    pub truncated_fields: u32,
}

/// Encodes one syscall event into `out` (cleared first).
///
/// `args` follow the syscall's parameter order (`ParamDesc`s; the 6 raw
/// arguments for a generic event). Fewer values than parameters leave the
/// rest out, which the decoder reads as `Value::Missing`: only trailing
/// parameters can be absent. Byte fields are cut so that the record fits in
/// [`MAX_RECORD`] bytes, as the kernel side cuts at its snaplen.
pub fn encode(
    out: &mut Vec<u8>,
    ts: u64,
    tid: u32,
    syscall: &'static SyscallInfo,
    args_at_exit: bool,
    ret: i64,
    args: &[Arg<'_>],
) -> Result<Encoded, EncodeError> {
    let wires = WireIter::new(syscall);
    if args.len() > wires.len() {
        return Err(EncodeError::TooManyArgs { syscall: syscall.name, given: args.len(), max: wires.len() });
    }
    out.clear();
    out.extend_from_slice(&ts.to_le_bytes());
    out.extend_from_slice(&tid.to_le_bytes());
    let kind = syscall.nr as u16 | if args_at_exit { ARGS_AT_EXIT } else { 0 };
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // len, patched below
    out.extend_from_slice(&ret.to_le_bytes());
    debug_assert_eq!(out.len(), PARAMS_BASE);
    let mut done = Encoded::default();
    for (i, (arg, (name, wire))) in args.iter().zip(wires).enumerate() {
        match (wire, *arg) {
            (Wire::I32 | Wire::U32, Arg::Int(v)) => out.extend_from_slice(&(v as u32).to_le_bytes()),
            (Wire::I64 | Wire::U64, Arg::Int(v)) => out.extend_from_slice(&(v as u64).to_le_bytes()),
            (Wire::Bytes, Arg::Bytes(b)) => {
                // Leave room for the length words of the byte fields still to come.
                let later = args.len() - i - 1;
                let room = MAX_RECORD.saturating_sub(out.len() + 2 + 2 * later);
                let n = b.len().min(room);
                if n < b.len() {
                    done.truncated_fields += 1;
                }
                out.extend_from_slice(&(n as u16).to_le_bytes());
                out.extend_from_slice(&b[..n]);
            }
            _ => return Err(EncodeError::WrongKind { syscall: syscall.name, param: name }),
        }
    }
    // Fixed fields come first and are few, so only byte fields can reach the
    // limit, and those were cut above.
    let len = out.len().min(MAX_RECORD) as u16;
    out[HEADER_LEN - 2..HEADER_LEN].copy_from_slice(&len.to_le_bytes());
    Ok(done)
}

/// (name, wire) of each parameter in wire order: the table's, or the 6 raw
/// u64 arguments of a generic event.
struct WireIter {
    syscall: &'static SyscallInfo,
    i: usize,
}

impl WireIter {
    fn new(syscall: &'static SyscallInfo) -> WireIter {
        WireIter { syscall, i: 0 }
    }
}

impl Iterator for WireIter {
    type Item = (&'static str, Wire);
    fn next(&mut self) -> Option<Self::Item> {
        let item = match self.syscall.params {
            Some(p) => p.get(self.i).map(|d| (d.name, d.wire)),
            None => GENERIC_ARGS.get(self.i).map(|&n| (n, Wire::U64)),
        };
        self.i += 1;
        item
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.syscall.params.map_or(GENERIC_ARGS.len(), |p| p.len()).saturating_sub(self.i);
        (n, Some(n))
    }
}

impl ExactSizeIterator for WireIter {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{decode, Event, Value};
    use crate::{syscall_by_name, SYSCALLS};

    #[test]
    fn openat_round_trips() {
        let sc = syscall_by_name("openat").unwrap();
        let mut out = Vec::new();
        let args = [
            Arg::Int(-100),
            Arg::Int(0o1101),
            Arg::Int(0o644),
            Arg::Bytes(b"/etc/passwd"),
            Arg::Bytes(b"/etc/passwd"),
        ];
        encode(&mut out, 77, 4242, sc, false, 3, &args).unwrap();
        let Event::Syscall(e) = decode(&out).unwrap() else { panic!() };
        assert_eq!((e.header.ts, e.header.tid, e.ret, e.syscall.name), (77, 4242, 3, "openat"));
        assert_eq!(e.param("dirfd"), Some(&Value::Int(-100)));
        assert_eq!(e.param("flags"), Some(&Value::UInt(0o1101)));
        assert_eq!(e.param("path").unwrap().as_bytes(), Some(&b"/etc/passwd"[..]));
        assert_eq!(e.param("fullpath").unwrap().as_bytes(), Some(&b"/etc/passwd"[..]));
    }

    #[test]
    fn every_typed_syscall_round_trips_with_all_and_with_no_params() {
        let mut out = Vec::new();
        for sc in SYSCALLS {
            let descs = sc.params.unwrap_or_default();
            let args: Vec<Arg> = if sc.params.is_none() {
                (0..6).map(|i| Arg::Int(i * 1000 - 1)).collect()
            } else {
                descs
                    .iter()
                    .enumerate()
                    .map(|(i, d)| match d.wire {
                        Wire::Bytes => Arg::Bytes(d.name.as_bytes()),
                        _ => Arg::Int(i as i64 - 3),
                    })
                    .collect()
            };
            encode(&mut out, 1, 2, sc, true, -13, &args).unwrap();
            let Event::Syscall(e) = decode(&out).unwrap() else { panic!("{}", sc.name) };
            assert_eq!((e.syscall.nr, e.ret, e.header.args_at_exit), (sc.nr, -13, true), "{}", sc.name);
            for (i, ((name, v), a)) in e.params.iter().zip(&args).enumerate() {
                match (v, a) {
                    (Value::Bytes(b), Arg::Bytes(x)) => assert_eq!(b, x, "{}.{name}", sc.name),
                    (Value::Int(v), Arg::Int(x)) => assert_eq!(v, x, "{}.{name}", sc.name),
                    // Unsigned wire fields decode as the unsigned value of the same bits.
                    (Value::UInt(v), Arg::Int(x)) => {
                        let w = if sc.params.is_some() { descs[i].wire } else { Wire::U64 };
                        let want = if w == Wire::U32 { *x as u32 as u64 } else { *x as u64 };
                        assert_eq!(*v, want, "{}.{name}", sc.name)
                    }
                    // The value that stands for "unknown" reads as absent.
                    (Value::Missing, Arg::Int(x))
                        if descs.get(i).and_then(|d| d.unknown) == Some(*x as u32 as u64) => {}
                    other => panic!("{}.{name}: {other:?}", sc.name),
                }
            }
            encode(&mut out, 1, 2, sc, false, 0, &[]).unwrap();
            let Event::Syscall(e) = decode(&out).unwrap() else { panic!() };
            assert!(e.params.iter().all(|(_, v)| *v == Value::Missing), "{}", sc.name);
        }
    }

    #[test]
    fn big_byte_fields_are_cut_to_fit_and_counted() {
        let sc = syscall_by_name("write").unwrap();
        let big = vec![b'x'; 100_000];
        let mut out = Vec::new();
        let r =
            encode(&mut out, 1, 2, sc, false, 100_000, &[Arg::Int(1), Arg::Int(100_000), Arg::Bytes(&big)])
                .unwrap();
        assert_eq!(r.truncated_fields, 1);
        assert_eq!(out.len(), MAX_RECORD);
        let Event::Syscall(e) = decode(&out).unwrap() else { panic!() };
        assert_eq!(e.param("data").unwrap().as_bytes().unwrap().len(), MAX_RECORD - 24 - 4 - 8 - 2);
    }

    #[test]
    fn wrong_values_are_errors() {
        let sc = syscall_by_name("close").unwrap();
        let mut out = Vec::new();
        assert!(matches!(
            encode(&mut out, 0, 0, sc, false, 0, &[Arg::Bytes(b"x")]),
            Err(EncodeError::WrongKind { param: "fd", .. })
        ));
        assert!(matches!(
            encode(&mut out, 0, 0, sc, false, 0, &[Arg::Int(1), Arg::Int(2)]),
            Err(EncodeError::TooManyArgs { .. })
        ));
    }
}
