//! Parsing of `schema/syscalls_x86_64.tbl` and `schema/events.tbl`.

use std::fmt;

/// One x86_64 system call.
#[derive(Debug, Clone)]
pub struct Syscall {
    pub nr: u32,
    pub name: String,
    /// Name of its `syscalls:sys_exit_*` tracepoint (differs for a few, e.g. fstat → newfstat).
    pub tracepoint: String,
}

/// Where a variable-length buffer's length comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Len {
    /// Syscall argument number n.
    Arg(u8),
    /// The return value, when positive.
    Ret,
    /// The whole of what the pointer describes (iovec / msghdr totals).
    All,
    /// An `int` behind the user pointer in argument n (accept, recvfrom).
    UserPtr(u8),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Fd(u8),
    S32(u8),
    U32(u8),
    U64(u8),
    S64(u8),
    /// u32 at user address arg + offset.
    U32User(u8, u16),
    /// u64 at user address arg + offset.
    U64User(u8, u16),
    Tgid,
    Path(u8),
    Buf(u8, Len),
    Iov(u8, u8, Len),
    Sockaddr(u8, Len),
    /// msg_name of a user_msghdr; `true`: filled by the kernel (empty on failure).
    MsgAddr(u8, bool),
    MsgData(u8, Len),
    Argv(u8),
    /// Absolute path of the file behind the returned fd, resolved in the kernel.
    FdPathRet,
    /// Peer address of the socket behind fd arg i, read from the kernel's socket.
    SockPeer(u8),
    /// Peer (`false`) or local (`true`) address of the socket behind fd arg i,
    /// or behind the returned fd when the index is `None`, whenever the call succeeded.
    SockAddrOf(Option<u8>, bool),
    /// What the socket behind fd arg i is, from the kernel (its layout:
    /// schema/events.tbl), so user space can describe one it never saw made.
    SockType(u8),
    /// A field of the calling task's kernel state, read at exit (see [`TASK_FIELDS`]).
    Task(&'static str),
    Exe,
    Cwd,
    Args,
    /// The new image's environment block (NUL-separated VAR=value), at most 4 KiB.
    Env,
}

/// How a parameter travels on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    I32,
    U32,
    I64,
    U64,
    /// u16 length, then that many bytes.
    Bytes,
}

impl Wire {
    pub fn fixed_size(self) -> Option<usize> {
        match self {
            Wire::I32 | Wire::U32 => Some(4),
            Wire::I64 | Wire::U64 => Some(8),
            Wire::Bytes => None,
        }
    }
}

/// `task(name)` fields and their wire types: what a new process has that the
/// syscall's arguments do not carry, read from the task in BPF at the event.
pub const TASK_FIELDS: &[(&str, Wire)] = &[
    ("uid", Wire::U32),
    ("gid", Wire::U32),
    ("euid", Wire::U32),
    ("egid", Wire::U32),
    ("loginuid", Wire::U32),
    ("tty", Wire::U32),
    ("sid", Wire::U32),
    ("vpid", Wire::U32),
    ("vpgid", Wire::U32),
    ("cap_effective", Wire::U64),
    ("exe_ctime", Wire::U64),
    ("exe_mtime", Wire::U64),
    ("exe_flags", Wire::U32),
    ("env_size", Wire::U32),
    ("cap_permitted", Wire::U64),
    ("cap_inheritable", Wire::U64),
];

impl Kind {
    pub fn wire(&self) -> Wire {
        match self {
            Kind::Task(f) => TASK_FIELDS.iter().find(|(n, _)| n == f).map_or(Wire::U32, |(_, w)| *w),
            Kind::Fd(_) | Kind::S32(_) => Wire::I32,
            Kind::U32(_) | Kind::U32User(..) | Kind::Tgid => Wire::U32,
            Kind::S64(_) => Wire::I64,
            Kind::U64(_) | Kind::U64User(..) => Wire::U64,
            _ => Wire::Bytes,
        }
    }

    /// The value that means "not known" for this field: ids and sizes that a
    /// record of an older schema (or a converted legacy capture) did not
    /// carry are written as u32::MAX, which no real uid, gid, pid, session,
    /// tty or environment size takes. Decoders read it as absent.
    pub fn unknown_value(&self) -> Option<u64> {
        match self {
            Kind::Task("uid" | "gid" | "euid" | "egid" | "sid" | "vpid" | "vpgid" | "tty" | "env_size") => {
                Some(u32::MAX as u64)
            }
            _ => None,
        }
    }

