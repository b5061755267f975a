//! Legacy events → Harrier's exit-only events.
//!
//! Per thread, an enter event waits for its exit; the exit then becomes one
//! Harrier event: its return value, and each parameter of Harrier's typed
//! form taken from the exit (newer writers repeat enter parameters there) or
//! else the enter. Syscalls Harrier has no typed form for become generic
//! events; events that are not syscalls become [`ForeignEvent`]s; process
//! lists, fd lists, users, groups, interfaces, machine info, proc-info and
//! user/group-added events become [`Snapshot`]s.

use crate::error::{trim_nul, Error};
use crate::event::{is_event_block, LegacyEvent};
use crate::meta;
use crate::snapshot::*;
use crate::source::{Block, BlockReader, SHB};
use crate::stats::Stats;
use crate::table::{event_info, PKind};
use crate::values::{self, Endpoint};
use harrier_schema::encode::{encode, Arg};
use harrier_schema::wire::Header;
use harrier_schema::{syscall_by_name, syscall_by_nr, ParamDesc, SyscallInfo, Wire};
use std::collections::HashMap;
use std::io::Read;

/// An event that is not a syscall Harrier knows (procexit, signaldeliver,
/// container, ...), kept with its parameters as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignEvent {
    pub ts: u64,
    pub tid: u32,
    pub name: String,
    pub params: Vec<(String, String)>,
}

/// One item of the converted stream, in file order.
#[derive(Debug)]
pub enum Converted<'a> {
    /// A Harrier wire record (typed or generic syscall event), exactly as
    /// BPF emits them: `harrier_schema::decode::decode` reads it. Its `ts` is
    /// the legacy capture's: nanoseconds since the epoch.
    Event(&'a [u8]),
    Foreign(ForeignEvent),
    Snapshot(Snapshot),
}

pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug)]
pub enum ConvertError {
    /// The capture is malformed or unreadable.
    Read(Error),
    /// The sink refused an item.
    Sink(SinkError),
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::Read(e) => e.fmt(f),
            ConvertError::Sink(e) => write!(f, "writing the converted stream: {e}"),
        }
    }
}

impl std::error::Error for ConvertError {}

impl From<Error> for ConvertError {
    fn from(e: Error) -> Self {
        ConvertError::Read(e)
    }
}

/// Converts one capture: `Converter::open(path)?.run(|item| ...)`.
pub struct Converter<R> {
    src: BlockReader<R>,
    st: State,
}

impl Converter<Box<dyn Read + Send>> {
    pub fn open(path: &std::path::Path) -> Result<Self, Error> {
        Ok(Converter { src: crate::source::open(path)?, st: State::default() })
    }

    /// From bytes in memory or any reader (gzip recognised).
    pub fn from_reader<R: Read + Send + 'static>(r: R, size: Option<u64>) -> Result<Self, Error> {
        Ok(Converter { src: BlockReader::detect(r, size)?, st: State::default() })
    }
}

impl<R: Read> Converter<R> {
    /// Reads the whole capture, handing each converted item to `sink` in file
    /// order, and returns what was done per event type. On an error the
    /// items before it have been delivered; `stats()` was not.
    pub fn run(
        mut self,
        mut sink: impl FnMut(Converted<'_>) -> Result<(), SinkError>,
    ) -> Result<Stats, ConvertError> {
        let mut first = true;
        while let Some(block) = self.src.next_block()? {
            if first && block.kind != SHB {
                return Err(Error::new(
                    0,
                    format!("not a scap capture: first block type {:#x}, not a section header", block.kind),
                )
                .into());
            }
            first = false;
            self.st.block(&block, &mut sink)?;
        }
        if first {
            return Err(Error::new(0, "empty file: no section header").into());
        }
        self.st.finish(&mut sink)?;
        Ok(self.st.stats)
    }
}

/// A stored enter event waiting for its exit.
struct Pending {
    active: bool,
    ev: LegacyEvent<'static>,
    data: Vec<u8>,
}

#[derive(Default)]
struct State {
    header: Option<SectionHeader>,
    held: Vec<ProcessSnapshot>,
    held_index: HashMap<u64, usize>,
    pending: HashMap<u64, Pending>,
    cwd: HashMap<u64, String>,
    syscalls: HashMap<u16, Option<&'static SyscallInfo>>,
    stats: Stats,
    out: Vec<u8>,
    scratch: Vec<u8>,
    /// Children whose fork record was sent, and that record's buffer.
    forked: std::collections::HashSet<u64>,
    meta: Vec<u8>,
    /// Threads of the process list (the start snapshot).
    known: std::collections::HashSet<u64>,
    /// tid → pid (thread group), from the process list and the fork records:
    /// what a procexit's exit record names.
    pids: HashMap<u64, u64>,
}

type Sink<'s> = dyn FnMut(Converted<'_>) -> Result<(), SinkError> + 's;

