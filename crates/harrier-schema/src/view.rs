//! Allocation-free access to one syscall event's parameters, for per-event
//! consumers (the rules engine): offsets are found once, values on demand.
//! `decode::decode` builds owned lists instead and suits printing.

use crate::decode::{DecodeError, Value};
use crate::wire::{Header, PARAMS_BASE};
use crate::{syscall_by_nr, ParamDesc, SyscallInfo, Wire, GENERIC_ARGS};

/// Parameters an event may have (typed events have at most a dozen).
pub const MAX_PARAMS: usize = 16;

/// A syscall event, borrowed from its bytes.
#[derive(Debug, Clone, Copy)]
pub struct SyscallView<'a> {
    pub header: Header,
    pub syscall: &'static SyscallInfo,
    pub ret: i64,
    bytes: &'a [u8],
    /// Where parameter i starts (u16::MAX: not in the event: left out by the kernel).
    offs: [u16; MAX_PARAMS],
    count: u8,
}

fn wires(s: &SyscallInfo) -> impl Iterator<Item = Wire> {
    let typed = s.params.map(|p| p.iter().map(|d| d.wire));
    let generic = s.params.is_none().then(|| GENERIC_ARGS.iter().map(|_| Wire::U64));
    typed.into_iter().flatten().chain(generic.into_iter().flatten())
}

impl<'a> SyscallView<'a> {
    /// A view of a syscall event (None for life-cycle events).
    pub fn new(b: &'a [u8]) -> Result<Option<SyscallView<'a>>, DecodeError> {
        let header = Header::parse(b).ok_or(DecodeError::Short)?;
        if header.len as usize != b.len() {
            return Err(DecodeError::BadLength(header.len));
        }
        if header.is_meta() {
            return Ok(None);
        }
        let syscall = syscall_by_nr(header.kind as u32).ok_or(DecodeError::UnknownType(header.kind))?;
        let ret = i64::from_le_bytes(b.get(16..24).ok_or(DecodeError::Short)?.try_into().unwrap());
        let mut offs = [u16::MAX; MAX_PARAMS];
        let mut at = PARAMS_BASE;
        let mut count = 0;
        for (i, w) in wires(syscall).enumerate().take(MAX_PARAMS) {
            count = i + 1;
            let size = match w.fixed_size() {
                Some(n) => n,
                None => match b.get(at..at + 2) {
                    Some(l) => 2 + u16::from_le_bytes(l.try_into().unwrap()) as usize,
                    None => break,
                },
            };
            if at + size > b.len() {
                break;
            }
            offs[i] = at as u16;
            at += size;
        }
        Ok(Some(SyscallView { header, syscall, ret, bytes: b, offs, count: count as u8 }))
    }

    /// The parameter's description (None for generic events).
    pub fn desc(&self, i: usize) -> Option<&'static ParamDesc> {
        self.syscall.params.and_then(|p| p.get(i))
    }

    /// Index of the parameter called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        match self.syscall.params {
            Some(p) => p.iter().position(|d| d.name == name),
            None => GENERIC_ARGS.iter().position(|n| *n == name),
        }
    }

    pub fn name_of(&self, i: usize) -> Option<&'static str> {
        match self.syscall.params {
            Some(p) => p.get(i).map(|d| d.name),
            None => GENERIC_ARGS.get(i).copied(),
        }
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Parameter i's value; `Missing` when the kernel left it out.
    pub fn param(&self, i: usize) -> Value<'a> {
        let Some(&off) = self.offs.get(i).filter(|&&o| o != u16::MAX) else { return Value::Missing };
        let at = off as usize;
        let b = self.bytes;
        let wire = wires(self.syscall).nth(i).unwrap_or(Wire::U64);
        let u32_at = |a: usize| u32::from_le_bytes(b[a..a + 4].try_into().unwrap());
        let u64_at = |a: usize| u64::from_le_bytes(b[a..a + 8].try_into().unwrap());
        match wire {
            Wire::I32 => Value::Int(u32_at(at) as i32 as i64),
            Wire::U32 => Value::UInt(u32_at(at) as u64),
            Wire::I64 => Value::Int(u64_at(at) as i64),
            Wire::U64 => Value::UInt(u64_at(at)),
            Wire::Bytes => {
                let n = u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) as usize;
                Value::Bytes(&b[at + 2..at + 2 + n])
            }
        }
    }

    /// The parameter called `name`.
    pub fn named(&self, name: &str) -> Option<Value<'a>> {
        self.index_of(name).map(|i| self.param(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::tests::event;
    use crate::decode::{decode, Event};

    #[test]
    fn a_view_reads_what_decode_reads() {
        let mut body = Vec::new();
        body.extend((-100i32).to_le_bytes());
        body.extend(0o1101u32.to_le_bytes());
        body.extend(0o644u32.to_le_bytes());
        body.extend(4u16.to_le_bytes());
        body.extend(b"/etc");
        body.extend(9u16.to_le_bytes());
        body.extend(b"/etc/real");
        let b = event(257, 3, &body);
        let v = SyscallView::new(&b).unwrap().unwrap();
        let Event::Syscall(e) = decode(&b).unwrap() else { panic!() };
        for (i, (name, value)) in e.params.iter().enumerate() {
            assert_eq!(v.param(i), *value, "{name}");
            assert_eq!(v.named(name).as_ref(), Some(value));
        }
        assert_eq!(v.ret, 3);
        // Left out by the kernel (no room): Missing, as decode says.
        let b = event(257, 3, &body[..12]);
        let v = SyscallView::new(&b).unwrap().unwrap();
        assert_eq!(v.named("path"), Some(Value::Missing));
        assert_eq!(v.named("flags"), Some(Value::UInt(0o1101)));
        assert!(SyscallView::new(&b[..10]).is_err());
    }
}
