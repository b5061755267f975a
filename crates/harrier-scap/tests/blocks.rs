//! Every block version, built byte by byte: process lists v1-v9, fd, user
//! and interface lists v1/v2, the seven event block kinds, gzip, and files
//! with only a section header and events.

mod common;

use common::build::*;
use harrier_scap::meta;
use harrier_scap::source::Block;
use harrier_scap::{FdKind, Snapshot};
use harrier_schema::decode::{decode, Event, Value};

#[test]
fn process_lists_of_every_version() {
    for v in 1..=9 {
        let mut body = proc_entry(v, 100);
        body.extend(proc_entry(v, 200));
        let b = Block { offset: 0, kind: proclist_kind(v), body: &body };
        assert_eq!(meta::proclist_version(b.kind), Some(v));
        let ps = meta::proclist(&b, v).unwrap_or_else(|e| panic!("v{v}: {e}"));
        assert_eq!(ps.len(), 2, "v{v}");
        let p = &ps[1];
        assert_eq!((p.tid, p.pid, p.ppid, p.uid, p.gid), (200, 201, 1, 1000, 1001), "v{v}");
        assert_eq!((p.comm.as_str(), p.exe.as_str(), p.cwd.as_str()), ("bash", "-bash", "/home/u"), "v{v}");
        assert_eq!(p.args, ["-c", "echo hi"], "v{v}");
        assert_eq!(p.sid, if v >= 6 { 77 } else { -1 }, "v{v}");
        assert_eq!(p.vpgid, if v >= 8 { 78 } else { -1 }, "v{v}");
        assert_eq!(p.exepath, if v >= 7 { "/usr/bin/bash" } else { "" }, "v{v}");
        assert_eq!(p.env.len(), usize::from(v >= 3), "v{v}");
        assert_eq!((p.vtid, p.vpid), if v >= 4 { (5, 6) } else { (-1, -1) }, "v{v}");
        assert_eq!(p.container_id, if v >= 4 { "aaaaaaaaaaaa" } else { "" }, "v{v}");
        assert_eq!(p.root, if v >= 5 { "/" } else { "" }, "v{v}");
        assert_eq!(
            (p.loginuid, p.tty, p.cap_effective),
            if v >= 9 { (1000, 34816, 0x1ff) } else { (u32::MAX, 0, 0) },
            "v{v}"
        );
    }
}

