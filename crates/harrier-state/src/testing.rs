//! Event bytes as the sensor writes them, for tests and the memory
//! measurement: syscall events by name with chosen parameters (the rest
//! zero or empty), and the life-cycle events.

use harrier_schema::wire::{META_EXEC, META_EXIT, META_FORK};
use harrier_schema::{syscall_by_name, Wire};

fn event(ts: u64, tid: u32, kind: u16, ret: i64, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + body.len());
    b.extend(ts.to_le_bytes());
    b.extend(tid.to_le_bytes());
    b.extend(kind.to_le_bytes());
    b.extend(((24 + body.len()) as u16).to_le_bytes());
    b.extend(ret.to_le_bytes());
    b.extend(body);
    b
}

fn comm(c: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = c.len().min(15);
    out[..n].copy_from_slice(&c.as_bytes()[..n]);
    out
}

/// A parameter value: integers for fixed fields, bytes for variable ones.
pub enum P<'a> {
    I(i64),
    B(&'a [u8]),
}

/// A syscall exit event of `name`; parameters not given are 0 or empty.
pub fn syscall(ts: u64, tid: u32, name: &str, ret: i64, params: &[(&str, P)]) -> Vec<u8> {
    let info = syscall_by_name(name).unwrap_or_else(|| panic!("unknown syscall {name}"));
    let mut body = Vec::new();
    for d in info.params.unwrap_or_default() {
        let given = params.iter().find(|(n, _)| *n == d.name).map(|(_, v)| v);
        match (d.wire, given) {
            (Wire::I32 | Wire::U32, v) => {
                body.extend((if let Some(P::I(i)) = v { *i } else { 0 } as u32).to_le_bytes())
            }
            (Wire::I64 | Wire::U64, v) => {
                body.extend((if let Some(P::I(i)) = v { *i } else { 0 } as u64).to_le_bytes())
            }
            (Wire::Bytes, v) => {
                let b: &[u8] = if let Some(P::B(b)) = v { b } else { &[] };
                body.extend((b.len() as u16).to_le_bytes());
                body.extend(b);
            }
        }
    }
    event(ts, tid, info.nr as u16, ret, &body)
}

pub fn fork(ts: u64, parent_tid: u32, child_tid: u32, child_pid: u32, name: &str) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(child_tid.to_le_bytes());
    body.extend(child_pid.to_le_bytes());
    body.extend(comm(name));
    body.extend(child_tid.to_le_bytes()); // vpid: the init namespace's
    body.extend(0u32.to_le_bytes());
    event(ts, parent_tid, META_FORK, 0, &body)
}

/// `cgroup` root first ("/docker/abc"); sent deepest first as the kernel does.
pub fn exec(ts: u64, tid: u32, old_tid: u32, name: &str, cgroup: &str) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(old_tid.to_le_bytes());
    body.extend(comm(name));
    let mut cg = Vec::new();
    for c in cgroup.split('/').filter(|c| !c.is_empty()).rev() {
        cg.extend(c.as_bytes());
        cg.push(0);
    }
    body.extend((cg.len() as u16).to_le_bytes());
    body.extend(cg);
    event(ts, tid, META_EXEC, 0, &body)
}

pub fn exit(ts: u64, tid: u32, pid: u32) -> Vec<u8> {
    event(ts, tid, META_EXIT, 0, &pid.to_le_bytes())
}

/// A sockaddr_in as the sensor copies it: AF_INET, the port (network order), the address.
pub fn sockaddr_in(port: u16, ip: [u8; 4]) -> Vec<u8> {
    let mut a = vec![2, 0];
    a.extend(port.to_be_bytes());
    a.extend(ip);
    a.extend([0; 8]);
    a
}