fn deliver(sink: &mut Sink, c: Converted<'_>) -> Result<(), ConvertError> {
    sink(c).map_err(ConvertError::Sink)
}

/// Up to this many parameters per Harrier event (execve has 19).
const MAX_ARGS: usize = 32;

/// Where a Harrier parameter's value comes from.
enum Src {
    /// The first of these legacy parameters present (exit first, then enter).
    Names(&'static [&'static str]),
    /// The legacy parameter of the same name.
    Same,
    OpenFlags,
    CloneFlags,
    FullPath,
    Argv,
    TupleSource,
    TupleDest,
    /// A sockaddr parameter, else the tuple's destination.
    AddrOrDst,
    Absent,
}

/// Renderers whose legacy encoding differs from Linux's and is not translated:
/// those parameters are written as absent rather than wrong.
const UNTRANSLATED: &[&str] = &[
    "fcntl_cmd",
    "msg_flags",
    "ptrace_request",
    "resolve_flags",
    "sockopt_level",
    "mount_flags",
    "umount_flags",
    "epoll_op",
    "epoll_events",
];

fn source(sc: &str, p: &ParamDesc) -> Src {
    use Src::*;
    let open_family = matches!(sc, "open" | "openat" | "openat2" | "creat");
    let src = match (sc, p.name) {
        (_, "fullpath") => FullPath,
        (_, "flags") if open_family => OpenFlags,
        (_, "flags") if p.renderer == Some("open_flags") => Absent, // per-syscall legacy encodings
        ("clone" | "clone3" | "unshare", "flags") | ("setns", "nstype") => CloneFlags,
        ("execve" | "execveat", "argv" | "args") => Argv,
        ("execve" | "execveat", "exe") => Names(&["trusted_exepath"]),
        ("execve" | "execveat", "filename") => Names(&["filename", "pathname"]),
        ("execve" | "execveat", "exe_ctime") => Names(&["exe_ino_ctime"]),
        ("execve" | "execveat", "exe_mtime") => Names(&["exe_ino_mtime"]),
        ("execve" | "execveat" | "clone" | "clone3" | "fork" | "vfork" | "tgkill", "tgid") => Names(&["pid"]),
        ("connect", "addr") => AddrOrDst,
        ("connect", "peer") | ("accept" | "accept4", "local") | ("sendto" | "sendmsg", "addr") => TupleDest,
        ("connect", "local") | ("accept" | "accept4", "addr" | "peer") | ("recvfrom" | "recvmsg", "addr") => {
            TupleSource
        }
        ("bind", "addr" | "local") => Names(&["addr"]),
        ("umount2", "target") => Names(&["name"]),
        ("mount", "source") => Names(&["dev"]),
        ("mount", "target") => Names(&["dir"]),
        ("mount", "fstype") => Names(&["type"]),
        ("pipe" | "pipe2" | "socketpair", "fd0") => Names(&["fd1"]),
        ("pipe" | "pipe2" | "socketpair", "fd1") => Names(&["fd2"]),
        ("prctl", "arg2") => Names(&["arg2_int"]),
        ("capset", "effective") => Names(&["cap_effective"]),
        ("capset", "permitted") => Names(&["cap_permitted"]),
        ("capset", "inheritable") => Names(&["cap_inheritable"]),
        (_, "path") => Names(&["path", "name", "filename", "pathname"]),
        (_, "oldfd") => Names(&["oldfd", "fd"]),
        (_, "olddirfd") => Names(&["olddirfd", "olddir"]),
        (_, "newdirfd") => Names(&["newdirfd", "newdir", "linkdirfd"]),
        (_, "protocol") => Names(&["proto"]),
        (_, n) if n.starts_with("cur_") => Absent,
        _ => Same,
    };
    if p.renderer.is_some_and(|r| UNTRANSLATED.contains(&r)) {
        return Absent;
    }
    src
}