#[test]
fn fd_user_and_interface_lists_v1_and_v2() {
    for v2 in [false, true] {
        let entry = |fd: i64, t: u8, rest: &[u8]| {
            let mut e = Vec::new();
            e.extend(fd.to_le_bytes());
            e.extend(7u64.to_le_bytes());
            e.push(t);
            e.extend(rest);
            if v2 {
                let mut l = ((e.len() + 4) as u32).to_le_bytes().to_vec();
                l.extend(e);
                l
            } else {
                e
            }
        };
        let mut body = 42u64.to_le_bytes().to_vec();
        let mut file = 0x8002u32.to_le_bytes().to_vec();
        str16(&mut file, b"/etc/passwd");
        body.extend(entry(3, 16, &file));
        let mut sock = Vec::new();
        sock.extend([127, 0, 0, 1, 10, 0, 0, 2]);
        sock.extend(5000u16.to_le_bytes());
        sock.extend(80u16.to_le_bytes());
        sock.push(2);
        body.extend(entry(4, 3, &sock));
        let mut pipe = Vec::new();
        str16(&mut pipe, b"pipe:[1]");
        body.extend(entry(5, 7, &pipe));
        let b = Block { offset: 0, kind: if v2 { 0x218 } else { 0x203 }, body: &body };
        let (tid, fds) = meta::fdlist(&b).unwrap();
        assert_eq!(tid, 42);
        assert_eq!(
            (fds[0].kind, fds[0].name.as_str(), fds[0].open_flags),
            (FdKind::File, "/etc/passwd", 0x8002)
        );
        assert_eq!(fds[1].name, "127.0.0.1:5000->10.0.0.2:80");
        assert_eq!(fds[1].tuple.as_ref().unwrap().l4proto, "tcp");
        assert_eq!((fds[2].kind, fds[2].fd), (FdKind::Fifo, 5));

        let user = |t: u8, rest: &[u8]| {
            let mut e = vec![t];
            e.extend(rest);
            if v2 {
                let mut l = ((e.len() + 4) as u32).to_le_bytes().to_vec();
                l.extend(e);
                l
            } else {
                e
            }
        };
        let mut u = Vec::new();
        u.extend(1000u32.to_le_bytes());
        u.extend(1000u32.to_le_bytes());
        str16(&mut u, b"alice");
        str16(&mut u, b"/home/alice");
        str16(&mut u, b"/bin/sh");
        let mut g = 27u32.to_le_bytes().to_vec();
        str16(&mut g, b"sudo");
        let mut body = user(0, &u);
        body.extend(user(1, &g));
        let b = Block { offset: 0, kind: if v2 { 0x220 } else { 0x206 }, body: &body };
        let (users, groups) = meta::userlist(&b).unwrap();
        assert_eq!(
            (users[0].name.as_str(), users[0].home.as_str(), users[0].shell.as_str()),
            ("alice", "/home/alice", "/bin/sh")
        );
        assert_eq!((groups[0].gid, groups[0].name.as_str()), (27, "sudo"));

        let mut i = Vec::new();
        i.extend(1u16.to_le_bytes());
        i.extend(2u16.to_le_bytes());
        i.extend([10, 0, 0, 5, 255, 255, 255, 0, 10, 0, 0, 255]);
        i.extend(1000u64.to_le_bytes());
        i.extend(b"lo");
        let body = if v2 {
            let mut l = (i.len() as u32).to_le_bytes().to_vec();
            l.extend(&i);
            l
        } else {
            i
        };
        let b = Block { offset: 0, kind: if v2 { 0x219 } else { 0x205 }, body: &body };
        let ifs = meta::iflist(&b).unwrap();
        assert_eq!(
            (ifs[0].name.as_str(), ifs[0].addr.to_string(), ifs[0].linkspeed),
            ("lo", "10.0.0.5".into(), 1000)
        );
    }
}

/// A capture with only a section header and an open enter/exit pair in `kind` blocks.
fn open_pair(block_kind: u32) -> Vec<u8> {
    let mut f = shb(1, 2);
    let (path, flags, mode) = (b"/etc/hosts\0".to_vec(), u32b(1 | 1 << 12), u32b(0));
    f.extend(event(block_kind, 10, 77, 2, &[&path, &flags, &mode], false));
    f.extend(event(block_kind, 20, 77, 3, &[&i64b(3), &path, &flags, &mode], false));
    f
}

#[test]
fn all_seven_event_block_kinds_and_gzip() {
    for kind in [0x204, 0x8010ABCD, 0x208, 0x216, 0x217, 0x221, 0x222] {
        for gz in [false, true] {
            let mut bytes = open_pair(kind);
            if gz {
                use std::io::Write;
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(&bytes).unwrap();
                bytes = e.finish().unwrap();
            }
            let out = common::convert_bytes(bytes).unwrap_or_else(|e| panic!("{kind:#x} gz={gz}: {e}"));
            assert_eq!(out.events.len(), 1, "{kind:#x}");
            let Event::Syscall(e) = decode(&out.events[0]).unwrap() else { panic!() };
            assert_eq!((e.syscall.name, e.ret, e.header.ts, e.header.tid), ("open", 3, 20, 77), "{kind:#x}");
            assert_eq!(e.param("path").unwrap().as_str().unwrap(), "/etc/hosts");
            assert_eq!(e.param("flags"), Some(&Value::UInt(0o2000000)), "O_RDONLY|O_CLOEXEC in Linux bits");
            assert_eq!(e.param("fullpath").unwrap().as_str().unwrap(), "/etc/hosts");
            assert!(out.snapshots.is_empty(), "a file without metadata blocks has no snapshot");
            assert_eq!(out.stats.by_type["open"].merged, 1);
        }
    }
}

