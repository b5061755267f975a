//! Records of an older event schema, rewritten in the current layout so that
//! every consumer (decoder, views, state, rules) reads one layout.
//!
//! What changed (git log -p schema/events.tbl):
//! - v1 -> v2: bit 15 of the type field became the `ARGS_AT_EXIT` flag. No
//!   v1 record sets it (types stay below 1024) and no layout changed: v1
//!   records are v2 records.
//! - v2 -> v3: (a) parameters appended to chdir, fchdir, set*id, capset,
//!   connect, accept, accept4, bind, and to the fork/exec life-cycle records:
//!   an old record is a current one whose trailing parameters are left out,
//!   which the decoder reads as missing; nothing to do. (b) execve/execveat
//!   gained 13 fixed task fields, and fixed fields come before the byte
//!   fields on the wire: those are inserted, with "unknown" values (ids
//!   u32::MAX, the invalid id; caps, times and exe flags 0). (c) pipe, pipe2,
//!   socketpair, memfd_create, eventfd*, signalfd*, timerfd_create,
//!   inotify_init*, epoll_create*, close_range became typed (and setsid,
//!   setpgid soon after, without a version bump): the old generic record
//!   (6 raw arguments) becomes the typed one, with the parameters that are
//!   plain arguments and the rest left out.
//! - v3 -> v4: execve/execveat gained the fixed `env_size`, `cap_permitted`
//!   and `cap_inheritable` (after the task fields) and the trailing byte field
//!   `env`: `env_size` is inserted as unknown (u32::MAX), the caps as 0, and
//!   `env` is left out, so an old exec has no environment (absent, not
//!   empty). set*uid and capset gained trailing `cur_cap_permitted` and
//!   `cur_cap_inheritable`: left out, read as missing. bpf became typed
//!   (its `cmd`) without a version bump: a generic bpf record of any
//!   version is rewritten as setsid's and setpgid's are.
//! - v4 -> v5: connect gained the trailing `sock` (what its socket is, from
//!   the kernel), dup, dup2 and dup3 the trailing `peer`, `local` and `sock`
//!   of the socket they duplicate: left out, read as missing.

use harrier_schema::encode::{encode, Arg};
use harrier_schema::wire::{Header, PARAMS_BASE};
use harrier_schema::{syscall_by_nr, SyscallInfo};

/// Length of a generic record: header, ret and 6 raw u64 arguments.
const GENERIC_LEN: usize = PARAMS_BASE + 6 * 8;

/// Typed in v3: for each parameter in wire order, the raw argument it is
/// (None: read from user memory or the task, not in the generic record; it
/// and all after it are left out).
const TYPED_IN_V3: &[(&str, &[Option<usize>])] = &[
    ("pipe", &[None]),
    ("pipe2", &[Some(1), None]),
    ("socketpair", &[Some(0), Some(1), Some(2), None]),
    ("memfd_create", &[Some(1), None]),
    ("eventfd", &[Some(0)]),
    ("eventfd2", &[Some(0), Some(1)]),
    ("signalfd", &[Some(0)]),
    ("signalfd4", &[Some(0), Some(3)]),
    ("timerfd_create", &[Some(0), Some(1)]),
    ("inotify_init", &[]),
    ("inotify_init1", &[Some(0)]),
    ("epoll_create", &[Some(0)]),
    ("epoll_create1", &[Some(0)]),
    ("close_range", &[Some(0), Some(1), Some(2)]),
    ("setsid", &[None]),
    ("setpgid", &[Some(0), Some(1), None]),
    ("bpf", &[Some(0)]),
];

/// Typed after the schema version they first appear in was declared: a file
/// of any version may hold either form, told apart by the length.
const TYPED_LATER: &[&str] = &["setsid", "setpgid", "bpf"];

/// The fixed task fields execve/execveat gained in v3.
const EXEC_TASK_FIELDS: [&str; 13] = [
    "uid",
    "gid",
    "euid",
    "egid",
    "loginuid",
    "tty",
    "sid",
    "vpid",
    "vpgid",
    "cap_effective",
    "exe_ctime",
    "exe_mtime",
    "exe_flags",
];

/// The fixed fields execve/execveat gained in v4 (their `env` bytes are trailing).
const EXEC_FIELDS_V4: [&str; 3] = ["env_size", "cap_permitted", "cap_inheritable"];

