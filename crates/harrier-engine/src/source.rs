//! Rule fields for one event: the `EventSource` the rules engine evaluates.
//! Values borrow from the event's bytes and the state tables; text that has
//! to be built (times, addresses, joined paths) goes to a scratch buffer the
//! engine reuses, so extraction allocates nothing once warm.

use crate::view::{FdInfo, ProcInfo, StateView};
use harrier_rules::events::EventType;
use harrier_rules::fields::{Field, FieldArg};
use harrier_rules::value::{EventSource, Value};
use harrier_schema::decode::Value as Param;
use harrier_schema::family::{self, Family};
use harrier_schema::view::{Known, SyscallView};
use harrier_schema::TextKind;
use std::cell::{OnceCell, RefCell};
use std::fmt::Write;

mod supported;
pub use supported::supported;

/// One event as the rules see it.
pub struct Source<'a, S: StateView + ?Sized> {
    /// None for pseudo events (procexit).
    pub view: Option<&'a SyscallView<'a>>,
    pub ty: EventType,
    pub tid: u32,
    pub num: u64,
    /// Wall-clock ns since the epoch.
    pub wall_ns: u64,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC: process start times are monotonic.
    pub epoch_offset: u64,
    /// The host's boot time (ns since the epoch, /proc/stat's btime): Falco's start
    /// of the host's pid namespace (container.start_ts of host processes).
    pub boot_epoch_ns: u64,
    pub capture_start_ns: u64,
    pub host: &'a str,
    pub state: &'a S,
    pub scratch: &'a RefCell<String>,
    /// Lookups many fields of one event repeat (each rule tested on it asks again).
    pub cache: LookupCache<'a>,
    /// The rules' names and their addresses (fd.sip.name in outputs).
    pub dns: Option<&'a harrier_rules::dns::Resolver>,
    /// The host's interface addresses: Falco's fd.l*/fd.r* call the client end
    /// local when its address is one of them (never, in a container).
    pub ifaddrs: &'a [std::net::IpAddr],
}

/// The event's process and fd, looked up once per event, not once per field.
#[derive(Default)]
pub struct LookupCache<'a> {
    proc: OnceCell<Option<ProcInfo<'a>>>,
    fd: OnceCell<Option<FdInfo<'a>>>,
    open_flags: OnceCell<Option<(u64, u64)>>,
}

/// Open-style flags of this event, if it has them (open, openat, openat2, creat).
fn open_flags(v: &SyscallView) -> Option<(u64, u64)> {
    if !family::of(v.syscall.nr).contains(Family::OPEN) {
        return None;
    }
    let flags = v.known(Known::Flags)?.as_i64()? as u64;
    let mode = v.known(Known::Mode).and_then(|m| m.as_i64()).unwrap_or(0) as u64;
    Some((flags, mode))
}