    /// The syscall argument (0-5) this parameter is, as passed: an integer
    /// argument, not one read through it.
    pub fn plain_arg(&self) -> Option<u8> {
        match self {
            Kind::Fd(i) | Kind::S32(i) | Kind::U32(i) | Kind::U64(i) | Kind::S64(i) => Some(*i),
            _ => None,
        }
    }

    /// How the Rust side should present the bytes.
    pub fn text_kind(&self) -> &'static str {
        match self {
            Kind::Path(_) | Kind::Exe | Kind::Cwd | Kind::FdPathRet => "Path",
            Kind::Sockaddr(..) | Kind::MsgAddr(..) | Kind::SockPeer(_) | Kind::SockAddrOf(..) => "Sockaddr",
            Kind::Argv(_) | Kind::Args | Kind::Env => "Argv",
            Kind::Fd(_) => "Fd",
            _ if self.wire() == Wire::Bytes => "Data",
            _ => "Int",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub kind: Kind,
    /// Read at syscall entry and merged into the exit event (TOCTOU-safe).
    pub at_enter: bool,
    pub renderer: Option<String>,
}

#[derive(Debug, Clone)]
pub struct EventDef {
    pub syscall: Syscall,
    /// Never returns (exit, exit_group): the event is emitted at entry.
    pub noreturn: bool,
    /// Another syscall whose exit tracepoint may report this one's exit.
    pub exit_also: Option<Syscall>,
    /// Fixed-size parameters first, then variable ones: the wire order.
    pub params: Vec<Param>,
}

impl EventDef {
    pub fn has_enter(&self) -> bool {
        self.params.iter().any(|p| p.at_enter)
    }
}

pub struct Tables {
    pub schema_version: u32,
    pub syscalls: Vec<Syscall>,
    pub events: Vec<EventDef>,
}

#[derive(Debug)]
pub struct TableError {
    pub file: String,
    pub line: usize,
    pub msg: String,
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.msg)
    }
}

impl std::error::Error for TableError {}

fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty())
}

pub fn parse_syscalls(file: &str, text: &str) -> Result<Vec<Syscall>, TableError> {
    let mut out = Vec::new();
    for (line, l) in content_lines(text) {
        let err = |msg: &str| TableError { file: file.into(), line, msg: msg.into() };
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols.len() < 2 || cols.len() > 3 {
            return Err(err("expected: <nr> <name> [<tracepoint name>]"));
        }
        let nr = cols[0].parse().map_err(|_| err("syscall number is not a number"))?;
        let name = cols[1].to_string();
        let tracepoint = cols.get(2).unwrap_or(&cols[1]).to_string();
        out.push(Syscall { nr, name, tracepoint });
    }
    Ok(out)
}

fn parse_len(s: &str) -> Option<Len> {
    match s {
        "ret" => Some(Len::Ret),
        "all" => Some(Len::All),
        _ => match s.strip_prefix('*') {
            Some(n) => n.parse().ok().map(Len::UserPtr),
            None => s.parse().ok().map(Len::Arg),
        },
    }
}

fn parse_kind(kind: &str, args: &[&str]) -> Option<Kind> {
    let arg = |i: usize| -> Option<u8> { args.get(i)?.parse().ok().filter(|&a: &u8| a < 6) };
    let n = args.len();
    Some(match (kind, n) {
        ("fd", 1) => Kind::Fd(arg(0)?),
        ("s32", 1) => Kind::S32(arg(0)?),
        ("u32", 1) => Kind::U32(arg(0)?),
        ("u64", 1) => Kind::U64(arg(0)?),
        ("s64", 1) => Kind::S64(arg(0)?),
        ("u32u", 2) => Kind::U32User(arg(0)?, args[1].parse().ok()?),
        ("u64u", 2) => Kind::U64User(arg(0)?, args[1].parse().ok()?),
        ("tgid", 0) => Kind::Tgid,
        ("path", 1) => Kind::Path(arg(0)?),
        ("buf", 2) => Kind::Buf(arg(0)?, parse_len(args[1])?),
        ("iov", 3) => Kind::Iov(arg(0)?, arg(1)?, parse_len(args[2])?),
        ("sockaddr", 2) => Kind::Sockaddr(arg(0)?, parse_len(args[1])?),
        ("msgaddr", 1) => Kind::MsgAddr(arg(0)?, false),
        ("msgaddr", 2) if args[1] == "ret" => Kind::MsgAddr(arg(0)?, true),
        ("msgdata", 2) => Kind::MsgData(arg(0)?, parse_len(args[1])?),
        ("argv", 1) => Kind::Argv(arg(0)?),
        ("fdpath", 1) if args[0] == "ret" => Kind::FdPathRet,
        ("sockpeer", 1) if args[0] == "ret" => Kind::SockAddrOf(None, false),
        ("sockpeer", 1) => Kind::SockPeer(arg(0)?),
        ("sockname", 1) if args[0] == "ret" => Kind::SockAddrOf(None, true),
        ("sockname", 1) => Kind::SockAddrOf(Some(arg(0)?), true),
        ("socktype", 1) => Kind::SockType(arg(0)?),
        ("task", 1) => Kind::Task(TASK_FIELDS.iter().find(|(n, _)| *n == args[0])?.0),
        ("exe", 0) => Kind::Exe,
        ("cwd", 0) => Kind::Cwd,
        ("args", 0) => Kind::Args,
        ("env", 0) => Kind::Env,
        _ => return None,
    })
}

