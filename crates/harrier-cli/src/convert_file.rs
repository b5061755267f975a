//! `harrier convert IN OUT`: a legacy capture as a Harrier capture file. The
//! legacy process list (which arrives just before the first event) becomes
//! the file's start snapshot; events follow as wire records or foreign events.

use anyhow::Context;
use harrier_capfile::{FileInfo, ForeignEvent, Options, Writer};
use harrier_scap::snapshot::{FdKind, FdSnapshot, ProcessSnapshot};
use harrier_scap::{Converted, Converter, Snapshot as Legacy, Stats};
use harrier_state::snapshot::{SnapFd, SnapGroup, SnapProcess, SnapTuple, SnapUser, Snapshot};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::net::IpAddr;
use std::path::Path;

fn fd_type(k: &FdKind) -> &'static str {
    match k {
        FdKind::File => "file",
        FdKind::Directory => "directory",
        FdKind::Ipv4Socket | FdKind::Ipv4Server => "ipv4",
        FdKind::Ipv6Socket | FdKind::Ipv6Server => "ipv6",
        FdKind::Fifo => "pipe",
        FdKind::Unix => "unix",
        FdKind::Event => "event",
        FdKind::Signalfd => "signalfd",
        FdKind::Eventpoll => "eventpoll",
        FdKind::Inotify => "inotify",
        FdKind::Timerfd => "timerfd",
        FdKind::Netlink => "netlink",
        FdKind::Memfd => "memfd",
        _ => "unknown",
    }
}

fn ip16(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&v4.octets());
            b
        }
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn fd(f: &FdSnapshot) -> SnapFd {
    SnapFd {
        fd: f.fd as i32,
        typ: fd_type(&f.kind).to_string(),
        cloexec: false,
        flags: f.open_flags,
        name: f.name.clone(),
        tuple: f.tuple.as_ref().map(|t| SnapTuple {
            v6: t.sip.is_ipv6(),
            l4: t.l4proto.clone(),
            sip: ip16(t.sip),
            dip: ip16(t.dip),
            sport: t.sport,
            dport: t.dport,
            server: matches!(f.kind, FdKind::Ipv4Server | FdKind::Ipv6Server),
        }),
    }
}

/// Legacy entries are per thread; the snapshot's are per process.
fn add_thread(procs: &mut BTreeMap<u32, SnapProcess>, t: &ProcessSnapshot) {
    let pid = t.pid as u32;
    let p = procs.entry(pid).or_insert_with(|| SnapProcess {
        pid,
        ppid: t.ppid as u32,
        vpid: if t.vpid >= 0 { t.vpid as u32 } else { pid },
        vpgid: t.vpgid.max(0) as u32,
        sid: t.sid.max(0) as u32,
        comm: t.comm.clone(),
        exe: t.exe.clone(),
        exepath: t.exepath.clone(),
        args: t.args.join("\0"),
        cwd: t.cwd.clone(),
        uid: t.uid,
        gid: t.gid,
        euid: t.uid,
        egid: t.gid,
        loginuid: t.loginuid,
        tty: t.tty,
        cap_effective: t.cap_effective,
        cap_permitted: t.cap_permitted,
        cap_inheritable: t.cap_inheritable,
        exe_ctime: t.exe_ino_ctime,
        exe_mtime: t.exe_ino_mtime,
        container: t.container_id.clone(),
        ..SnapProcess::default()
    });
    p.tids.push(t.tid as u32);
    p.fds.extend(t.fds.iter().map(fd));
}

/// Converts `input` into a capture file at `output`; returns the converter's stats.
pub fn write(input: &Path, output: &Path, level: Option<i32>, packed: bool) -> anyhow::Result<Stats> {
    let conv = Converter::open(input).with_context(|| input.display().to_string())?;
    let file = std::fs::File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let mut info = FileInfo {
        host: String::new(),
        kernel: String::new(),
        epoch_offset: 0, // legacy timestamps are wall-clock already
        writer: format!("harrier {} convert", env!("CARGO_PKG_VERSION")),
        settings: serde_json::json!({ "converted_from": input.display().to_string() }),
    };
    let opts = Options { compression: level, packed, ..Options::default() };
    // The header is written once the machine block (first in the file) named the host.
    let mut file = Some(BufWriter::new(file));
    let mut w: Option<Writer<BufWriter<std::fs::File>>> = None;
    let mut snap = Snapshot::default();
    let mut procs = BTreeMap::new();
    let mut snapshot_written = false;
    let stats = conv
        .run(|item| {
            match &item {
                Converted::Snapshot(Legacy::Machine(m)) => {
                    info.host = m.hostname.clone();
                    return Ok(());
                }
                // Network interfaces describe the machine, not its activity:
                // kept in the settings when they come before the header.
                Converted::Snapshot(Legacy::Interfaces(ifs)) if w.is_none() => {
                    let names: Vec<String> = ifs.iter().map(|i| format!("{} {}", i.name, i.addr)).collect();
                    info.settings["interfaces"] = serde_json::json!(names);
                    return Ok(());
                }
                _ => {}
            }
            if w.is_none() {
                w = Some(Writer::new(file.take().expect("one writer"), &info, opts)?);
            }
            let w = w.as_mut().expect("created above");
            if matches!(item, Converted::Event(_) | Converted::Foreign(_)) && !snapshot_written {
                snap.processes = std::mem::take(&mut procs).into_values().collect();
                w.snapshot(&snap)?;
                snapshot_written = true;
            }
            match item {
                Converted::Event(b) => w.event(b)?,
                Converted::Foreign(f) => {
                    w.foreign(&ForeignEvent { ts: f.ts, tid: f.tid, name: f.name, params: f.params })?
                }
                Converted::Snapshot(Legacy::Process(p)) if !snapshot_written => add_thread(&mut procs, &p),
                Converted::Snapshot(Legacy::Users(us)) if !snapshot_written => {
                    snap.users.extend(us.into_iter().map(|u| SnapUser {
                        uid: u.uid,
                        name: u.name,
                        home: u.home,
                        shell: u.shell,
                    }))
                }
                Converted::Snapshot(Legacy::Groups(gs)) if !snapshot_written => {
                    snap.groups.extend(gs.into_iter().map(|g| SnapGroup { gid: g.gid, name: g.name }))
                }
                // Later table changes (users added, proc info): foreign events, never dropped.
                Converted::Snapshot(other) => {
                    // Named as Falco's events for the same facts.
                    let (ts, tid, name) = match &other {
                        Legacy::UserAdded(ts, _) => (*ts, 0, "useradded"),
                        Legacy::GroupAdded(ts, _) => (*ts, 0, "groupadded"),
                        Legacy::ProcInfo { ts, tid, .. } => (*ts, *tid as u32, "procinfo"),
                        _ => (0, 0, "snapshot"),
                    };
                    let params = vec![("item".to_string(), format!("{other:?}"))];
                    w.foreign(&ForeignEvent { ts, tid, name: name.into(), params })?
                }
            }
            Ok(())
        })
        .with_context(|| input.display().to_string())?;
    let mut w = match w {
        Some(w) => w,
        None => Writer::new(file.take().expect("unused"), &info, opts)?,
    };
    if !snapshot_written {
        snap.processes = procs.into_values().collect();
        w.snapshot(&snap)?;
    }
    let (mut out, _) = w.finish()?;
    out.flush().with_context(|| format!("writing {}", output.display()))?;
    Ok(stats)
}