impl<'a, S: StateView + ?Sized> Source<'a, S> {
    // By reference: the info is a few hundred bytes, read a field at a time.
    fn proc(&self) -> Option<&ProcInfo<'a>> {
        self.cache.proc.get_or_init(|| self.state.process(self.tid)).as_ref()
    }

    /// The fd this event is about: its fd argument, or the one it returned.
    fn fd(&self) -> Option<&FdInfo<'a>> {
        self.cache.fd.get_or_init(|| self.lookup_fd()).as_ref()
    }

    fn lookup_fd(&self) -> Option<FdInfo<'a>> {
        let v = self.view?;
        let num = match family::of(v.syscall.nr).contains(Family::RETURNS_FD) {
            true => (v.ret >= 0).then_some(v.ret as i32)?,
            false => v.known(Known::Fd)?.as_i64()? as i32,
        };
        self.state.fd(self.tid, num)
    }

    /// fd.name straight from the event where the kernel resolved it (open's
    /// fullpath), so a closed or failed fd still has its name.
    fn event_fd_name(&self) -> Option<&[u8]> {
        let v = self.view?;
        match v.known(Known::Fullpath) {
            Some(Param::Bytes(b)) if !b.is_empty() => Some(b),
            _ => None,
        }
    }

    fn with_scratch(&self, out: &mut dyn FnMut(Value<'_>) -> bool, build: impl FnOnce(&mut String)) {
        let mut s = self.scratch.borrow_mut();
        s.clear();
        build(&mut s);
        out(Value::Str(s.as_bytes()));
    }

    fn param_value(&self, i: usize, raw: bool, out: &mut dyn FnMut(Value<'_>) -> bool) {
        let Some(v) = self.view else { return };
        let desc = v.desc(i);
        match v.param(i) {
            Param::Missing => {}
            Param::Bytes(b) => match desc.map(|d| d.text) {
                Some(TextKind::Sockaddr) => {
                    self.with_scratch(out, |s| s.push_str(&harrier_schema::sockaddr::format(b)))
                }
                _ => {
                    let end = b
                        .iter()
                        .position(|&c| c == 0)
                        .filter(|_| desc.is_some_and(|d| d.text == TextKind::Path));
                    out(Value::Str(&b[..end.unwrap_or(b.len())]));
                }
            },
            p => {
                let n = p.as_i64().unwrap_or(0);
                match desc.and_then(|d| d.renderer) {
                    Some(r) if !raw => {
                        out(Value::Flags { bits: n as u64, renderer: r });
                    }
                    _ => {
                        out(if matches!(p, Param::Int(_)) { Value::S64(n) } else { Value::U64(n as u64) });
                    }
                }
            }
        }
    }

    /// A path argument made absolute against the process's cwd (Falco's fs.path.*).
    fn fs_path(&self, names: &[&str], raw: bool, out: &mut dyn FnMut(Value<'_>) -> bool) {
        let Some(v) = self.view else { return };
        let Some(Param::Bytes(p)) = names.iter().find_map(|n| v.named(n)) else { return };
        if raw || p.first() == Some(&b'/') {
            out(Value::Str(p));
            return;
        }
        let Some(proc) = self.proc() else { return };
        self.with_scratch(out, |s| {
            s.push_str(&String::from_utf8_lossy(proc.cwd));
            if !s.ends_with('/') {
                s.push('/');
            }
            s.push_str(&String::from_utf8_lossy(p));
        });
    }

    fn time(&self, out: &mut dyn FnMut(Value<'_>) -> bool, fmt: &str) {
        let secs = (self.wall_ns / 1_000_000_000) as i64;
        let t =
            chrono::DateTime::from_timestamp(secs, (self.wall_ns % 1_000_000_000) as u32).unwrap_or_default();
        self.with_scratch(out, |s| {
            let _ = write!(s, "{}", t.format(fmt));
        });
    }

    /// proc.a*: ancestors by index (1 = parent) or every one of them.
    fn ancestors(
        &self,
        arg: &FieldArg,
        out: &mut dyn FnMut(Value<'_>) -> bool,
        pick: for<'p> fn(&ProcInfo<'p>) -> Value<'p>,
    ) {
        let Some(mut p) = self.proc().copied() else { return };
        let want = arg.index();
        for depth in 1..=64u32 {
            if p.ppid == 0 || p.ppid == p.pid {
                return;
            }
            let Some(parent) = self.state.process_by_pid(p.ppid) else { return };
            match want {
                Some(n) if n == depth => {
                    out(pick(&parent));
                    return;
                }
                Some(_) => {}
                None => {
                    if out(pick(&parent)) {
                        return;
                    }
                }
            }
            p = parent;
        }
    }
}

/// The tag of an image reference ("busybox:1.36" → "1.36"), if it has one.
fn image_tag(image: &str) -> Option<&str> {
    let name = image.split('@').next()?;
    let last = name.rsplit('/').next()?;
    last.split_once(':').map(|(_, t)| t)
}

/// What Falco writes for a name it could not find (user.name, user.loginname...).
const NA: &str = "<NA>";

impl<'a, S: StateView + ?Sized> Source<'a, S> {
    /// When the process's pid namespace started (ns since the epoch): the host's boot
    /// time outside a pid namespace, else the start of the namespace's init (the
    /// nearest ancestor whose pid there is 1), as Falco's container.start_ts.
    fn pidns_start(&self) -> Option<u64> {
        let p = self.proc()?;
        if p.vpid.is_none_or(|v| v == p.pid) {
            return (self.boot_epoch_ns != 0).then_some(self.boot_epoch_ns);
        }
        // Falco adds the init's start (monotonic) to /proc/stat's btime, whole seconds.
        let mut cur = *p;
        for _ in 0..64 {
            if cur.vpid == Some(1) {
                return cur.start_ns.map(|t| t + self.boot_epoch_ns);
            }
            if cur.ppid == 0 || cur.ppid == cur.pid {
                return None;
            }
            cur = self.state.process_by_pid(cur.ppid)?;
        }
        None
    }

    /// Falco's fd.name and fd.directory of an event with no fd to name: a failed
    /// open names the path it was given (made absolute); another event that uses
    /// an fd in Falco's table, the empty name (directory "/").
    fn fd_name_without_fd(&self, field: Field, out: &mut dyn FnMut(Value<'_>) -> bool) {
        let Some(v) = self.view else { return };
        if field == Field::FdFilename || !harrier_schema::falco_params::uses_fd(v.syscall.name) {
            return;
        }
        if let Some(p) = harrier_schema::falco_params::params(v.syscall.name)
            .filter(|_| family::of(v.syscall.nr).contains(Family::OPEN))
            .and_then(|ps| ps.iter().find(|p| p.name == "name"))
        {
            return self.with_scratch(out, |s| {
                self.falco_arg(v, p, s, false);
                if field == Field::FdDirectory {
                    match s.rfind('/') {
                        Some(i) if i > 0 => s.truncate(i),
                        _ => *s = "/".into(),
                    }
                }
            });
        }
        out(Value::str(if field == Field::FdDirectory { "/" } else { "" }));
    }

    /// Is the client end of this socket the local one, as Falco decides: its
    /// address is one of the host's interfaces, and never in a container
    /// (Falco would compare it with the container's IP, which is not known here).
    fn client_local(&self, t: &crate::view::Tuple) -> bool {
        let host = self.proc().is_some_and(|p| p.container_id.is_empty());
        host && self.ifaddrs.contains(&t.cip)
    }

    /// The process whose pid is `id(p)` (Falco's session or process group leader):
    /// looked up by pid outside a pid namespace, else (or when gone) the oldest of
    /// the unbroken line of ancestors sharing the id.
    fn leader(&self, p: &ProcInfo<'a>, id: fn(&ProcInfo<'_>) -> Option<u32>) -> Option<ProcInfo<'a>> {
        let want = id(p)?;
        if p.vpid.is_none_or(|v| v == p.pid) {
            if let Some(l) = self.state.process_by_pid(want) {
                return Some(l);
            }
        }
        let mut found = None;
        let mut cur = *p;
        for _ in 0..64 {
            if cur.ppid == 0 || cur.ppid == cur.pid {
                break;
            }
            let Some(parent) = self.state.process_by_pid(cur.ppid) else { break };
            if id(&parent) != Some(want) {
                break;
            }
            found = Some(parent);
            cur = parent;
        }
        found
    }
}

fn cmdline<'x>(p: &ProcInfo<'x>, s: &mut String) {
    s.push_str(&String::from_utf8_lossy(p.comm));
    for a in p.args.split(|&c| c == 0).filter(|a| !a.is_empty()) {
        s.push(' ');
        s.push_str(&String::from_utf8_lossy(a));
    }
}

/// A container mount by index, or the first whose source (`by_dest`: whose
/// destination) matches the key as a glob, as Falco's container.mount* fields.
fn mount_by<'m>(
    mounts: &'m [harrier_state::Mount],
    arg: &FieldArg,
    by_dest: bool,
) -> Option<&'m harrier_state::Mount> {
    match arg {
        FieldArg::Index(i) => mounts.get(*i as usize),
        FieldArg::Key(k) => mounts.iter().find(|m| {
            let path = if by_dest { &m.dest } else { &m.source };
            harrier_rules::matchers::glob(k.as_bytes(), path.as_bytes(), false)
        }),
        FieldArg::None | FieldArg::Plugin(_) => None,
    }
}