/// A value being assembled: ints, or byte ranges in one of the sources.
#[derive(Clone, Copy)]
enum V {
    Int(i64),
    Exit(usize, usize),
    Enter(usize, usize),
    Scratch(usize, usize),
    Absent,
}

impl State {
    fn block(&mut self, b: &Block, sink: &mut Sink) -> Result<(), ConvertError> {
        let kind = b.kind;
        if is_event_block(kind) {
            *self.stats.blocks.entry("event".into()).or_default() += 1;
            self.flush_held(sink)?;
            let ev = LegacyEvent::parse(b)?;
            return self.event(&ev, sink);
        }
        let name = if kind == SHB {
            let h = meta::section_header(b)?;
            let n = format!("section header {}.{}", h.major, h.minor);
            self.header = Some(h);
            n
        } else if meta::MI.contains(&kind) {
            let m = meta::machine_info(b)?;
            deliver(sink, Converted::Snapshot(Snapshot::Machine(m)))?;
            "machine info".into()
        } else if let Some(v) = meta::proclist_version(kind) {
            for p in meta::proclist(b, v)? {
                self.cwd.insert(p.tid, p.cwd.clone());
                self.held_index.insert(p.tid, self.held.len());
                self.held.push(p);
            }
            format!("process list v{v}")
        } else if meta::FDL.contains(&kind) {
            let (tid, fds) = meta::fdlist(b)?;
            match self.held_index.get(&tid) {
                Some(&i) => self.held[i].fds.extend(fds),
                None => {
                    // fds of a thread the process list did not name: kept on their own.
                    self.held_index.insert(tid, self.held.len());
                    self.held.push(ProcessSnapshot {
                        tid,
                        pid: tid,
                        sid: -1,
                        vpgid: -1,
                        vtid: -1,
                        vpid: -1,
                        loginuid: u32::MAX,
                        fds,
                        ..Default::default()
                    });
                }
            }
            format!("fd list v{}", if kind == 0x218 { 2 } else { 1 })
        } else if meta::UL.contains(&kind) {
            let (users, groups) = meta::userlist(b)?;
            self.stats.entry("users").snapshot += users.len() as u64;
            self.stats.entry("groups").snapshot += groups.len() as u64;
            deliver(sink, Converted::Snapshot(Snapshot::Users(users)))?;
            deliver(sink, Converted::Snapshot(Snapshot::Groups(groups)))?;
            format!("user list v{}", if kind == 0x220 { 2 } else { 1 })
        } else if meta::IL.contains(&kind) {
            let ifs = meta::iflist(b)?;
            deliver(sink, Converted::Snapshot(Snapshot::Interfaces(ifs)))?;
            format!("interface list v{}", if kind == 0x219 { 2 } else { 1 })
        } else {
            self.stats.unknown_blocks += 1;
            format!("unknown {kind:#x}")
        };
        *self.stats.blocks.entry(name).or_default() += 1;
        Ok(())
    }

    fn flush_held(&mut self, sink: &mut Sink) -> Result<(), ConvertError> {
        if self.held.is_empty() {
            return Ok(());
        }
        self.stats.entry("processes").snapshot += self.held.len() as u64;
        self.held_index.clear();
        self.known.extend(self.held.iter().map(|p| p.tid));
        self.pids.extend(self.held.iter().map(|p| (p.tid, p.pid)));
        for p in std::mem::take(&mut self.held) {
            deliver(sink, Converted::Snapshot(Snapshot::Process(Box::new(p))))?;
        }
        Ok(())
    }

