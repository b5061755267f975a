//! Golden files: a small capture per event schema version, committed, must
//! keep decoding to the same JSON. A schema change that breaks an old
//! file's records fails here. Format versions too: schema-vN.hrcap files
//! up to v4 are format version 1 (records as they are), packed-schema-vN
//! ones format version 2 with packed event blocks. `UPDATE_GOLDEN=1` writes
//! the current schema version's files that are missing (never rewrite one
//! that is committed).

mod common;

use harrier_capfile::{FileInfo, ForeignEvent, Item, Options, Reader, Stop, Writer};
use harrier_schema::decode::{decode, Event};
use harrier_state::testing::{exec, exit, fork, syscall, P};
use std::io::Cursor;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn current(opts: Options) -> Vec<u8> {
    let info = FileInfo {
        host: "golden".into(),
        kernel: "6.18.0".into(),
        epoch_offset: 1_763_000_000_000_000_000,
        writer: "harrier-capfile golden".into(),
        settings: serde_json::json!({}),
    };
    let mut w = Writer::new(Vec::new(), &info, opts).unwrap();
    w.snapshot(&common::snapshot()).unwrap();
    let recs = [
        fork(10, 100, 101, 101, "bash"),
        exec(11, 101, 101, "cat", "/user.slice"),
        syscall(
            12,
            101,
            "execve",
            0,
            &[
                ("tgid", P::I(101)),
                ("filename", P::B(b"/bin/cat")),
                ("argv", P::B(b"cat\0/etc/shadow\0")),
                ("uid", P::I(1000)),
                ("env_size", P::I(24)),
                ("env", P::B(b"HOME=/root\0LANG=C.UTF-8\0")),
            ],
        ),
        syscall(
            13,
            101,
            "openat",
            3,
            &[("dirfd", P::I(-100)), ("path", P::B(b"/etc/shadow")), ("flags", P::I(0o1))],
        ),
        syscall(
            14,
            101,
            "read",
            12,
            &[("fd", P::I(3)), ("data", P::B(b"root:*:1:0:::")), ("count", P::I(4096))],
        ),
        syscall(
            15,
            101,
            "connect",
            0,
            &[("fd", P::I(4)), ("addr", P::B(&[2, 0, 0, 80, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]))],
        ),
        syscall(16, 101, "close", 0, &[("fd", P::I(3))]),
        syscall(17, 101, "exit_group", 0, &[("status", P::I(0))]),
        exit(18, 101, 101),
    ];
    for r in &recs {
        w.event(r).unwrap();
    }
    w.foreign(&ForeignEvent {
        ts: 19,
        tid: 100,
        name: "signaldeliver".into(),
        params: vec![("spid".into(), "0".into()), ("sig".into(), "SIGCHLD".into())],
    })
    .unwrap();
    w.finish().unwrap().0
}

/// The object with its keys in order: serde_json keeps insertion order when
/// another crate of the workspace turns `preserve_order` on.
fn sorted_keys(v: serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(m) => {
            let b: std::collections::BTreeMap<String, serde_json::Value> = m.into_iter().collect();
            serde_json::to_string(&b).unwrap()
        }
        v => v.to_string(),
    }
}

/// One line per item: decoded events as `capture --json` prints them.
fn render(bytes: &[u8]) -> String {
    let mut r = Reader::new(Cursor::new(bytes)).unwrap();
    let mut out = format!("schema {} host {}\n", r.schema_version, r.info.host);
    let off = r.info.epoch_offset;
    loop {
        let line = match r.next().unwrap() {
            None => break,
            Some(Item::Snapshot(s)) => format!("snapshot {} processes", s.processes.len()),
            Some(Item::Foreign(f)) => {
                format!("foreign {} {} {:?}", f.ts, f.name, f.params().collect::<Vec<_>>())
            }
            Some(Item::Event(b)) => match decode(b).unwrap() {
                Event::Syscall(e) => sorted_keys(e.to_json(0, "", off)),
                Event::Meta(h, m) => format!("meta {} {} {m:?}", h.ts, h.tid),
            },
        };
        out.push_str(&line);
        out.push('\n');
    }
    assert_eq!(r.stop(), Some(&Stop::Complete));
    out
}

