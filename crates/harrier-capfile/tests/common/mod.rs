//! Shared by the capfile tests: a small capture built from known records.
#![allow(dead_code)]

use harrier_capfile::{FileInfo, ForeignEvent, Item, Options, Reader, Stop, Writer};
use harrier_state::snapshot::{SnapFd, SnapProcess};
use harrier_state::testing::{exec, fork, syscall, P};
use harrier_state::Snapshot;
use std::io::Cursor;

/// What a reader gave back, owned, for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Got {
    Event(Vec<u8>),
    Foreign(ForeignEvent),
    Snapshot(Snapshot),
}

pub fn info() -> FileInfo {
    FileInfo {
        host: "testhost".into(),
        kernel: "6.18.0-test".into(),
        epoch_offset: 1_700_000_000_000_000_000,
        writer: "harrier-capfile tests".into(),
        settings: serde_json::json!({"syscalls": ["openat", "close"], "snaplen": 80}),
    }
}

pub fn snapshot() -> Snapshot {
    Snapshot {
        processes: vec![SnapProcess {
            pid: 100,
            ppid: 1,
            vpid: 100,
            comm: "bash".into(),
            exe: "/bin/bash".into(),
            exepath: "/usr/bin/bash".into(),
            cwd: "/root".into(),
            loginuid: u32::MAX,
            tids: vec![100],
            fds: vec![SnapFd { fd: 0, typ: "file".into(), name: "/dev/pts/0".into(), ..Default::default() }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// `n` records of several kinds in time order, starting at ts 1000.
pub fn records(n: usize) -> Vec<Got> {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let ts = 1000 + i as u64 * 10;
        let g = match i % 5 {
            0 => Got::Event(syscall(
                ts,
                100,
                "openat",
                3,
                &[("dirfd", P::I(-100)), ("path", P::B(b"/etc/passwd")), ("flags", P::I(0))],
            )),
            1 => Got::Event(syscall(ts, 100, "close", 0, &[("fd", P::I(3))])),
            2 => Got::Event(fork(ts, 100, 200 + i as u32, 200 + i as u32, "bash")),
            3 => Got::Event(exec(ts, 200 + i as u32 - 1, 200 + i as u32 - 1, "cat", "")),
            _ => Got::Foreign(ForeignEvent {
                ts,
                tid: 100,
                name: "mmap".into(),
                params: vec![("addr".into(), format!("0x{i:x}")), ("length".into(), "4096".into())],
            }),
        };
        v.push(g);
    }
    v
}

/// A file holding the snapshot and `recs`, blocks of about `block_len` bytes
/// (packed, as the writer's default).
pub fn write(recs: &[Got], compression: Option<i32>, block_len: usize) -> Vec<u8> {
    write_opts(recs, Options { compression, block_len, packed: true })
}

/// The same with the records as they are (block encoding 0).
pub fn write_wire(recs: &[Got], compression: Option<i32>, block_len: usize) -> Vec<u8> {
    write_opts(recs, Options { compression, block_len, packed: false })
}

pub fn write_opts(recs: &[Got], opts: Options) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), &info(), opts).unwrap();
    w.snapshot(&snapshot()).unwrap();
    for (i, r) in recs.iter().enumerate() {
        match r {
            Got::Event(b) => w.event(b).unwrap(),
            Got::Foreign(f) => w.foreign(f).unwrap(),
            Got::Snapshot(s) => w.snapshot(s).unwrap(),
        }
        if i % 7 == 0 {
            w.add_drops(1, 2);
        }
    }
    w.finish().unwrap().0
}

/// Everything a reader yields, and how it ended (Ok(stop) or Err(error text)).
pub fn read_all(bytes: &[u8]) -> (Vec<Got>, Result<Stop, String>) {
    let mut r = match Reader::new(Cursor::new(bytes)) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Err(e.to_string())),
    };
    let mut got = Vec::new();
    loop {
        match r.next() {
            Ok(Some(Item::Event(b))) => got.push(Got::Event(b.to_vec())),
            Ok(Some(Item::Foreign(f))) => got.push(Got::Foreign(f.to_owned())),
            Ok(Some(Item::Snapshot(s))) => got.push(Got::Snapshot(*s)),
            Ok(None) => return (got, Ok(r.stop().cloned().expect("a stop at the end"))),
            Err(e) => return (got, Err(e.to_string())),
        }
    }
}