/// Whether `name` is a fixed execve/execveat field that a record of `schema` lacks.
fn exec_field_added_after(schema: u16, name: &str) -> bool {
    (schema < 3 && EXEC_TASK_FIELDS.contains(&name)) || (schema < 4 && EXEC_FIELDS_V4.contains(&name))
}

/// The value an inserted task field gets: ids (and sizes) the invalid id, the rest 0.
fn unknown(name: &str) -> u64 {
    match name {
        "cap_effective" | "cap_permitted" | "cap_inheritable" | "exe_ctime" | "exe_mtime" | "exe_flags" => 0,
        _ => u32::MAX as u64,
    }
}

/// Rewrites `rec`, written under event schema `schema`, into `out` in the
/// current layout. False: `rec` is already laid out as the current schema
/// reads it (use it as it is). Records that do not parse are left alone for
/// the decoder to reject.
pub fn upgrade(schema: u16, rec: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(h) = Header::parse(rec) else { return false };
    if h.is_meta() || h.len as usize != rec.len() || rec.len() < PARAMS_BASE {
        return false;
    }
    let Some(sc) = syscall_by_nr(h.kind as u32) else { return false };
    let ret = i64::from_le_bytes(rec[16..24].try_into().unwrap());
    if let Some((_, from)) = TYPED_IN_V3.iter().find(|(n, _)| *n == sc.name) {
        // setsid/setpgid (after v3) and bpf (after v4) were typed without a version
        // bump: told apart by the length (their typed records are shorter).
        if rec.len() != GENERIC_LEN || (schema >= 3 && !TYPED_LATER.contains(&sc.name)) {
            return false;
        }
        let raw = |i: usize| {
            i64::from_le_bytes(rec[PARAMS_BASE + 8 * i..PARAMS_BASE + 8 * i + 8].try_into().unwrap())
        };
        let mut args = [Arg::Int(0); 8];
        let n = from.iter().take_while(|a| a.is_some()).count();
        for (slot, i) in args.iter_mut().zip(from.iter().map_while(|a| *a)) {
            *slot = Arg::Int(raw(i));
        }
        return encode(out, h.ts, h.tid, sc, h.args_at_exit, ret, &args[..n]).is_ok();
    }
    if schema < 4 && matches!(sc.name, "execve" | "execveat") {
        return exec_old(schema, sc, &h, ret, rec, out);
    }
    false
}

/// An older execve/execveat: its parameters in order, the fixed fields its
/// schema lacked inserted after the fixed ones it had.
fn exec_old(
    schema: u16,
    sc: &'static SyscallInfo,
    h: &Header,
    ret: i64,
    rec: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    let Some(descs) = sc.params else { return false };
    let mut at = PARAMS_BASE;
    // No allocation per record: execveat, the longest, has 25 parameters.
    let mut buf = [Arg::Int(0); 32];
    let mut n = 0;
    for d in descs.iter().take(buf.len()) {
        if exec_field_added_after(schema, d.name) {
            buf[n] = Arg::Int(unknown(d.name) as i64);
            n += 1;
            continue;
        }
        let v = match d.wire.fixed_size() {
            Some(size) => rec.get(at..at + size).map(|b| {
                at += size;
                let mut w = [0u8; 8];
                w[..size].copy_from_slice(b);
                // encode writes the low 4 bytes back for 32-bit fields.
                Arg::Int(u64::from_le_bytes(w) as i64)
            }),
            None => rec.get(at..at + 2).map(|l| u16::from_le_bytes(l.try_into().unwrap()) as usize).and_then(
                |len| {
                    let b = rec.get(at + 2..at + 2 + len)?;
                    at += 2 + len;
                    Some(Arg::Bytes(b))
                },
            ),
        };
        match v {
            Some(v) => {
                buf[n] = v;
                n += 1;
            }
            None => break, // the old record ended here: the rest is left out
        }
    }
    // Task fields past the last old parameter are left out, not invented.
    while n > 0 && exec_field_added_after(schema, descs[n - 1].name) {
        n -= 1;
    }
    encode(out, h.ts, h.tid, sc, h.args_at_exit, ret, &buf[..n]).is_ok()
}
