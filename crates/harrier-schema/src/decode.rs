//! Decoding one event's bytes, driven by the generated parameter tables.

use crate::wire::{Header, META_COMM, META_EXEC, META_EXIT, META_FORK, PARAMS_BASE};
use crate::{render, sockaddr, syscall_by_nr, ParamDesc, SyscallInfo, TextKind, Wire, GENERIC_ARGS};
use serde_json::{json, Map, Value as Json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Int(i64),
    UInt(u64),
    Bytes(&'a [u8]),
    /// A variable field the kernel had no room for (see the `truncated` counter).
    Missing,
}

impl Value<'_> {
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(v) => Some(v),
            Value::UInt(v) => Some(v as i64),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// Paths and other text, lossily as UTF-8.
    pub fn as_str(&self) -> Option<String> {
        self.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

/// A process life-cycle event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Meta {
    /// `child_vpid` is the child's pid in its own namespace and `flags` holds
    /// [`crate::wire::FORK_SHARES_FILES`]; both 0 in schema versions before 3.
    Fork {
        child_tid: u32,
        child_pid: u32,
        comm: String,
        child_vpid: u32,
        flags: u32,
    },
    /// `cgroup` is the task's cgroup path after the exec ("/docker/<id>"; "/"
    /// for a root cgroup; empty in schema versions before 3).
    Exec {
        old_tid: u32,
        comm: String,
        cgroup: String,
    },
    Exit {
        pid: u32,
    },
    Comm {
        comm: String,
    },
}

#[derive(Debug)]
pub struct SyscallEvent<'a> {
    pub header: Header,
    pub syscall: &'static SyscallInfo,
    pub ret: i64,
    pub params: Vec<(&'static str, Value<'a>)>,
}

impl<'a> SyscallEvent<'a> {
    pub fn param(&self, name: &str) -> Option<&Value<'a>> {
        self.params.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

#[derive(Debug)]
pub enum Event<'a> {
    Syscall(SyscallEvent<'a>),
    Meta(Header, Meta),
}

#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    Short,
    BadLength(u16),
    UnknownType(u16),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Short => write!(f, "event shorter than its header"),
            DecodeError::BadLength(l) => write!(f, "event length {l} does not match its bytes"),
            DecodeError::UnknownType(t) => write!(f, "unknown event type {t}"),
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|s| u32::from_le_bytes(s.try_into().unwrap()))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|s| u64::from_le_bytes(s.try_into().unwrap()))
    }
    fn comm(&mut self) -> String {
        let s = self.take(16).unwrap_or_default();
        let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        String::from_utf8_lossy(&s[..end]).into_owned()
    }
    fn value(&mut self, wire: Wire) -> Value<'a> {
        let v = match wire {
            Wire::I32 => self.u32().map(|v| Value::Int(v as i32 as i64)),
            Wire::U32 => self.u32().map(|v| Value::UInt(v as u64)),
            Wire::I64 => self.u64().map(|v| Value::Int(v as i64)),
            Wire::U64 => self.u64().map(Value::UInt),
            Wire::Bytes => match self.take(2).map(|l| u16::from_le_bytes(l.try_into().unwrap())) {
                Some(crate::wire::VAR_ABSENT) => None,
                l => l.and_then(|n| self.take(n as usize)).map(Value::Bytes),
            },
        };
        v.unwrap_or(Value::Missing)
    }
}

/// The kernel sends a cgroup path as NUL-terminated components, deepest
/// first (one walk up the tree); this puts them root first.
fn cgroup_path(components: &[u8]) -> String {
    let mut path = String::with_capacity(components.len() + 1);
    for c in components.split(|&b| b == 0).filter(|c| !c.is_empty()).rev() {
        path.push('/');
        path.push_str(&String::from_utf8_lossy(c));
    }
    if path.is_empty() {
        path.push('/');
    }
    path
}