/// The current schema's golden keeps an exec's environment.
#[test]
fn the_current_golden_keeps_the_exec_environment() {
    let b = std::fs::read(dir().join(format!("schema-v{}.hrcap", harrier_capfile::SCHEMA_VERSION))).unwrap();
    let mut r = Reader::new(Cursor::new(&b[..])).unwrap();
    let mut found = false;
    while let Some(item) = r.next().unwrap() {
        if let Item::Event(rec) = item {
            if let Ok(Event::Syscall(e)) = decode(rec) {
                if e.syscall.name == "execve" {
                    let env = e.param("env").and_then(|v| v.as_bytes());
                    assert_eq!(env, Some(&b"HOME=/root\0LANG=C.UTF-8\0"[..]));
                    found = true;
                }
            }
        }
    }
    assert!(found, "no execve in the golden file");
}

#[test]
fn golden_files_of_every_schema_version_decode_as_recorded() {
    let v = harrier_capfile::SCHEMA_VERSION;
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(dir()).unwrap();
        for (name, opts) in [
            (format!("schema-v{v}"), Options::default()),
            (format!("packed-schema-v{v}"), Options { compression: None, ..Options::default() }),
        ] {
            let p = dir().join(format!("{name}.hrcap"));
            if !p.exists() {
                let b = current(opts);
                std::fs::write(&p, &b).unwrap();
                std::fs::write(p.with_extension("txt"), render(&b)).unwrap();
            }
        }
    }
    let mut checked = Vec::new();
    for e in std::fs::read_dir(dir()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "hrcap") {
            // An older schema's text is written once, when its file is added
            // (golden_old.rs makes those files).
            if std::env::var_os("UPDATE_GOLDEN").is_some() && !p.with_extension("txt").exists() {
                std::fs::write(p.with_extension("txt"), render(&std::fs::read(&p).unwrap())).unwrap();
            }
            let want = std::fs::read_to_string(p.with_extension("txt")).unwrap();
            let got = render(&std::fs::read(&p).unwrap());
            assert_eq!(got, want, "{}", p.display());
            checked.push(p.file_name().unwrap().to_string_lossy().to_string());
        }
    }
    assert!(
        (1..=v).all(|s| checked.contains(&format!("schema-v{s}.hrcap"))),
        "a schema version 1..={v} has no golden file: {checked:?}"
    );
}

/// The packed golden (format version 2, packed uncompressed blocks) holds the
/// same capture as the schema's own golden and reads exactly as it does.
#[test]
fn the_packed_golden_reads_as_the_unpacked_one() {
    let v = harrier_capfile::SCHEMA_VERSION;
    let packed = std::fs::read(dir().join(format!("packed-schema-v{v}.hrcap"))).unwrap();
    assert_eq!(u16::from_le_bytes([packed[8], packed[9]]), 2, "format version 2");
    let info_len = u32::from_le_bytes(packed[16..20].try_into().unwrap()) as usize;
    let mut at = harrier_capfile::format::FILE_HEADER_LEN + info_len;
    let mut encodings = Vec::new();
    while let Ok(h) = harrier_capfile::format::BlockHeader::parse(packed[at..at + 64].try_into().unwrap()) {
        if h.kind == 2 {
            encodings.push((h.encoding, h.codec));
        }
        if h.kind == 3 {
            break;
        }
        at += 64 + h.stored_len as usize;
    }
    assert_eq!(
        encodings,
        [(harrier_capfile::pack::ENCODING_PACKED, 0)],
        "one packed, uncompressed event block"
    );
    let plain = std::fs::read(dir().join(format!("schema-v{v}.hrcap"))).unwrap();
    assert_eq!(render(&packed), render(&plain));
}