/// `name=kind(a,b)@enter/renderer`, with `@enter` allowed right after the kind.
fn parse_param(tok: &str) -> Option<Param> {
    let (name, rest) = tok.split_once('=')?;
    let (spec, renderer) = match rest.split_once('/') {
        Some((s, r)) => (s, Some(r.to_string())),
        None => (rest, None),
    };
    let (head, args) = match spec.split_once('(') {
        Some((h, a)) => (h, a.strip_suffix(')')?),
        None => (spec, ""),
    };
    let (kind_name, at_enter) = match head.strip_suffix("@enter") {
        Some(k) => (k, true),
        None => (head, false),
    };
    let args: Vec<&str> = if args.is_empty() { vec![] } else { args.split(',').collect() };
    let kind = parse_kind(kind_name, &args)?;
    let enter_ok = kind.wire() != Wire::Bytes
        && !matches!(kind, Kind::Tgid | Kind::U32User(..) | Kind::Task(_))
        || matches!(kind, Kind::Path(_) | Kind::Sockaddr(_, Len::Arg(_)));
    if at_enter && !enter_ok {
        return None;
    }
    Some(Param { name: name.to_string(), kind, at_enter, renderer })
}

pub fn parse_events(
    file: &str,
    text: &str,
    syscalls: &[Syscall],
) -> Result<(u32, Vec<EventDef>), TableError> {
    let mut version = None;
    let mut events: Vec<EventDef> = Vec::new();
    for (line, l) in content_lines(text) {
        let err = |msg: String| TableError { file: file.into(), line, msg };
        let mut toks = l.split_whitespace();
        let head = toks.next().unwrap_or_default();
        if head == "schema_version" {
            let v = toks.next().and_then(|v| v.parse().ok());
            version = Some(v.ok_or_else(|| err("schema_version needs a number".into()))?);
            continue;
        }
        let syscall = syscalls
            .iter()
            .find(|s| s.name == head)
            .ok_or_else(|| err(format!("unknown syscall '{head}'")))?
            .clone();
        if events.iter().any(|e| e.syscall.name == head) {
            return Err(err(format!("syscall '{head}' is defined twice")));
        }
        let mut params = Vec::new();
        let mut toks = toks.peekable();
        let noreturn = toks.next_if_eq(&"noreturn").is_some();
        let exit_also = match toks.next_if(|t| t.starts_with("exit_also=")) {
            Some(t) => {
                let name = &t["exit_also=".len()..];
                let s = syscalls.iter().find(|s| s.name == name);
                Some(s.ok_or_else(|| err(format!("unknown syscall '{name}' in exit_also")))?.clone())
            }
            None => None,
        };
        for tok in toks {
            let p = parse_param(tok).ok_or_else(|| err(format!("bad parameter '{tok}'")))?;
            if params.iter().any(|q: &Param| q.name == p.name) {
                return Err(err(format!("parameter '{}' appears twice", p.name)));
            }
            params.push(p);
        }
        // Wire order: fixed-size first so their offsets are constants in BPF.
        params.sort_by_key(|p| p.kind.wire() == Wire::Bytes);
        if noreturn && params.iter().any(|p| p.at_enter || p.kind.wire() == Wire::Bytes) {
            return Err(err("noreturn events take fixed-size parameters only".into()));
        }
        if exit_also.is_some() && !params.iter().any(|p| p.at_enter) {
            return Err(err("exit_also needs a parameter read at entry".into()));
        }
        events.push(EventDef { syscall, noreturn, exit_also, params });
    }
    let version = version.ok_or_else(|| TableError {
        file: file.into(),
        line: 0,
        msg: "missing schema_version".into(),
    })?;
    Ok((version, events))
}
