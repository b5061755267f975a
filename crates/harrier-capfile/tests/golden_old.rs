//! Golden files of the older event schemas (v1, v2): the reader rewrites
//! their records into the current layout (src/upgrade.rs), so they decode
//! like a current file, with what the old schema did not carry left out.
//!
//! The current writer cannot produce old layouts (its records come from the
//! current table), so these files were made once by `old_file` below: a
//! tiny encoder of the v1/v2 wire layout, from the events.tbl of those
//! versions (git log -p schema/events.tbl), and a v3 file header patched to
//! name the old version. `UPDATE_GOLDEN_OLD=1` rewrites them; they are
//! meant never to change, so the committed bytes are what is tested.

mod common;

use harrier_capfile::{FileInfo, Item, Options, Reader, Stop, Writer};
use harrier_schema::decode::{decode, Event, Meta, Value};
use harrier_schema::syscall_by_name;
use std::io::Cursor;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// One parameter in an old layout.
enum Old<'a> {
    U32(u32),
    U64(u64),
    B(&'a [u8]),
    /// Fixed bytes (a 16-byte comm).
    Raw(&'a [u8]),
}

/// A record laid out as the v1/v2 BPF side wrote it: header, ret, the
/// parameters in the order given (fixed ones first, as then too).
fn rec(ts: u64, tid: u32, kind: u16, ret: i64, params: &[Old]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(ts.to_le_bytes());
    b.extend(tid.to_le_bytes());
    b.extend(kind.to_le_bytes());
    b.extend(0u16.to_le_bytes());
    b.extend(ret.to_le_bytes());
    for p in params {
        match p {
            Old::U32(v) => b.extend(v.to_le_bytes()),
            Old::U64(v) => b.extend(v.to_le_bytes()),
            Old::B(s) => {
                b.extend((s.len() as u16).to_le_bytes());
                b.extend(*s);
            }
            Old::Raw(s) => b.extend(*s),
        }
    }
    let len = b.len() as u16;
    b[14..16].copy_from_slice(&len.to_le_bytes());
    b
}

fn nr(name: &str) -> u16 {
    syscall_by_name(name).unwrap().nr as u16
}

fn comm(s: &str) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[..s.len()].copy_from_slice(s.as_bytes());
    c
}