#[test]
fn large_payload_events_use_32_bit_lengths() {
    let mut f = shb(1, 2);
    let json = vec![b'x'; 70_000];
    f.extend(event(0x221, 5, 1, 324, &[&json], true));
    let out = common::convert_bytes(f).unwrap();
    assert_eq!(out.foreign.len(), 1);
    assert_eq!((out.foreign[0].name.as_str(), out.foreign[0].params[0].1.len()), ("container", 70_000));
}

#[test]
fn unpaired_events_are_tolerated_and_counted() {
    let mut f = shb(1, 0);
    let path = b"rel/file\0".to_vec();
    // Thread 5's process list says its cwd, so a relative open gets a full path.
    let pl = proc_entry(5, 5); // cwd "/home/u"
    f.extend(block(proclist_kind(5), &pl));
    // An exit whose enter is not in the file.
    f.extend(event(0x204, 1, 5, 3, &[&i64b(4), &path, &u32b(2), &u32b(0o644)], false));
    // An enter whose exit never comes, then a close pair on the same thread.
    f.extend(event(0x204, 2, 5, 2, &[&path, &u32b(2), &u32b(0)], false));
    f.extend(event(0x204, 3, 5, 4, &[&i64b(4)], false));
    f.extend(event(0x204, 4, 5, 5, &[&i64b(0)], false));
    // An old-style exit of a newer writer's event with fewer parameters than the table.
    f.extend(event(0x204, 5, 6, 307, &[&i64b(-2)], false));
    // An execve exit of an old writer: no uid, so uid must not read as root.
    let args = b"-l\0".to_vec(); // argv without argv[0], which is `exe`
    f.extend(event(
        0x204,
        6,
        9,
        231,
        &[&i64b(0), b"ls\0", &args, &i64b(9), &i64b(9), &i64b(1), b"/tmp\0"],
        false,
    ));
    let out = common::convert_bytes(f).unwrap();
    let Event::Syscall(exec) = decode(out.events.last().unwrap()).unwrap() else { panic!() };
    assert_eq!(exec.syscall.name, "execve");
    // An absent id is written as -1 (u32::MAX), which decodes as absent, never as root.
    assert_eq!(exec.param("uid"), Some(&Value::Missing), "absent id");
    assert_eq!(exec.param("env_size"), Some(&Value::Missing), "absent env size");
    assert_eq!(exec.param("cap_effective"), Some(&Value::UInt(0)), "absent other: 0");
    assert_eq!(exec.param("tgid"), Some(&Value::UInt(9)));
    assert_eq!(exec.param("cwd").unwrap().as_str().unwrap(), "/tmp");
    assert_eq!(exec.param("argv").unwrap().as_bytes().unwrap(), b"ls\0-l\0");
    let s = &out.stats;
    assert_eq!(s.by_type["open"].exit_only, 1);
    assert_eq!(s.by_type["open"].skipped["enter without exit"], 1);
    assert_eq!(s.by_type["close"].merged, 1);
    assert_eq!(s.by_type["openat"].exit_only, 1);
    let Event::Syscall(open) = decode(&out.events[0]).unwrap() else { panic!() };
    assert_eq!(open.param("fullpath").unwrap().as_str().unwrap(), "/home/u/rel/file");
    let Event::Syscall(openat) = decode(&out.events[2]).unwrap() else { panic!() };
    assert_eq!(openat.ret, -2);
    assert!(openat.params.iter().all(|(_, v)| *v == Value::Missing), "nothing known: all missing");
    assert!(matches!(&out.snapshots[0], Snapshot::Process(p) if p.tid == 5));
}
