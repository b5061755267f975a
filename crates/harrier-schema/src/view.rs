//! Allocation-free access to one syscall event's parameters, for per-event
//! consumers (the rules engine): offsets are found once, values on demand.
//! `decode::decode` builds owned lists instead and suits printing.

use crate::decode::{DecodeError, SyscallEvent, Value};
use crate::wire::{Header, PARAMS_BASE};
use crate::{syscall_by_nr, ParamDesc, SyscallInfo, Wire, GENERIC_ARGS};

/// Parameters an event may have (execveat has the most: 25; a test keeps this true).
pub const MAX_PARAMS: usize = 28;

/// Parameters the per-event consumers read on most events. Their indexes are
/// resolved once per syscall, so reading one costs two loads, not a search by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    Fd,
    Flags,
    Mode,
    Path,
    Fullpath,
    Data,
}

const KNOWN_NAMES: [(Known, &str); 6] = [
    (Known::Fd, "fd"),
    (Known::Flags, "flags"),
    (Known::Mode, "mode"),
    (Known::Path, "path"),
    (Known::Fullpath, "fullpath"),
    (Known::Data, "data"),
];

/// By syscall number, the index of each [`Known`] parameter (u8::MAX: none).
fn known_slots() -> &'static [[u8; KNOWN_NAMES.len()]] {
    static SLOTS: std::sync::OnceLock<Vec<[u8; KNOWN_NAMES.len()]>> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        let mut t = vec![[u8::MAX; KNOWN_NAMES.len()]; crate::MAX_SYSCALL_NR as usize + 1];
        for s in crate::SYSCALLS {
            for (k, name) in KNOWN_NAMES {
                if let Some(i) = s.params.and_then(|p| p.iter().position(|d| d.name == name)) {
                    t[s.nr as usize][k as usize] = i as u8;
                }
            }
        }
        t
    })
}

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

/// Per syscall number: how many parameters, and each one's wire size (0: length-prefixed).
/// Read on every event, so the walk over the parameters is a loop over bytes.
type ParamSizes = (u8, [u8; MAX_PARAMS]);

fn param_sizes() -> &'static [ParamSizes] {
    static SIZES: std::sync::OnceLock<Vec<ParamSizes>> = std::sync::OnceLock::new();
    SIZES.get_or_init(|| {
        let mut t = vec![(0u8, [0u8; MAX_PARAMS]); crate::MAX_SYSCALL_NR as usize + 1];
        for s in crate::SYSCALLS {
            let e = &mut t[s.nr as usize];
            for (i, w) in wires(s).enumerate().take(MAX_PARAMS) {
                e.0 = i as u8 + 1;
                e.1[i] = w.fixed_size().unwrap_or(0) as u8;
            }
        }
        t
    })
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
        let (n, sizes) = param_sizes().get(syscall.nr as usize).copied().unwrap_or_default();
        for (i, &fixed) in sizes[..n as usize].iter().enumerate() {
            count = i + 1;
            let size = match fixed {
                1.. => fixed as usize,
                0 => match b.get(at..at + 2) {
                    Some(l) => 2 + crate::wire::var_bytes(u16::from_le_bytes(l.try_into().unwrap())),
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
        let desc = self.syscall.params.and_then(|p| p.get(i));
        let wire = desc.map_or(Wire::U64, |d| d.wire);
        let u32_at = |a: usize| u32::from_le_bytes(b[a..a + 4].try_into().unwrap());
        let u64_at = |a: usize| u64::from_le_bytes(b[a..a + 8].try_into().unwrap());
        match wire {
            Wire::I32 => Value::Int(u32_at(at) as i32 as i64),
            Wire::U32 if desc.and_then(|d| d.unknown) == Some(u32_at(at) as u64) => Value::Missing,
            Wire::U32 => Value::UInt(u32_at(at) as u64),
            Wire::I64 => Value::Int(u64_at(at) as i64),
            Wire::U64 => Value::UInt(u64_at(at)),
            Wire::Bytes => match u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) {
                crate::wire::VAR_ABSENT => Value::Missing,
                n => Value::Bytes(&b[at + 2..at + 2 + n as usize]),
            },
        }
    }

    /// The parameter called `name`.
    pub fn named(&self, name: &str) -> Option<Value<'a>> {
        self.index_of(name).map(|i| self.param(i))
    }

    /// A [`Known`] parameter: what `named` gives, without the search.
    pub fn known(&self, k: Known) -> Option<Value<'a>> {
        let i = known_slots().get(self.syscall.nr as usize)?[k as usize];
        (i != u8::MAX).then(|| self.param(i as usize))
    }
}

/// A syscall event as a state table reads it: decoded into a list
/// ([`SyscallEvent`], from files and tests) or viewed in place (live, no allocation).
pub trait SyscallParams<'a> {
    fn syscall(&self) -> &'static SyscallInfo;
    fn tid(&self) -> u32;
    fn ret(&self) -> i64;
    fn value(&self, name: &str) -> Option<Value<'a>>;

    /// A [`Known`] parameter (a view reads it without a search).
    fn known(&self, k: Known) -> Option<Value<'a>> {
        self.value(KNOWN_NAMES[k as usize].1)
    }

    fn int(&self, name: &str) -> Option<i64> {
        self.value(name).and_then(|v| v.as_i64())
    }

    fn bytes(&self, name: &str) -> Option<&'a [u8]> {
        match self.value(name)? {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

impl<'a> SyscallParams<'a> for SyscallView<'a> {
    fn syscall(&self) -> &'static SyscallInfo {
        self.syscall
    }
    fn tid(&self) -> u32 {
        self.header.tid
    }
    fn ret(&self) -> i64 {
        self.ret
    }
    fn value(&self, name: &str) -> Option<Value<'a>> {
        self.named(name)
    }
    fn known(&self, k: Known) -> Option<Value<'a>> {
        SyscallView::known(self, k)
    }
}

impl<'a> SyscallParams<'a> for SyscallEvent<'a> {
    fn syscall(&self) -> &'static SyscallInfo {
        self.syscall
    }
    fn tid(&self) -> u32 {
        self.header.tid
    }
    fn ret(&self) -> i64 {
        self.ret
    }
    fn value(&self, name: &str) -> Option<Value<'a>> {
        self.param(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::tests::event;
    use crate::decode::{decode, Event};

    #[test]
    fn every_typed_event_fits_a_view() {
        for s in crate::SYSCALLS {
            let n = s.params.map_or(GENERIC_ARGS.len(), |p| p.len());
            assert!(n <= MAX_PARAMS, "{} has {n} parameters; MAX_PARAMS is {MAX_PARAMS}", s.name);
        }
    }

    #[test]
    fn the_size_table_follows_each_syscalls_wires() {
        for s in crate::SYSCALLS {
            let (n, sizes) = param_sizes()[s.nr as usize];
            let wires: Vec<Wire> = wires(s).collect();
            assert_eq!(n as usize, wires.len(), "{}: parameter count", s.name);
            for (i, w) in wires.iter().enumerate() {
                assert_eq!(sizes[i] as usize, w.fixed_size().unwrap_or(0), "{}: parameter {i}", s.name);
            }
        }
    }

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
        for (i, (k, name)) in KNOWN_NAMES.into_iter().enumerate() {
            assert_eq!(k as usize, i, "KNOWN_NAMES is in Known's order");
            assert_eq!(v.known(k), v.named(name), "{name}");
            assert_eq!(SyscallParams::known(&e, k), v.named(name), "{name}");
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