/// The records of a v1 or v2 capture: life-cycle records without the v3
/// additions, execve without task fields, connect (v2: with peer, no local),
/// setuid without the resulting creds, pipe2 and setsid as generic events.
fn old_records(schema: u16) -> Vec<Vec<u8>> {
    let sin = [2, 0, 0, 80, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    let (bash, cat) = (comm("bash"), comm("cat"));
    let mut v = vec![
        // fork: child tid, child pid, comm (v3 adds the child's vpid and flags).
        rec(10, 100, 1000, 0, &[Old::U32(101), Old::U32(101), Old::Raw(&bash)]),
        // exec: old tid, comm (v3 adds the cgroup path).
        rec(11, 101, 1001, 0, &[Old::U32(101), Old::Raw(&cat)]),
        rec(
            12,
            101,
            nr("execve"),
            0,
            &[
                Old::U32(101),
                Old::B(b"/bin/cat"),
                Old::B(b"cat\0/etc/shadow\0"),
                Old::B(b"/usr/bin/cat"),
                Old::B(b"cat\0/etc/shadow\0"),
                Old::B(b"/root"),
            ],
        ),
        rec(
            13,
            101,
            nr("openat"),
            3,
            &[
                Old::U32(-100i32 as u32),
                Old::U32(1),
                Old::U32(0),
                Old::B(b"/etc/shadow"),
                Old::B(b"/etc/shadow"),
            ],
        ),
        rec(14, 101, nr("read"), 12, &[Old::U32(3), Old::U64(4096), Old::B(b"root:*:1:0:::")]),
        rec(15, 101, nr("pipe2"), 0, &[0x7ffd_0000, 0o2000000, 0, 0, 0, 0].map(Old::U64)),
        rec(16, 101, nr("setsid"), 101, &[0u64; 6].map(Old::U64)),
        rec(17, 101, nr("setuid"), 0, &[Old::U32(0)]),
        rec(18, 101, nr("close"), 0, &[Old::U32(3)]),
        rec(19, 101, nr("exit_group"), 0, &[Old::U32(0)]),
        rec(20, 101, 1002, 0, &[Old::U32(101)]),
    ];
    // connect: v1 files written before 641e46c have no peer; ours has none in
    // v1 and the peer in v2.
    let connect = if schema >= 2 {
        rec(21, 101, nr("connect"), 0, &[Old::U32(4), Old::B(&sin), Old::B(&sin)])
    } else {
        rec(21, 101, nr("connect"), 0, &[Old::U32(4), Old::B(&sin)])
    };
    v.push(connect);
    if schema >= 2 {
        // v2's flag: arguments read at exit (the open was in flight at attach).
        let mut r =
            rec(22, 101, nr("open"), 5, &[Old::U32(0), Old::U32(0), Old::B(b"/tmp/x"), Old::B(b"/tmp/x")]);
        let kind = nr("open") | 0x8000;
        r[12..14].copy_from_slice(&kind.to_le_bytes());
        v.push(r);
    }
    v
}

/// A file of the old schema: written by the current writer with the records
/// as they are (the records are opaque bytes to it), then its header patched
/// to name `schema` and format version 1 (whose blocks were these, encoding 0).
fn old_file(schema: u16) -> Vec<u8> {
    let info = FileInfo {
        host: "golden".into(),
        kernel: "6.1.0".into(),
        epoch_offset: 1_763_000_000_000_000_000,
        writer: format!("harrier-capfile golden, schema v{schema} layout"),
        settings: serde_json::json!({}),
    };
    let mut w = Writer::new(Vec::new(), &info, Options { packed: false, ..Options::default() }).unwrap();
    w.snapshot(&common::snapshot()).unwrap();
    for r in old_records(schema) {
        w.event(&r).unwrap();
    }
    let mut b = w.finish().unwrap().0;
    b[8..10].copy_from_slice(&1u16.to_le_bytes());
    b[10..12].copy_from_slice(&schema.to_le_bytes());
    let info_len = u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize;
    let mut h = crc32fast::Hasher::new();
    h.update(&b[..20]);
    h.update(&b[24..24 + info_len]);
    let crc = h.finalize();
    b[20..24].copy_from_slice(&crc.to_le_bytes());
    b
}

fn events(bytes: &[u8]) -> (u16, Vec<Vec<u8>>) {
    let mut r = Reader::new(Cursor::new(bytes)).unwrap();
    let mut v = Vec::new();
    while let Some(item) = r.next().unwrap() {
        if let Item::Event(b) = item {
            v.push(b.to_vec());
        }
    }
    assert_eq!(r.stop(), Some(&Stop::Complete));
    (r.schema_version, v)
}

fn syscall<'a>(evs: &'a [Vec<u8>], name: &str) -> harrier_schema::decode::SyscallEvent<'a> {
    evs.iter()
        .find_map(|b| match decode(b).unwrap() {
            Event::Syscall(e) if e.syscall.name == name => Some(e),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {name} event"))
}

#[test]
fn old_schema_golden_files_are_committed_and_unchanged() {
    for schema in [1u16, 2] {
        let p = dir().join(format!("schema-v{schema}.hrcap"));
        if std::env::var_os("UPDATE_GOLDEN_OLD").is_some() {
            std::fs::write(&p, old_file(schema)).unwrap();
        }
        let committed = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(committed == old_file(schema), "{}: not what old_file({schema}) builds", p.display());
    }
}

/// The v3 golden (written by the v3 writer itself): its execve gains an
/// absent environment, everything it had reads as before.
#[test]
fn schema_v3_exec_reads_with_an_absent_environment() {
    let bytes = std::fs::read(dir().join("schema-v3.hrcap")).unwrap();
    let (v, evs) = events(&bytes);
    assert_eq!(v, 3);
    let e = syscall(&evs, "execve");
    assert_eq!(e.param("env"), Some(&Value::Missing), "env of a v3 exec");
    assert_eq!(e.param("env_size"), Some(&Value::Missing), "env_size of a v3 exec");
    assert_eq!(e.param("uid"), Some(&Value::UInt(1000)), "uid kept");
    assert_eq!(e.param("exe_flags"), Some(&Value::UInt(0)), "exe_flags kept");
    assert_eq!(e.param("argv").unwrap(), &Value::Bytes(b"cat\0/etc/shadow\0"), "argv kept");
}

/// What the translation must give, field by field (the .txt goldens beside
/// them, checked by golden.rs, hold the whole decoded text).
#[test]
fn old_schema_records_read_in_the_current_layout() {
    for schema in [1u16, 2] {
        let bytes = std::fs::read(dir().join(format!("schema-v{schema}.hrcap"))).unwrap();
        let (v, evs) = events(&bytes);
        assert_eq!(v, schema);
        let case = |what: &str| format!("schema v{schema}: {what}");

        // execve: the byte fields found behind the inserted task fields.
        let e = syscall(&evs, "execve");
        assert_eq!(e.param("tgid"), Some(&Value::UInt(101)), "{}", case("tgid"));
        assert_eq!(e.param("filename").unwrap().as_str().unwrap(), "/bin/cat", "{}", case("filename"));
        assert_eq!(e.param("exe").unwrap().as_str().unwrap(), "/usr/bin/cat", "{}", case("exe"));
        assert_eq!(e.param("cwd").unwrap().as_str().unwrap(), "/root", "{}", case("cwd"));
        // Ids the old schema did not carry are absent, not u32::MAX.
        for f in ["uid", "gid", "euid", "egid", "sid", "vpid", "vpgid", "tty", "env_size", "env"] {
            assert_eq!(e.param(f), Some(&Value::Missing), "{}", case(&format!("{f} absent")));
        }
        assert_eq!(e.param("exe_flags"), Some(&Value::UInt(0)), "{}", case("exe_flags none"));

        // Newly typed: pipe2 keeps its flags; its fds were never captured.
        let e = syscall(&evs, "pipe2");
        assert_eq!(e.param("flags"), Some(&Value::UInt(0o2000000)), "{}", case("pipe2 flags"));
        assert_eq!(e.param("fd0"), Some(&Value::Missing), "{}", case("pipe2 fd0"));
        let e = syscall(&evs, "setsid");
        assert_eq!((e.ret, e.param("cur_sid")), (101, Some(&Value::Missing)), "{}", case("setsid"));

        // Appended parameters read as missing.
        let e = syscall(&evs, "setuid");
        assert_eq!((e.param("uid"), e.param("cur_uid")), (Some(&Value::UInt(0)), Some(&Value::Missing)));
        let e = syscall(&evs, "connect");
        assert_eq!(e.param("local"), Some(&Value::Missing), "{}", case("connect local"));
        let peer = if schema >= 2 {
            Value::Bytes(&[2, 0, 0, 80, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0])
        } else {
            Value::Missing
        };
        assert_eq!(e.param("peer"), Some(&peer), "{}", case("connect peer"));

        // Unchanged layouts pass through.
        let e = syscall(&evs, "openat");
        assert_eq!(e.param("path").unwrap().as_str().unwrap(), "/etc/shadow");
        if schema >= 2 {
            assert!(syscall(&evs, "open").header.args_at_exit, "{}", case("ARGS_AT_EXIT"));
        }
        let metas: Vec<Meta> = evs
            .iter()
            .filter_map(|b| match decode(b).unwrap() {
                Event::Meta(_, m) => Some(m),
                _ => None,
            })
            .collect();
        assert!(
            matches!(&metas[0], Meta::Fork { child_tid: 101, child_vpid: 0, flags: 0, .. }),
            "{}: {:?}",
            case("fork"),
            metas[0]
        );
        assert!(matches!(&metas[1], Meta::Exec { old_tid: 101, .. }), "{}", case("exec"));
    }
}