/// Decodes one event as it came out of a ring (or a capture file).
pub fn decode(b: &[u8]) -> Result<Event<'_>, DecodeError> {
    let header = Header::parse(b).ok_or(DecodeError::Short)?;
    if header.len as usize != b.len() {
        return Err(DecodeError::BadLength(header.len));
    }
    let mut r = Reader { b, at: PARAMS_BASE };
    if header.is_meta() {
        let meta = match header.kind {
            META_FORK => Meta::Fork {
                child_tid: r.u32().ok_or(DecodeError::Short)?,
                child_pid: r.u32().ok_or(DecodeError::Short)?,
                comm: r.comm(),
                child_vpid: r.u32().unwrap_or(0),
                flags: r.u32().unwrap_or(0),
            },
            META_EXEC => Meta::Exec {
                old_tid: r.u32().ok_or(DecodeError::Short)?,
                comm: r.comm(),
                cgroup: match r.value(Wire::Bytes) {
                    Value::Bytes(b) => cgroup_path(b),
                    _ => String::new(),
                },
            },
            META_EXIT => Meta::Exit { pid: r.u32().ok_or(DecodeError::Short)? },
            META_COMM => Meta::Comm { comm: r.comm() },
            t => return Err(DecodeError::UnknownType(t)),
        };
        return Ok(Event::Meta(header, meta));
    }
    let syscall = syscall_by_nr(header.kind as u32).ok_or(DecodeError::UnknownType(header.kind))?;
    let ret = i64::from_le_bytes(b.get(16..24).ok_or(DecodeError::Short)?.try_into().unwrap());
    let params = match syscall.params {
        Some(descs) => descs
            .iter()
            .map(|d| match r.value(d.wire) {
                Value::UInt(u) if d.unknown == Some(u) => (d.name, Value::Missing),
                v => (d.name, v),
            })
            .collect(),
        None => GENERIC_ARGS.iter().map(|&n| (n, r.value(Wire::U64))).collect(),
    };
    Ok(Event::Syscall(SyscallEvent { header, syscall, ret, params }))
}

/// Data buffers the way Falco prints them: printable ASCII kept, the rest as '.'.
pub fn printable(b: &[u8]) -> String {
    b.iter().map(|&c| if (0x20..0x7f).contains(&c) { c as char } else { '.' }).collect()
}

fn param_json(out: &mut Map<String, Json>, d: Option<&ParamDesc>, name: &str, v: &Value) {
    let text = d.map_or(TextKind::Int, |d| d.text);
    let j = match (v, text) {
        (Value::Missing, _) => Json::Null,
        (Value::Bytes(b), TextKind::Path) => json!(String::from_utf8_lossy(b)),
        (Value::Bytes(b), TextKind::Sockaddr) => json!(sockaddr::format(b)),
        (Value::Bytes(b), TextKind::Argv) => json!(b
            .split(|&c| c == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s))
            .collect::<Vec<_>>()),
        (Value::Bytes(b), _) => json!(printable(b)),
        (Value::Int(i), _) => json!(i),
        (Value::UInt(u), _) => json!(u),
    };
    out.insert(name.to_string(), j);
    if let (Some(r), Some(n)) = (d.and_then(|d| d.renderer), v.as_i64()) {
        if let Some(s) = render::render(r, n as u64) {
            out.insert(format!("{name}_names"), json!(s));
        }
    }
}