    fn finish(&mut self, sink: &mut Sink) -> Result<(), ConvertError> {
        self.flush_held(sink)?;
        let mut left: Vec<String> = Vec::new();
        for p in self.pending.values_mut().filter(|p| p.active) {
            p.active = false;
            left.push(output_name(&p.ev.rebind(&p.data), None).to_string());
        }
        for name in left {
            self.stats.skip(&name, "enter without exit (capture ended)");
        }
        Ok(())
    }

    /// The x86_64 syscall a legacy event reports, if any.
    fn syscall_of(&mut self, ev: &LegacyEvent) -> Option<&'static SyscallInfo> {
        if ev.kind <= 1 {
            // The generic event names its syscall by native number.
            return ev.int("nativeID").and_then(|n| syscall_by_nr(n as u32));
        }
        let info = ev.info?;
        *self.syscalls.entry(ev.kind).or_insert_with(|| syscall_by_name(info.syscall))
    }

    fn tid32(&mut self, tid: u64) -> u32 {
        if tid > u32::MAX as u64 && tid != u64::MAX {
            self.stats.tids_truncated += 1;
        }
        tid as u32
    }

    fn event(&mut self, ev: &LegacyEvent, sink: &mut Sink) -> Result<(), ConvertError> {
        self.stats.legacy_events += 1;
        let Some(info) = ev.info else {
            let name = format!("legacy_event_{}", ev.kind);
            self.stats.entry(&name).foreign += 1;
            let f = self.foreign(ev, None, name);
            return deliver(sink, Converted::Foreign(f));
        };
        if ev.is_enter() {
            match ev.kind {
                234 => {
                    self.stats.entry("procinfo").snapshot += 1;
                    let s = Snapshot::ProcInfo {
                        ts: ev.ts,
                        tid: ev.tid,
                        cpu_user: ev.int("cpu_usr").unwrap_or(0) as u64,
                        cpu_system: ev.int("cpu_sys").unwrap_or(0) as u64,
                    };
                    return deliver(sink, Converted::Snapshot(s));
                }
                354 | 358 => {
                    let s = |n: &str| ev.get(n).map(|(b, _)| crate::error::text(b)).unwrap_or_default();
                    let snap = if ev.kind == 354 {
                        let u = User {
                            uid: ev.int("uid").unwrap_or(-1) as u32,
                            gid: ev.int("gid").unwrap_or(-1) as u32,
                            name: s("name"),
                            home: s("home"),
                            shell: s("shell"),
                            container_id: s("container_id"),
                        };
                        Snapshot::UserAdded(ev.ts, u)
                    } else {
                        Snapshot::GroupAdded(
                            ev.ts,
                            Group {
                                gid: ev.int("gid").unwrap_or(-1) as u32,
                                name: s("name"),
                                container_id: s("container_id"),
                            },
                        )
                    };
                    self.stats.entry(info.name).snapshot += 1;
                    return deliver(sink, Converted::Snapshot(snap));
                }
                // procexit: a thread ended. The sensor reports that as a
                // life-cycle exit, which frees the thread in the state.
                16 | 186 => {
                    let pid = self.pids.remove(&ev.tid).map_or(0, |p| p as u32);
                    let tid = self.tid32(ev.tid);
                    crate::lifecycle::exit(&mut self.meta, ev.ts, tid, pid);
                    self.stats.lifecycle += 1;
                    self.stats.entry(info.name).snapshot += 1;
                    return deliver(sink, Converted::Event(&self.meta));
                }
                _ => {}
            }
            let standalone = event_info(ev.kind + 1).is_none();
            let sc = self.syscall_of(ev);
            if standalone && sc.is_none() {
                self.stats.entry(info.name).foreign += 1;
                let f = self.foreign(ev, None, info.name.to_string());
                return deliver(sink, Converted::Foreign(f));
            }
            if let Some(sc) = sc.filter(|s| s.noreturn) {
                // exit/exit_group never return: Harrier's event is the entry's.
                return self.syscall(sc, None, Some(ev), sink);
            }
            // Wait for the exit; an earlier enter still waiting lost its exit.
            let slot = self.pending.entry(ev.tid).or_insert_with(|| Pending {
                active: false,
                ev: ev.rebind(&[]),
                data: Vec::new(),
            });
            let orphan = slot.active.then(|| output_name(&slot.ev.rebind(&slot.data), None).to_string());
            slot.active = true;
            slot.ev = ev.rebind(&[]);
            slot.data.clear();
            slot.data.extend_from_slice(ev.data());
            if let Some(name) = orphan {
                self.stats.skip(&name, "enter without exit");
            }
            return Ok(());
        }
        // An exit: take its enter if it is the one waiting on this thread.
        let mut pending = self.pending.remove(&ev.tid);
        if let Some(p) = pending.as_mut().filter(|p| p.active) {
            // Generic events pair by the libs' syscall id: old generic exits
            // carry no native number.
            let matches =
                p.ev.kind + 1 == ev.kind && (ev.kind != 1 || p.ev.rebind(&p.data).int("ID") == ev.int("ID"));
            if !matches {
                p.active = false;
                let name = output_name(&p.ev.rebind(&p.data), None).to_string();
                self.stats.skip(&name, "enter without exit");
            }
        }
        let enter = pending.as_ref().filter(|p| p.active).map(|p| p.ev.rebind(&p.data));
        if enter.is_some() {
            self.stats.enters_merged += 1;
        }
        let sc = self.syscall_of(ev).or_else(|| enter.as_ref().and_then(|e| self.syscall_of(e)));
        let r = match sc {
            Some(sc) => {
                self.lifecycle(sc, ev, sink).and_then(|_| self.syscall(sc, Some(ev), enter.as_ref(), sink))
            }
            None => {
                self.stats.entry(info.name).foreign += 1;
                let f = self.foreign(ev, enter.as_ref(), info.name.to_string());
                deliver(sink, Converted::Foreign(f))
            }
        };
        if let Some(mut p) = pending {
            p.active = false;
            self.pending.insert(ev.tid, p); // keep its buffer for the thread's next enter
        }
        self.track_cwd(sc, ev);
        r
    }

    /// A fork or exec life-cycle record before the clone/execve exit that
    /// caused it, as the sensor's sched tracepoints deliver them: once per
    /// child, from whichever of the child's and the parent's exits comes first.
    fn lifecycle(
        &mut self,
        sc: &'static SyscallInfo,
        ev: &LegacyEvent,
        sink: &mut Sink,
    ) -> Result<(), ConvertError> {
        match sc.name {
            "clone" | "clone3" | "fork" | "vfork" => {
                let flags = ev.int("flags").map_or(0, |f| values::clone_flags(f as u64));
                let Some(child) = crate::lifecycle::fork(&mut self.meta, ev, flags, |t| t as u32) else {
                    return Ok(());
                };
                if !self.forked.insert(child) {
                    return Ok(());
                }
                self.pids.insert(child, crate::lifecycle::fork_pid(&self.meta) as u64);
                self.stats.lifecycle += 1;
                deliver(sink, Converted::Event(&self.meta))
            }
            "execve" | "execveat" => {
                // A thread unknown so far gets its fork first, from the exit's ptid/pid.
                if !self.known.contains(&ev.tid)
                    && self.forked.insert(ev.tid)
                    && crate::lifecycle::fork_before_exec(&mut self.meta, ev, |t| t as u32)
                {
                    self.pids.insert(ev.tid, crate::lifecycle::fork_pid(&self.meta) as u64);
                    self.stats.lifecycle += 1;
                    deliver(sink, Converted::Event(&self.meta))?;
                }
                if !crate::lifecycle::exec(&mut self.meta, ev, ev.tid as u32) {
                    return Ok(());
                }
                self.stats.lifecycle += 1;
                deliver(sink, Converted::Event(&self.meta))
            }
            _ => Ok(()),
        }
    }

    /// Per-thread working directory, to give relative opens their full path.
    fn track_cwd(&mut self, sc: Option<&'static SyscallInfo>, ev: &LegacyEvent) {
        let Some(sc) = sc else { return };
        let res = ev.int("res").unwrap_or(-1);
        match sc.name {
            "clone" | "clone3" | "fork" | "vfork" | "execve" | "execveat" if res == 0 => {
                if let Some((b, PKind::Str)) = ev.get("cwd") {
                    let cwd = crate::error::text(b);
                    if !cwd.is_empty() {
                        self.cwd.insert(ev.tid, cwd);
                    }
                }
            }
            "chdir" if res == 0 => {
                if let Some((b, _)) = ev.get("path") {
                    let p = crate::error::text(b);
                    let new = join(self.cwd.get(&ev.tid).map(String::as_str), &p);
                    if let Some(new) = new {
                        self.cwd.insert(ev.tid, new);
                    }
                }
            }
            _ => {}
        }
    }

    fn foreign(&mut self, ev: &LegacyEvent, enter: Option<&LegacyEvent>, name: String) -> ForeignEvent {
        let mut params = Vec::new();
        let add = |e: &LegacyEvent, skip_known: bool, params: &mut Vec<(String, String)>| {
            for i in 0..e.nparams() {
                let pname = e.name(i).map_or_else(|| format!("p{i}"), str::to_string);
                if skip_known && params.iter().any(|(n, _)| *n == pname) {
                    continue;
                }
                let kind = e.info.and_then(|inf| inf.params.get(i)).map_or(PKind::Bytes, |p| p.1);
                params.push((pname, values::render(e.raw(i).unwrap_or_default(), kind)));
            }
        };
        add(ev, false, &mut params);
        if let Some(e) = enter {
            add(e, true, &mut params);
        }
        ForeignEvent { ts: ev.ts, tid: self.tid32(ev.tid), name, params }
    }

    /// One Harrier syscall event from an exit and/or its enter.
    fn syscall(
        &mut self,
        sc: &'static SyscallInfo,
        exit: Option<&LegacyEvent>,
        enter: Option<&LegacyEvent>,
        sink: &mut Sink,
    ) -> Result<(), ConvertError> {
        let main = exit.or(enter).expect("an exit or an enter");
        let (ts, tid) = (main.ts, self.tid32(main.tid));
        // The return value is the exit's first parameter (res, or fd for the calls creating one).
        // An exit without one (the libs' generic event) has none: the record says so.
        let ret = exit.filter(|e| matches!(e.name(0), Some("res" | "fd"))).and_then(|e| {
            e.raw(0).and_then(|b| values::int(b, e.info.map_or(PKind::Int, |i| i.params[0].1)))
        });
        let no_ret = exit.is_some() && ret.is_none();
        let ret = ret.unwrap_or(0);
        let Some(descs) = sc.params else {
            // With no values encoding cannot fail; were it to, the event is counted, not sent.
            if encode(&mut self.out, ts, tid, sc, false, ret, &[]).is_err() {
                self.stats.skip(sc.name, "not encodable");
                return Ok(());
            }
            if no_ret {
                Header::set_no_ret(&mut self.out);
            }
            self.stats.entry(sc.name).generic += 1;
            return deliver(sink, Converted::Event(&self.out));
        };
        let find = |names: &[&str]| -> Option<(V, &[u8], PKind)> {
            for n in names {
                if let Some(e) = exit {
                    if let Some(i) = e.index_of(n) {
                        let b = e.raw(i)?;
                        let (s, _) = span_in(e.data(), b);
                        return Some((V::Exit(s, b.len()), b, e.info?.params[i].1));
                    }
                }
                if let Some(e) = enter {
                    if let Some(i) = e.index_of(n) {
                        let b = e.raw(i)?;
                        let (s, _) = span_in(e.data(), b);
                        return Some((V::Enter(s, b.len()), b, e.info?.params[i].1));
                    }
                }
            }
            None
        };
        self.scratch.clear();
        let mut vals = [V::Absent; MAX_ARGS];
        let n = descs.len().min(MAX_ARGS);
        let mut path: Option<(V, String)> = None;
        for (i, d) in descs.iter().take(n).enumerate() {
            let fixed = d.wire != Wire::Bytes;
            let same = [d.name];
            let src = match source(sc.name, d) {
                Src::Same => Src::Names(&[]),
                other => other,
            };
            vals[i] = match src {
                Src::Absent => V::Absent,
                Src::Names(names) => match find(if names.is_empty() { &same } else { names }) {
                    Some((_, b, k @ (PKind::Int | PKind::UInt))) if fixed => {
                        values::int(b, k).map_or(V::Absent, V::Int)
                    }
                    Some((v, b, PKind::Str)) if !fixed => {
                        let t = trim_nul(b);
                        let v = match v {
                            V::Exit(s, _) => V::Exit(s, t.len()),
                            V::Enter(s, _) => V::Enter(s, t.len()),
                            v => v,
                        };
                        if d.name == "path" || d.name == "filename" {
                            path = Some((v, String::from_utf8_lossy(t).into_owned()));
                        }
                        v
                    }
                    Some((v, _, PKind::Bytes)) if !fixed => v,
                    Some((_, b, PKind::Sockaddr)) if !fixed => self.sockaddr(values::sockaddr(b)),
                    _ => V::Absent,
                },
                Src::OpenFlags => find(&["flags"])
                    .and_then(|(_, b, k)| values::int(b, k))
                    .map_or(V::Absent, |f| V::Int(values::open_flags(f as u32) as i64)),
                Src::CloneFlags => find(&[d.name, "flags"])
                    .and_then(|(_, b, k)| values::int(b, k))
                    .map_or(V::Absent, |f| V::Int(values::clone_flags(f as u64) as i64)),
                Src::TupleSource | Src::TupleDest => {
                    let src = matches!(source(sc.name, d), Src::TupleSource);
                    let t = find(&["tuple"]).and_then(|(_, b, _)| values::tuple(b));
                    self.sockaddr(t.map(|(s, dd)| if src { s } else { dd }))
                }
                Src::AddrOrDst => match find(&["addr"]).and_then(|(_, b, _)| values::sockaddr(b)) {
                    Some(e) => self.sockaddr(Some(e)),
                    None => {
                        self.sockaddr(find(&["tuple"]).and_then(|(_, b, _)| values::tuple(b)).map(|t| t.1))
                    }
                },
                Src::Argv => {
                    let exe = find(&["exe"]).map(|(_, b, _)| trim_nul(b));
                    let args = find(&["args"]).map(|(_, b, _)| b);
                    if exe.is_none() && args.is_none() {
                        V::Absent
                    } else {
                        let s = self.scratch.len();
                        if let Some(exe) = exe {
                            self.scratch.extend_from_slice(exe);
                            self.scratch.push(0);
                        }
                        if let Some(a) = args {
                            self.scratch.extend_from_slice(a);
                            if !a.is_empty() && a[a.len() - 1] != 0 {
                                self.scratch.push(0);
                            }
                        }
                        V::Scratch(s, self.scratch.len() - s)
                    }
                }
                Src::FullPath | Src::Same => V::Absent, // fullpath: filled below, once path is known
            };
        }
        // fullpath: what the libs call the fd's name: the path made absolute.
        if let Some(i) = descs.iter().take(n).position(|d| d.name == "fullpath") {
            vals[i] = match &path {
                Some((_, p)) if ret >= 0 => {
                    let dirfd = find(&["dirfd"]).and_then(|(_, b, k)| values::int(b, k));
                    let base = match dirfd {
                        None | Some(-100) => self.cwd.get(&main.tid).map(String::as_str),
                        _ => None,
                    };
                    match join(if p.starts_with('/') { Some("/") } else { base }, p) {
                        Some(full) => {
                            let s = self.scratch.len();
                            self.scratch.extend_from_slice(full.as_bytes());
                            V::Scratch(s, full.len())
                        }
                        None => V::Absent,
                    }
                }
                _ => V::Absent,
            };
        }
        // Absent trailing parameters are left out (they decode as missing);
        // absent ones before a present one are written as 0 or empty.
        let mut last = n;
        while last > 0 && matches!(vals[last - 1], V::Absent) {
            last -= 1;
        }
        let absent = vals[..n].iter().filter(|v| matches!(v, V::Absent)).count() as u64;
        let exit_data = exit.map_or(&[][..], |e| e.data());
        let enter_data = enter.map_or(&[][..], |e| e.data());
        let mut args = [Arg::Int(0); MAX_ARGS];
        for i in 0..last {
            args[i] = match vals[i] {
                V::Int(v) => Arg::Int(v),
                V::Exit(s, l) => Arg::Bytes(&exit_data[s..s + l]),
                V::Enter(s, l) => Arg::Bytes(&enter_data[s..s + l]),
                V::Scratch(s, l) => Arg::Bytes(&self.scratch[s..s + l]),
                V::Absent if descs[i].wire == Wire::Bytes => Arg::Bytes(&[]),
                V::Absent => Arg::Int(absent_int(descs[i].name)),
            };
        }
        // The values follow the table's wire kinds; should a future table
        // disagree, the event is still written, with its parameters absent.
        let (enc, absent) = match encode(&mut self.out, ts, tid, sc, false, ret, &args[..last]) {
            Ok(enc) => (enc, absent),
            Err(_) => match encode(&mut self.out, ts, tid, sc, false, ret, &[]) {
                Ok(enc) => (enc, n as u64),
                Err(_) => {
                    self.stats.skip(sc.name, "not encodable");
                    return Ok(());
                }
            },
        };
        let st = self.stats.entry(sc.name);
        if exit.is_some() && enter.is_some() || sc.noreturn {
            st.merged += 1;
        } else {
            st.exit_only += 1;
        }
        st.params_absent += absent;
        st.truncated += enc.truncated_fields as u64;
        if no_ret {
            Header::set_no_ret(&mut self.out);
        }
        deliver(sink, Converted::Event(&self.out))
    }

    fn sockaddr(&mut self, e: Option<Endpoint>) -> V {
        match e {
            // A unix tuple's own end has no name in the legacy format.
            Some(Endpoint::Unix(b"")) | None => V::Absent,
            Some(e) => {
                let s = self.scratch.len();
                values::to_kernel_sockaddr(e, &mut self.scratch);
                V::Scratch(s, self.scratch.len() - s)
            }
        }
    }
}

