//! `harrier read`'s text lines, in sysdig's spirit:
//! `NUM HH:MM:SS.NNNNNNNNN COMM (TID) SYSCALL res=RET name=value ...`.

use harrier_capfile::Foreign;
use harrier_schema::decode::{printable, Value};
use harrier_schema::view::SyscallView;
use harrier_schema::TextKind;
use std::fmt::Write;

/// Wall-clock time of day (UTC) with nanoseconds.
pub fn time_of_day(out: &mut String, wall_ns: u64) {
    let s = wall_ns / 1_000_000_000;
    let (h, m, sec) = ((s / 3600) % 24, (s / 60) % 60, s % 60);
    let _ = write!(out, "{h:02}:{m:02}:{sec:02}.{:09}", wall_ns % 1_000_000_000);
}

/// Appends one syscall event's line (without newline) to `out`.
pub fn syscall_line(out: &mut String, num: u64, wall_ns: u64, comm: &str, v: &SyscallView) {
    let _ = write!(out, "{num} ");
    time_of_day(out, wall_ns);
    let _ = write!(out, " {comm} ({}) {} res=", v.header.tid, v.syscall.name);
    // A legacy exit without a return value: sysdig's <NA>.
    if v.header.no_ret {
        out.push_str("<NA>");
    } else {
        let _ = write!(out, "{}", v.ret);
    }
    for i in 0..v.len() {
        let name = v.name_of(i).unwrap_or("?");
        let kind = v.desc(i).map_or(TextKind::Int, |d| d.text);
        let _ = write!(out, " {name}=");
        match v.param(i) {
            Value::Missing => out.push_str("<NA>"),
            Value::Bytes(b) => match kind {
                TextKind::Sockaddr => out.push_str(&harrier_schema::sockaddr::format(b)),
                TextKind::Argv => {
                    let args: Vec<_> = b.split(|&c| c == 0).filter(|s| !s.is_empty()).collect();
                    for (j, a) in args.iter().enumerate() {
                        if j > 0 {
                            out.push(' ');
                        }
                        out.push_str(&String::from_utf8_lossy(a));
                    }
                }
                TextKind::Path => out.push_str(&String::from_utf8_lossy(b)),
                _ => out.push_str(&printable(b)),
            },
            n => {
                let raw = n.as_i64().unwrap_or(0);
                let named = v
                    .desc(i)
                    .and_then(|d| d.renderer)
                    .and_then(|r| harrier_schema::render::render(r, raw as u64));
                match named {
                    Some(s) => out.push_str(&s),
                    None => {
                        let _ = write!(out, "{raw}");
                    }
                }
            }
        }
    }
    if v.header.args_at_exit {
        out.push_str(" (args read at exit)");
    }
}

/// A foreign event's line: its own name and text parameters.
pub fn foreign_line(out: &mut String, num: u64, wall_ns: u64, comm: &str, f: &Foreign) {
    let _ = write!(out, "{num} ");
    time_of_day(out, wall_ns);
    let _ = write!(out, " {comm} ({}) {}", f.tid, f.name);
    for (k, v) in f.params() {
        let _ = write!(out, " {k}={v}");
    }
}

/// A foreign event as JSON, shaped like `capture --json` objects.
pub fn foreign_json(f: &Foreign, pid: u32, comm: &str, epoch_offset: u64) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("ts".into(), (f.ts + epoch_offset).into());
    m.insert("tid".into(), f.tid.into());
    m.insert("pid".into(), pid.into());
    m.insert("comm".into(), comm.into());
    m.insert("syscall".into(), f.name.into());
    m.insert("foreign".into(), true.into());
    for (k, v) in f.params() {
        m.insert(k.to_string(), v.into());
    }
    serde_json::Value::Object(m)
}
