//! The converted stream against Debian's sysdig 0.29 reading the same
//! capture (scripts/deps-sysdig.sh unpacks it under /opt/harrier-sysdig):
//! one Harrier event per syscall exit sysdig shows, in the same order, with
//! the same thread, return value and paths.

mod common;

use harrier_schema::decode::{decode, Event, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// HARRIER_SYSDIG, else the wrapper deps-sysdig.sh installs. Under CI=true a
/// missing sysdig fails the test.
fn sysdig() -> Option<PathBuf> {
    let p = std::env::var_os("HARRIER_SYSDIG")
        .map_or_else(|| PathBuf::from("/opt/harrier-sysdig/sysdig"), PathBuf::from);
    if p.exists() {
        return Some(p);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{} not found: scripts/deps-sysdig.sh installs it", p.display());
    }
    eprintln!("note: {} not found (scripts/deps-sysdig.sh); skipped", p.display());
    None
}

#[derive(Debug, PartialEq)]
struct Exit {
    tid: u64,
    syscall: String,
    /// None where sysdig has no return value (the libs' generic event).
    ret: Option<i64>,
    /// (name, value) of the path parameters that are set.
    paths: Vec<(String, String)>,
}

const PATH_FIELDS: [&str; 5] = ["name", "path", "filename", "oldpath", "newpath"];

/// sysdig's exit events: `tid|type|rawres|paths...`.
fn sysdig_exits(sysdig: &Path, capture: &Path) -> Vec<Exit> {
    let fmt = format!(
        "*%thread.tid|%evt.type|%evt.rawres|{}",
        PATH_FIELDS.map(|f| format!("%evt.rawarg.{f}")).join("|")
    );
    let out =
        Command::new(sysdig).arg("-r").arg(capture).arg("-p").arg(fmt).arg("evt.dir=<").output().unwrap();
    assert!(
        out.status.success(),
        "sysdig -r {}: {}",
        capture.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            assert_eq!(f.len(), 3 + PATH_FIELDS.len(), "sysdig line {l:?}");
            // The libs name a few events unlike their x86_64 syscall.
            let syscall = match f[1] {
                "pread" => "pread64",
                "pwrite" => "pwrite64",
                "umount" => "umount2",
                "prlimit" => "prlimit64",
                s => s,
            };
            let mut paths: Vec<(String, String)> = Vec::new();
            for (name, v) in PATH_FIELDS.iter().zip(&f[3..]) {
                if *v != "<NA>" && !v.is_empty() {
                    // name/path/filename are all Harrier's "path".
                    let n = if ["name", "filename"].contains(name) { "path" } else { name };
                    paths.push((n.to_string(), v.to_string()));
                }
            }
            Exit {
                tid: f[0].parse().unwrap(),
                syscall: syscall.to_string(),
                ret: f[2].parse::<i128>().ok().map(|v| v as i64),
                paths,
            }
        })
        .collect()
}

/// The converted syscall events, without those made from enter events only
/// (exit and exit_group never return: sysdig shows no exit for them).
fn harrier_exits(capture: &Path) -> Vec<Exit> {
    let out = common::convert(capture);
    out.events
        .iter()
        .filter_map(|b| {
            // Life-cycle records synthesised from clone/execve exits are not exits.
            let Event::Syscall(e) = decode(b).unwrap() else { return None };
            if e.syscall.noreturn {
                return None;
            }
            let mut paths = Vec::new();
            for (n, v) in &e.params {
                let key = match *n {
                    "path" | "filename" => "path",
                    "oldpath" | "target" => "oldpath",
                    "newpath" | "linkpath" => "newpath",
                    _ => continue,
                };
                if let Value::Bytes(b) = v {
                    if !b.is_empty() {
                        paths.push((key.to_string(), String::from_utf8_lossy(b).into_owned()));
                    }
                }
            }
            Some(Exit {
                tid: e.header.tid as u64,
                syscall: e.syscall.name.to_string(),
                ret: (!e.header.no_ret).then_some(e.ret),
                paths,
            })
        })
        .collect()
}

#[test]
fn converted_captures_match_sysdig() {
    let Some(dir) = common::scap_dir() else { return };
    let Some(sysdig) = sysdig() else { return };
    let (mut compared, mut rets, mut paths, mut no_rets) = (0, 0, 0, 0);
    for path in common::captures(&dir) {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name == "curl_google_comments.scap" {
            // sysdig 0.29 cannot skip section-header options (comments); the
            // same capture without them is compared below.
            continue;
        }
        let want = sysdig_exits(&sysdig, &path);
        let got = harrier_exits(&path);
        // sysdig names syscalls it has no table entry for "<unknown>": compare those by position only.
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            let ctx = || format!("{name}: exit #{i}: sysdig {w:?}, harrier {g:?}");
            assert_eq!(w.tid, g.tid, "{}", ctx());
            if w.syscall != "<unknown>" {
                assert_eq!(w.syscall, g.syscall, "{}", ctx());
            }
            // Where sysdig has no return value (<NA>), neither has the converted event.
            assert_eq!(w.ret, g.ret, "{}", ctx());
            if w.ret.is_some() {
                rets += 1;
            } else {
                no_rets += 1;
            }
            for (k, v) in &g.paths {
                paths += 1;
                let sv = w.paths.iter().find(|(n, _)| n == k).map(|(_, v)| v);
                assert_eq!(sv, Some(v), "{}: {k}", ctx());
            }
        }
        assert_eq!(
            want.len(),
            got.len(),
            "{name}: sysdig shows {} exits, harrier has {} events",
            want.len(),
            got.len()
        );
        compared += want.len();
    }
    // 952 exits in the 7 captures sysdig reads; most have a return value; the
    // typed ones with a path argument (generic events carry none) 89 paths.
    assert!(
        compared >= 950 && rets >= 700 && paths >= 85 && no_rets > 0,
        "only {compared} exits, {rets} return values ({no_rets} without), {paths} paths compared"
    );
}

#[test]
fn section_header_options_change_nothing() {
    let Some(dir) = common::scap_dir() else { return };
    let a = common::convert(&dir.join("curl_google.scap"));
    let b = common::convert(&dir.join("curl_google_comments.scap"));
    assert_eq!(a.events, b.events);
    assert_eq!(a.stats.by_type, b.stats.by_type);
}