/// The value written for an absent integer parameter followed by present
/// ones: -1 for ids and descriptors (so a missing uid never reads as root, nor
/// a missing fd as stdin), 0 for the rest (so no flag reads as set).
fn absent_int(name: &str) -> i64 {
    let id = name.ends_with("uid")
        || name.ends_with("gid")
        || name.ends_with("pid")
        || name.ends_with("fd")
        || matches!(
            name,
            "sid" | "cur_sid" | "tgid" | "tid" | "tty" | "pgid" | "fd0" | "fd1" | "vpgid" | "env_size"
        );
    if id {
        -1
    } else {
        0
    }
}

/// Where `part` (a sub-slice of `whole`) starts.
fn span_in(whole: &[u8], part: &[u8]) -> (usize, usize) {
    let s = part.as_ptr() as usize - whole.as_ptr() as usize;
    (s, part.len())
}

/// `path` made absolute against `base` ("/" when already absolute); None when
/// relative and the base is unknown.
fn join(base: Option<&str>, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return Some(path.to_string());
    }
    let base = base?;
    let mut s = String::with_capacity(base.len() + 1 + path.len());
    s.push_str(base.trim_end_matches('/'));
    s.push('/');
    s.push_str(path);
    Some(s)
}

/// The stats name of an event: its syscall's, else its legacy name.
fn output_name(ev: &LegacyEvent, sc: Option<&'static SyscallInfo>) -> &'static str {
    if let Some(sc) = sc {
        return sc.name;
    }
    if ev.kind <= 1 {
        if let Some(sc) = ev.int("nativeID").and_then(|n| syscall_by_nr(n as u32)) {
            return sc.name;
        }
    }
    match ev.info {
        Some(i) => syscall_by_name(i.syscall).map_or(i.name, |s| s.name),
        None => "unknown",
    }
}