fn opt_u64(v: Option<u32>) -> Option<Value<'static>> {
    v.map(|n| Value::U64(n as u64))
}

impl<S: StateView + ?Sized> EventSource for Source<'_, S> {
    fn event_type(&self) -> EventType {
        self.ty
    }

    fn extract(&self, field: Field, arg: &FieldArg, out: &mut dyn FnMut(Value<'_>) -> bool) {
        use Field::*;
        let view = self.view;
        let one = |out: &mut dyn FnMut(Value<'_>) -> bool, v: Option<Value<'_>>| {
            if let Some(v) = v {
                out(v);
            }
        };
        match field {
            EvtNum => one(out, Some(Value::U64(self.num))),
            EvtTime => self.time(out, "%H:%M:%S%.9f"),
            EvtTimeS => self.time(out, "%H:%M:%S"),
            EvtTimeIso8601 => self.time(out, "%Y-%m-%dT%H:%M:%S%.9fZ"),
            EvtDatetime => self.time(out, "%Y-%m-%d %H:%M:%S%.9f"),
            EvtRawtime => one(out, Some(Value::U64(self.wall_ns))),
            EvtRawtimeS => one(out, Some(Value::U64(self.wall_ns / 1_000_000_000))),
            EvtRawtimeNs => one(out, Some(Value::U64(self.wall_ns % 1_000_000_000))),
            EvtReltime => one(out, Some(Value::U64(self.wall_ns.saturating_sub(self.capture_start_ns)))),
            EvtHostname => one(out, Some(Value::str(self.host))),
            EvtType => one(out, Some(Value::str(self.ty.name()))),
            EvtTypeIs => {
                let is = arg.key().is_some_and(|k| k == self.ty.name());
                one(out, Some(Value::U64(is as u64)))
            }
            EvtDir => one(out, Some(Value::str("<"))), // exit events, as Falco writes them
            EvtSource => one(out, Some(Value::str("syscall"))),
            EvtArg | EvtRawarg => {
                let Some(v) = view else { return };
                // Falco's parameter lists where they are mapped: its names, its text.
                if let (EvtArg, Some(ps)) = (field, harrier_schema::falco_params::params(v.syscall.name)) {
                    let p = match arg {
                        FieldArg::Index(i) => ps.get(*i as usize),
                        FieldArg::Key(k) => ps.iter().find(|p| p.name == &**k),
                        FieldArg::None | FieldArg::Plugin(_) => None,
                    };
                    if let Some(p) = p {
                        self.with_scratch(out, |s| self.falco_arg(v, p, s, false));
                    }
                    return;
                }
                let i = match arg {
                    FieldArg::Index(i) => Some(*i as usize),
                    FieldArg::Key(k) => v.index_of(harrier_rules::fields::harrier_param_name(k)),
                    FieldArg::None | FieldArg::Plugin(_) => None,
                };
                match i {
                    Some(i) => self.param_value(i, field == EvtRawarg, out),
                    None if arg.key().map(harrier_rules::fields::harrier_param_name) == Some("ret") => {
                        if !v.header.no_ret {
                            out(Value::S64(v.ret));
                        }
                    }
                    // Falco's execve exit calls the executable's flags `flags` (execveat has
                    // its own `flags`, found above).
                    None if arg.key() == Some("flags") => {
                        if let Some(Param::UInt(bits)) = v.named("exe_flags") {
                            let raw = field == EvtRawarg;
                            out(if raw {
                                Value::U64(bits)
                            } else {
                                Value::Flags { bits, renderer: "exe_flags" }
                            });
                        }
                    }
                    None => {}
                }
            }
            EvtArgs | EvtInfo => {
                let Some(v) = view else { return };
                if let Some(ps) = harrier_schema::falco_params::params(v.syscall.name) {
                    return self.with_scratch(out, |s| {
                        for (i, p) in ps.iter().enumerate() {
                            if i > 0 {
                                s.push(' ');
                            }
                            s.push_str(p.name);
                            s.push('=');
                            self.falco_arg(v, p, s, true);
                        }
                    });
                }
                self.with_scratch(out, |s| {
                    for i in 0..v.len() {
                        let name = v.name_of(i).unwrap_or("?");
                        if !s.is_empty() {
                            s.push(' ');
                        }
                        match v.param(i) {
                            Param::Bytes(b) => {
                                let _ = write!(s, "{name}={}", String::from_utf8_lossy(b));
                            }
                            Param::Missing => {}
                            p => {
                                let _ = write!(s, "{name}={}", p.as_i64().unwrap_or(0));
                            }
                        }
                    }
                });
            }
            EvtBuffer | EvtBuflen => {
                let Some(Param::Bytes(b)) = view.and_then(|v| v.known(Known::Data)) else { return };
                one(out, Some(if field == EvtBuffer { Value::Str(b) } else { Value::U64(b.len() as u64) }))
            }
            // Falco: SUCCESS, the errno's name, or the number when it has none.
            EvtRes => {
                // A legacy exit without a return value has none (Falco: has_return_value()).
                let Some(v) = view.filter(|v| !v.header.no_ret) else { return };
                match (v.ret >= 0, harrier_schema::falco::errno_name(-v.ret)) {
                    (true, _) => one(out, Some(Value::str("SUCCESS"))),
                    (false, Some(name)) => one(out, Some(Value::str(name))),
                    (false, None) => self.with_scratch(out, |s| {
                        let _ = write!(s, "{}", v.ret);
                    }),
                }
            }
            EvtRawres => one(out, view.filter(|v| !v.header.no_ret).map(|v| Value::S64(v.ret))),
            EvtFailed => one(out, view.filter(|v| !v.header.no_ret).map(|v| Value::Bool(v.ret < 0))),
            EvtIsOpenRead | EvtIsOpenWrite | EvtIsOpenExec | EvtIsOpenCreate => {
                let flags = self.cache.open_flags.get_or_init(|| view.and_then(|v| open_flags(v)));
                let Some((flags, mode)) = *flags else { return };
                let acc = flags & 3;
                let creat = flags & 0o100 != 0;
                let b = match field {
                    EvtIsOpenRead => acc == 0 || acc == 2,
                    EvtIsOpenWrite => acc == 1 || acc == 2,
                    EvtIsOpenCreate => creat,
                    _ => creat && mode & 0o111 != 0,
                };
                one(out, Some(Value::Bool(b)))
            }
            ProcPid => one(out, self.proc().map(|p| Value::U64(p.pid as u64))),
            ProcPpid => one(out, self.proc().map(|p| Value::U64(p.ppid as u64))),
            ProcName => one(out, self.proc().map(|p| Value::Str(p.comm))),
            ProcExe => one(out, self.proc().map(|p| Value::Str(p.exe))),
            ProcExepath => one(out, self.proc().map(|p| Value::Str(p.exepath))),
            // Falco keeps a cwd with a trailing '/' (threadinfo's set_cwd).
            ProcCwd => {
                let Some(p) = self.proc().filter(|p| !p.cwd.is_empty()) else { return };
                if p.cwd.ends_with(b"/") {
                    return one(out, Some(Value::Str(p.cwd)));
                }
                self.with_scratch(out, |s| {
                    s.push_str(&String::from_utf8_lossy(p.cwd));
                    s.push('/');
                })
            }
            ProcArgs => {
                let Some(p) = self.proc() else { return };
                self.with_scratch(out, |s| {
                    for (i, a) in p.args.split(|&c| c == 0).filter(|a| !a.is_empty()).enumerate() {
                        if i > 0 {
                            s.push(' ');
                        }
                        s.push_str(&String::from_utf8_lossy(a));
                    }
                })
            }
            ProcEnv => {
                let Some(p) = self.proc() else { return };
                match arg.key() {
                    Some(k) => {
                        let hit = p.env.split(|&c| c == 0).find_map(|kv| {
                            kv.strip_prefix(k.as_bytes()).and_then(|rest| rest.strip_prefix(b"="))
                        });
                        one(out, hit.map(Value::Str))
                    }
                    None => self.with_scratch(out, |s| {
                        for (i, kv) in p.env.split(|&c| c == 0).filter(|a| !a.is_empty()).enumerate() {
                            if i > 0 {
                                s.push(' ');
                            }
                            s.push_str(&String::from_utf8_lossy(kv));
                        }
                    }),
                }
            }
            ProcCmdline | ProcExeline => {
                let Some(p) = self.proc() else { return };
                self.with_scratch(out, |s| cmdline(p, s))
            }
            ProcPname | ProcPexe | ProcPexepath | ProcPcmdline => {
                let Some(p) = self.proc() else { return };
                let Some(parent) = self.state.process_by_pid(p.ppid).filter(|_| p.ppid != 0) else { return };
                match field {
                    ProcPname => one(out, Some(Value::Str(parent.comm))),
                    ProcPexe => one(out, Some(Value::Str(parent.exe))),
                    ProcPexepath => one(out, Some(Value::Str(parent.exepath))),
                    _ => self.with_scratch(out, |s| cmdline(&parent, s)),
                }
            }
            ProcAname => self.ancestors(arg, out, |p| Value::Str(p.comm)),
            ProcApid => self.ancestors(arg, out, |p| Value::U64(p.pid as u64)),
            ProcAexe => self.ancestors(arg, out, |p| Value::Str(p.exe)),
            ProcAexepath => self.ancestors(arg, out, |p| Value::Str(p.exepath)),
            ProcAcmdline => self.ancestors(arg, out, |p| Value::Str(p.comm)),
            ProcIsExeUpperLayer => one(out, self.proc().and_then(|p| p.exe_upper_layer).map(Value::Bool)),
            ProcIsExeFromMemfd => one(out, self.proc().and_then(|p| p.exe_from_memfd).map(Value::Bool)),
            ProcIsExeWritable => one(out, self.proc().and_then(|p| p.exe_writable).map(Value::Bool)),
            ProcIsExeLowerLayer => one(out, self.proc().and_then(|p| p.exe_lower_layer).map(Value::Bool)),
            ProcSname | ProcSidExe | ProcSidExepath | ProcVpgidName | ProcVpgidExe | ProcVpgidExepath => {
                let Some(p) = self.proc() else { return };
                let by_sid = matches!(field, ProcSname | ProcSidExe | ProcSidExepath);
                // Falco gives an empty string, not "no value", when the leader is unknown.
                let leader = if by_sid { self.leader(p, |q| q.sid) } else { self.leader(p, |q| q.vpgid) };
                let v = leader.map_or(&b""[..], |l| match field {
                    ProcSname | ProcVpgidName => l.comm,
                    ProcSidExe | ProcVpgidExe => l.exe,
                    _ => l.exepath,
                });
                one(out, Some(Value::Str(v)))
            }
            ProcSid => one(out, self.proc().and_then(|p| opt_u64(p.sid))),
            ProcTty => one(out, self.proc().and_then(|p| opt_u64(p.tty))),
            ProcVpid => one(out, self.proc().and_then(|p| opt_u64(p.vpid))),
            ProcVpgid => one(out, self.proc().and_then(|p| opt_u64(p.vpgid))),
            ProcIsVpgidLeader => one(out, self.proc().and_then(|p| Some(Value::Bool(p.vpgid? == p.vpid?)))),
            ProcIsSidLeader => one(out, self.proc().and_then(|p| Some(Value::Bool(p.sid? == p.pid)))),
            ProcPidTs => {
                one(out, self.proc().and_then(|p| p.start_ns).map(|t| Value::U64(t + self.epoch_offset)))
            }
            ProcPpidTs => {
                let Some(p) = self.proc() else { return };
                let parent = self.state.process_by_pid(p.ppid).filter(|_| p.ppid != 0);
                one(out, parent.and_then(|q| q.start_ns).map(|t| Value::U64(t + self.epoch_offset)))
            }
            // start_ns is on the events' clock; wall_ns is that clock plus epoch_offset.
            ProcDuration => one(
                out,
                self.proc()
                    .and_then(|p| p.start_ns)
                    .map(|s| Value::U64(self.wall_ns.saturating_sub(s + self.epoch_offset))),
            ),
            // Conditions on these compile to address lookups (harrier_rules::dns). As
            // output fields, as in Falco: the rules' name the address belongs to, if any
            // (no DNS query here).
            FdSipName | FdCipName | FdLipName | FdRipName => {
                let (Some(dns), Some(t)) = (self.dns, self.fd().and_then(|f| f.tuple)) else { return };
                let ip = match field {
                    FdSipName => t.sip,
                    FdCipName => t.cip,
                    FdLipName => {
                        if self.client_local(&t) {
                            t.cip
                        } else {
                            t.sip
                        }
                    }
                    _ => {
                        if self.client_local(&t) {
                            t.sip
                        } else {
                            t.cip
                        }
                    }
                };
                if let Some(name) = dns.name_of(ip) {
                    out(Value::str(&name));
                }
            }
            FdConnected | FdIsConnected => one(out, self.fd().map(|f| Value::Bool(f.tuple.is_some()))),
            ThreadTid => one(out, Some(Value::U64(self.tid as u64))),
            ThreadIsmain => one(out, self.proc().map(|p| Value::Bool(p.pid == self.tid))),
            ThreadCapEffective | ThreadCapPermitted | ThreadCapInheritable => one(
                out,
                self.proc()
                    .and_then(|p| match field {
                        ThreadCapEffective => p.cap_effective,
                        ThreadCapPermitted => p.cap_permitted,
                        _ => p.cap_inheritable,
                    })
                    .map(|c| Value::Flags { bits: c, renderer: "capabilities" }),
            ),
            // Falco's user and group are the effective ids; a name it cannot find is
            // "<NA>" (uid or gid 0: "root"), a value, never "no value".
            UserUid => one(out, self.proc().and_then(|p| opt_u64(p.euid))),
            UserName | UserHomedir | UserShell => {
                let Some(uid) = self.proc().and_then(|p| p.euid) else { return };
                let v = match (self.state.user(uid), field) {
                    (Some(u), UserName) => u.name,
                    (Some(u), UserHomedir) => u.home,
                    (Some(u), _) => u.shell,
                    (None, UserName) if uid == 0 => "root",
                    (None, UserHomedir) if uid == 0 => "/root",
                    (None, _) => NA,
                };
                one(out, Some(Value::str(v)))
            }
            UserLoginuid => {
                one(out, self.proc().and_then(|p| p.loginuid).map(|l| Value::S64(l as i32 as i64)))
            }
            UserLoginname => {
                let Some(l) = self.proc().and_then(|p| p.loginuid) else { return };
                let name = match self.state.user(l).filter(|_| l != u32::MAX) {
                    Some(u) => u.name,
                    None if l == 0 => "root",
                    None => NA,
                };
                one(out, Some(Value::str(name)))
            }
            GroupGid => one(out, self.proc().and_then(|p| opt_u64(p.egid))),
            GroupName => {
                let Some(gid) = self.proc().and_then(|p| p.egid) else { return };
                let name = match self.state.group(gid) {
                    Some(g) => g,
                    None if gid == 0 => "root",
                    None => NA,
                };
                one(out, Some(Value::str(name)))
            }
            ContainerId | ContainerFullId => {
                let Some(p) = self.proc() else { return };
                let id = match (p.container_id.is_empty(), field) {
                    (true, _) => "host",
                    (false, ContainerId) => p.container_id,
                    (false, _) => p.container_full_id,
                };
                one(out, Some(Value::str(id)))
            }
            // The host, as Falco's container plugin describes it: id and name "host",
            // empty image fields, not privileged, no mounts.
            ContainerName
            | ContainerImage
            | ContainerImageRepository
            | ContainerImageId
            | ContainerImageTag
            | ContainerImageDigest
            | ContainerPrivileged
            | ContainerType => {
                let Some(p) = self.proc() else { return };
                if p.container_id.is_empty() {
                    return one(
                        out,
                        Some(match field {
                            ContainerName | ContainerType => Value::str("host"),
                            ContainerPrivileged => Value::Bool(false),
                            _ => Value::str(""),
                        }),
                    );
                }
                let Some(c) = self.state.container(self.tid) else { return };
                let v = match field {
                    // A container the runtime's files did not name: no name, as in Falco.
                    ContainerName => Some(Value::str(c.name)).filter(|_| !c.name.is_empty()),
                    ContainerImage => Some(Value::str(c.image)).filter(|_| !c.image.is_empty()),
                    ContainerImageRepository => {
                        Some(Value::str(c.image_repository)).filter(|_| !c.image_repository.is_empty())
                    }
                    ContainerImageTag => image_tag(c.image).map(Value::str),
                    ContainerType => Some(Value::str(c.runtime)),
                    ContainerImageId | ContainerImageDigest => None,
                    _ => c.privileged.map(Value::Bool),
                };
                one(out, v)
            }
            // Falco: no value for 0; durations as it computes them (u64, unchecked).
            ProcExeInoCtime | ProcExeInoMtime => {
                let Some(p) = self.proc() else { return };
                let t = if field == ProcExeInoCtime { p.exe_ctime } else { p.exe_mtime };
                one(out, (t != 0).then_some(Value::U64(t)))
            }
            ProcExeInoCtimeDurationProcStart => {
                let Some(p) = self.proc().filter(|p| p.exe_ctime != 0) else { return };
                let Some(start) = p.start_ns else { return };
                let d = (start + self.epoch_offset).wrapping_sub(p.exe_ctime);
                one(out, (d != 0).then_some(Value::U64(d)))
            }
            ProcExeInoCtimeDurationPidnsStart => {
                let Some(ctime) = self.proc().map(|p| p.exe_ctime).filter(|&c| c != 0) else { return };
                let Some(ns) = self.pidns_start() else { return };
                one(out, (ctime > ns).then_some(Value::U64(ctime - ns)))
            }
            ContainerStartTs | ContainerDuration | ProcPidnsInitStartTs => {
                let Some(start) = self.pidns_start() else { return };
                let v = if field == ContainerDuration { self.wall_ns.saturating_sub(start) } else { start };
                one(out, Some(Value::U64(v)))
            }
            K8sNsName | K8sPodName | K8sPodId | K8sPodUid | K8sPodSandboxId | K8sPodFullSandboxId => {
                let Some(c) = self.state.container(self.tid) else { return };
                let v = match field {
                    K8sNsName => c.pod_namespace,
                    K8sPodName => c.pod_name,
                    K8sPodId | K8sPodUid => c.pod_uid,
                    // Falco shortens ids as it does container.id.
                    K8sPodSandboxId => &c.pod_sandbox_id[..c.pod_sandbox_id.len().min(12)],
                    _ => c.pod_sandbox_id,
                };
                // Outside Kubernetes these have no value: comparisons on them are false.
                one(out, Some(Value::str(v)).filter(|_| !v.is_empty()))
            }
            ContainerMounts => {
                let Some(c) = self.state.container(self.tid) else {
                    // The host has no mounts: an empty list, as Falco's plugin says.
                    return one(
                        out,
                        self.proc().filter(|p| p.container_id.is_empty()).map(|_| Value::str("")),
                    );
                };
                self.with_scratch(out, |s| {
                    for (i, m) in c.mounts.iter().enumerate() {
                        let _ = write!(s, "{}{m}", if i > 0 { "," } else { "" });
                    }
                })
            }
            ContainerMount
            | ContainerMountSource
            | ContainerMountDest
            | ContainerMountMode
            | ContainerMountRdwr
            | ContainerMountPropagation => {
                let Some(c) = self.state.container(self.tid) else { return };
                let Some(m) = mount_by(c.mounts, arg, field == ContainerMountSource) else { return };
                match field {
                    ContainerMount => self.with_scratch(out, |s| {
                        let _ = write!(s, "{m}");
                    }),
                    ContainerMountSource => one(out, Some(Value::str(&m.source))),
                    ContainerMountDest => one(out, Some(Value::str(&m.dest))),
                    ContainerMountMode => one(out, Some(Value::str(&m.mode))),
                    ContainerMountRdwr => one(out, Some(Value::str(if m.rdwr { "true" } else { "false" }))),
                    _ => one(out, Some(Value::str(&m.propagation))),
                }
            }
            FdNameChanged => one(out, self.fd().map(|_| Value::Bool(self.state.fd_name_changed()))),
            FdNum => {
                let n = self.fd().map(|f| f.num).or_else(|| {
                    let v = view?;
                    match v.known(Known::Fd) {
                        Some(p) => p.as_i64().map(|n| n as i32),
                        None => (v.ret >= 0 && self.event_fd_name().is_some()).then_some(v.ret as i32),
                    }
                });
                one(out, n.map(|n| Value::S64(n as i64)))
            }
            FdNameraw => {
                // The path as the caller passed it (open's `path`), unlike fd.name.
                let raw = view.and_then(|v| match v.known(Known::Path) {
                    Some(Param::Bytes(b)) if !b.is_empty() => Some(b),
                    _ => None,
                });
                let name = raw.or_else(|| self.event_fd_name()).or_else(|| self.fd().map(|f| f.name));
                one(out, name.filter(|n| !n.is_empty()).map(Value::Str))
            }
            FdName | FdDirectory | FdFilename => {
                let name = self.event_fd_name().or_else(|| self.fd().map(|f| f.name));
                let Some(name) = name.filter(|n| !n.is_empty()) else {
                    return self.fd_name_without_fd(field, out);
                };
                // Falco: no directory for an fd that is no file or directory (a pipe).
                if field == FdDirectory
                    && self.fd().is_some_and(|f| !matches!(f.type_name, "file" | "directory"))
                {
                    return;
                }
                let v = match field {
                    FdDirectory => {
                        let cut = name.iter().rposition(|&c| c == b'/').unwrap_or(0);
                        Value::Str(if cut == 0 { b"/" } else { &name[..cut] })
                    }
                    FdFilename => {
                        Value::Str(&name[name.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1)..])
                    }
                    _ => Value::Str(name),
                };
                one(out, Some(v))
            }
            FdType | FdTypechar => {
                let t = match self.fd() {
                    Some(f) => Some((f.type_name, f.typechar)),
                    // An open whose fd is gone: typed as the state typed it.
                    None => self.event_fd_name().map(|n| {
                        let t = harrier_state::fd::type_of_open(n, false);
                        (t.name(), crate::state::typechar_str(t))
                    }),
                };
                one(out, t.map(|(name, c)| Value::str(if field == FdType { name } else { c })))
            }
            FdIp | FdCip | FdSip | FdPort | FdCport | FdSport | FdL4proto | FdSockfamily | FdIsServer
            | FdNet | FdCnet | FdSnet | FdLip | FdRip | FdLport | FdRport | FdLnet | FdRnet => {
                let Some(f) = self.fd() else { return };
                if field == FdSockfamily {
                    return one(out, f.sockfamily.map(Value::str));
                }
                // Falco: every fd has a protocol, "<NA>" unless an inet socket's.
                let Some(t) = f.tuple else {
                    return one(out, (field == FdL4proto).then_some(Value::str("<NA>")));
                };
                match field {
                    FdIp | FdNet => {
                        if !out(Value::Ip(t.cip)) {
                            out(Value::Ip(t.sip));
                        }
                    }
                    FdCip | FdCnet => one(out, Some(Value::Ip(t.cip))),
                    FdSip | FdSnet => one(out, Some(Value::Ip(t.sip))),
                    FdPort => {
                        if !out(Value::U64(t.cport as u64)) {
                            out(Value::U64(t.sport as u64));
                        }
                    }
                    FdCport => one(out, Some(Value::U64(t.cport as u64))),
                    FdSport => one(out, Some(Value::U64(t.sport as u64))),
                    FdL4proto => one(out, Some(Value::str(t.l4proto))),
                    // Local and remote as Falco has them: the client end is local when its
                    // address is the host's (libsinsp's is_ipv4addr_in_local_machine).
                    FdLip | FdLnet => {
                        one(out, Some(Value::Ip(if self.client_local(&t) { t.cip } else { t.sip })))
                    }
                    FdRip | FdRnet => {
                        one(out, Some(Value::Ip(if self.client_local(&t) { t.sip } else { t.cip })))
                    }
                    FdLport => one(
                        out,
                        Some(Value::U64(if self.client_local(&t) { t.cport } else { t.sport } as u64)),
                    ),
                    FdRport => one(
                        out,
                        Some(Value::U64(if self.client_local(&t) { t.sport } else { t.cport } as u64)),
                    ),
                    // Falco: the server end's address is this machine's (never in a container).
                    _ => {
                        let host = self.proc().is_some_and(|p| p.container_id.is_empty());
                        one(out, Some(Value::Bool(host && self.ifaddrs.contains(&t.sip))))
                    }
                }
            }
            FsPathName | FsPathNameraw => self.fs_path(
                &["path", "pathname", "newpath", "linkpath", "target"],
                field == FsPathNameraw,
                out,
            ),
            FsPathSource | FsPathSourceraw => {
                self.fs_path(&["oldpath", "target"], field == FsPathSourceraw, out)
            }
            FsPathTarget | FsPathTargetraw => {
                self.fs_path(&["newpath", "linkpath"], field == FsPathTargetraw, out)
            }
            _ => {}
        }
    }
}
