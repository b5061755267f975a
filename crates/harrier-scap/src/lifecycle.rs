//! Life-cycle records synthesised from legacy clone/fork/vfork and execve
//! exits, so that a converted capture's state follows its processes as a
//! live one does (the sensor gets them from the sched tracepoints): a thread
//! born during the capture gets its process, comm and fd table from its
//! parent, an exec renames it, a procexit frees it. Laid out as
//! harrier_schema::wire's META_FORK, META_EXEC and META_EXIT records.

use crate::error::trim_nul;
use crate::event::LegacyEvent;
use harrier_schema::wire::{FORK_SHARES_FILES, META_EXEC, META_EXIT, META_FORK, PARAMS_BASE};

const CLONE_FILES: u64 = 0x400;
const CLONE_THREAD: u64 = 0x10000;

fn header(out: &mut Vec<u8>, ts: u64, tid: u32, kind: u16) {
    out.clear();
    out.extend_from_slice(&ts.to_le_bytes());
    out.extend_from_slice(&tid.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // len, set by finish
    out.extend_from_slice(&0i64.to_le_bytes()); // ret
    debug_assert_eq!(out.len(), PARAMS_BASE);
}

fn finish(out: &mut [u8]) {
    let len = out.len() as u16;
    out[14..16].copy_from_slice(&len.to_le_bytes());
}

/// The 16-byte comm field: the exit's comm parameter, cut and NUL padded.
fn comm(out: &mut Vec<u8>, ev: &LegacyEvent) {
    let mut c = [0u8; 16];
    if let Some((b, _)) = ev.get("comm") {
        let b = trim_nul(b);
        let n = b.len().min(15);
        c[..n].copy_from_slice(&b[..n]);
    }
    out.extend_from_slice(&c);
}

/// A fork record for a successful clone-family exit, from the child's side
/// (ret 0; the libs give the parent's tid in `ptid`) or the parent's (ret
/// the child's tid). None when the exit lacks what the record needs.
/// `tid32` maps legacy 64-bit tids as the converter does.
pub fn fork(
    out: &mut Vec<u8>,
    ev: &LegacyEvent,
    linux_flags: u64,
    tid32: impl Fn(u64) -> u32,
) -> Option<u64> {
    let res = ev.int("res")?;
    let (parent, child) = match res {
        0 => (ev.int("ptid")? as u64, ev.tid),
        r if r > 0 => (ev.tid, r as u64),
        _ => return None,
    };
    // The child's process: the parent's for a thread, else the child itself
    // (the child-side exit's `pid` is the child's process).
    let pid = if linux_flags & CLONE_THREAD != 0 {
        ev.int("pid")? as u64
    } else if res == 0 {
        ev.int("pid").map_or(child, |p| p as u64)
    } else {
        child
    };
    header(out, ev.ts, tid32(parent), META_FORK);
    out.extend_from_slice(&tid32(child).to_le_bytes());
    out.extend_from_slice(&tid32(pid).to_le_bytes());
    comm(out, ev);
    let vpid = if linux_flags & CLONE_THREAD != 0 {
        0
    } else {
        ev.int("vpid").filter(|v| *v > 0).unwrap_or(0) as u32
    };
    out.extend_from_slice(&vpid.to_le_bytes());
    let flags = if linux_flags & CLONE_FILES != 0 { FORK_SHARES_FILES } else { 0 };
    out.extend_from_slice(&flags.to_le_bytes());
    finish(out);
    Some(child)
}

/// An exec record for a successful execve/execveat exit (the new comm; the
/// cgroup is left empty: the legacy event's cgroups are per subsystem).
pub fn exec(out: &mut Vec<u8>, ev: &LegacyEvent, tid: u32) -> bool {
    if ev.int("res") != Some(0) {
        return false;
    }
    header(out, ev.ts, tid, META_EXEC);
    out.extend_from_slice(&tid.to_le_bytes());
    comm(out, ev);
    out.extend_from_slice(&0u16.to_le_bytes());
    finish(out);
    true
}

/// A fork record for a thread first met at its successful execve exit (its
/// clone happened before the capture started, or in a process the capture
/// did not follow): parent `ptid`, the thread and its process from the exit's
/// `tid`/`pid`, as the libs build a thread from that exit.
pub fn fork_before_exec(out: &mut Vec<u8>, ev: &LegacyEvent, tid32: impl Fn(u64) -> u32) -> bool {
    let (Some(0), Some(ptid), Some(pid)) = (ev.int("res"), ev.int("ptid"), ev.int("pid")) else {
        return false;
    };
    header(out, ev.ts, tid32(ptid as u64), META_FORK);
    out.extend_from_slice(&tid32(ev.tid).to_le_bytes());
    out.extend_from_slice(&tid32(pid as u64).to_le_bytes());
    comm(out, ev);
    let vpid = ev.int("vpid").filter(|v| *v > 0).unwrap_or(0) as u32;
    out.extend_from_slice(&vpid.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    finish(out);
    true
}

/// The child's pid in a fork record this module built.
pub fn fork_pid(rec: &[u8]) -> u32 {
    rec.get(PARAMS_BASE + 4..PARAMS_BASE + 8).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()))
}

/// An exit record for a legacy procexit of thread `tid` of process `pid`
/// (0 when the capture never said which process the thread was in).
pub fn exit(out: &mut Vec<u8>, ts: u64, tid: u32, pid: u32) {
    header(out, ts, tid, META_EXIT);
    out.extend_from_slice(&pid.to_le_bytes());
    finish(out);
}