impl SyscallEvent<'_> {
    /// The JSON object `harrier capture --json` prints; `pid`/`comm` come from
    /// the process table, `epoch_offset` turns the monotonic clock into wall-clock time.
    pub fn to_json(&self, pid: u32, comm: &str, epoch_offset: u64) -> Json {
        let mut m = Map::new();
        m.insert("ts".into(), json!(self.header.ts + epoch_offset));
        m.insert("tid".into(), json!(self.header.tid));
        m.insert("pid".into(), json!(pid));
        m.insert("comm".into(), json!(comm));
        m.insert("syscall".into(), json!(self.syscall.name));
        // A legacy exit without a return value has none (null), as sysdig's <NA>.
        m.insert("ret".into(), if self.header.no_ret { json!(null) } else { json!(self.ret) });
        if self.header.args_at_exit {
            m.insert("args_at_exit".into(), json!(true));
        }
        let descs = self.syscall.params.unwrap_or_default();
        for (i, (name, v)) in self.params.iter().enumerate() {
            param_json(&mut m, descs.get(i), name, v);
        }
        Json::Object(m)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An event's bytes: header (ts 7, tid 42), ret, body.
    pub(crate) fn event(kind: u16, ret: i64, body: &[u8]) -> Vec<u8> {
        let len = (24 + body.len()) as u16;
        let mut b = Vec::new();
        b.extend(7u64.to_le_bytes());
        b.extend(42u32.to_le_bytes());
        b.extend(kind.to_le_bytes());
        b.extend(len.to_le_bytes());
        b.extend(ret.to_le_bytes());
        b.extend(body);
        b
    }

    #[test]
    fn life_cycle_events_of_schema_v2_and_v3() {
        let mut fork = Vec::new();
        fork.extend(9u32.to_le_bytes());
        fork.extend(8u32.to_le_bytes());
        fork.extend(*b"sh\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
        let bytes = event(META_FORK, 0, &fork);
        let old = decode(&bytes).unwrap();
        let Event::Meta(_, Meta::Fork { child_vpid: 0, flags: 0, .. }) = old else { panic!("{old:?}") };
        fork.extend(1u32.to_le_bytes());
        fork.extend(crate::wire::FORK_SHARES_FILES.to_le_bytes());
        let bytes = event(META_FORK, 0, &fork);
        let new = decode(&bytes).unwrap();
        let Event::Meta(_, Meta::Fork { child_vpid: 1, flags: 1, .. }) = new else { panic!("{new:?}") };
        let mut exec = Vec::new();
        exec.extend(42u32.to_le_bytes());
        exec.extend(*b"ls\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
        let bytes = event(META_EXEC, 0, &exec);
        let old = decode(&bytes).unwrap();
        let Event::Meta(_, Meta::Exec { cgroup, .. }) = old else { panic!() };
        assert_eq!(cgroup, "", "v2: no cgroup");
        let cg = b"abc.scope\0system.slice\0";
        exec.extend((cg.len() as u16).to_le_bytes());
        exec.extend(cg);
        let bytes = event(META_EXEC, 0, &exec);
        let new = decode(&bytes).unwrap();
        let Event::Meta(_, Meta::Exec { cgroup, .. }) = new else { panic!() };
        assert_eq!(cgroup, "/system.slice/abc.scope", "deepest first on the wire, root first decoded");
        assert_eq!(cgroup_path(b""), "/");
    }

    #[test]
    fn openat_decodes_by_the_table() {
        let mut body = Vec::new();
        body.extend((-100i32).to_le_bytes()); // dirfd
        body.extend(0o1101u32.to_le_bytes()); // flags
        body.extend(0o644u32.to_le_bytes()); // mode
        body.extend(4u16.to_le_bytes());
        body.extend(b"/etc");
        let b = event(257, 3, &body);
        let Event::Syscall(e) = decode(&b).unwrap() else { panic!() };
        assert_eq!(e.syscall.name, "openat");
        assert_eq!(e.ret, 3);
        assert_eq!(e.param("dirfd"), Some(&Value::Int(-100)));
        assert_eq!(e.param("path").unwrap().as_str().unwrap(), "/etc");
        let j = e.to_json(1, "cat", 0);
        assert_eq!(j["path"], "/etc");
        assert_eq!(j["flags"], 0o1101);
        assert_eq!(j["flags_names"], "O_WRONLY|O_CREAT|O_TRUNC");
    }

    #[test]
    fn getpid_is_24_bytes_and_truncated_fields_are_missing() {
        let b = event(39, 1234, &[]);
        assert_eq!(b.len(), 24);
        let Event::Syscall(e) = decode(&b).unwrap() else { panic!() };
        assert_eq!(e.ret, 1234);
        let b = event(87, 0, &[]); // unlink with its path left out
        let Event::Syscall(e) = decode(&b).unwrap() else { panic!() };
        assert_eq!(e.param("path"), Some(&Value::Missing));
    }

    #[test]
    fn a_field_the_kernel_did_not_collect_is_absent_and_the_next_one_read() {
        let mut body = vec![0u8; 12];
        body.extend(crate::wire::VAR_ABSENT.to_le_bytes()); // path: not collected
        body.extend(4u16.to_le_bytes());
        body.extend(b"/etc"); // fullpath
        let b = event(257, 3, &body);
        let Event::Syscall(e) = decode(&b).unwrap() else { panic!() };
        assert_eq!(e.param("path"), Some(&Value::Missing));
        assert_eq!(e.param("fullpath").unwrap().as_str().unwrap(), "/etc");
        let v = crate::view::SyscallView::new(&b).unwrap().unwrap();
        assert_eq!(v.named("path"), Some(Value::Missing));
        assert_eq!(v.named("fullpath").unwrap().as_str().unwrap(), "/etc");
        assert_eq!(e.to_json(1, "cat", 0)["path"], Json::Null);
    }

    #[test]
    fn args_read_at_exit_are_flagged_not_a_new_type() {
        let mut body = vec![0u8; 12];
        body.extend(0u16.to_le_bytes());
        let b = event(257 | crate::wire::ARGS_AT_EXIT, -2, &body);
        let Event::Syscall(e) = decode(&b).unwrap() else { panic!() };
        assert_eq!((e.syscall.name, e.header.kind, e.header.args_at_exit), ("openat", 257, true));
        assert_eq!(e.to_json(1, "cat", 0)["args_at_exit"], true);
        let b = event(257, -2, &body);
        let Event::Syscall(e) = decode(&b).unwrap() else { panic!() };
        assert!(!e.header.args_at_exit && e.to_json(1, "cat", 0).get("args_at_exit").is_none());
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        assert_eq!(decode(&[1, 2, 3]).unwrap_err(), DecodeError::Short);
        let mut b = event(39, 0, &[]);
        b[14] = 99;
        assert_eq!(decode(&b).unwrap_err(), DecodeError::BadLength(99));
        assert_eq!(decode(&event(999, 0, &[])).unwrap_err(), DecodeError::UnknownType(999));
    }
}
