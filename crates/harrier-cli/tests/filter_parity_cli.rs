//! `harrier read --filter` against sysdig 0.29's filter on the legacy captures
//! of shared/data/scap converted with `harrier convert`: for each expression,
//! the exit events sysdig selects (`evt.dir=< and (EXPR)`) and the syscall
//! events harrier selects must be the same events, in the same order (thread,
//! syscall, return value). scripts/deps-sysdig.sh installs sysdig under
//! /opt/harrier-sysdig; under CI=true a missing sysdig or capture fails.
//!
//! Where the two must differ, the expression is left out of FILTERS and
//! listed in MUST_DIFFER with the reason (checked to still differ, so the list
//! stays true).

use std::path::{Path, PathBuf};
use std::process::Command;

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

/// Expressions both must agree on: evt.type, proc.name, fd.name, evt.res,
/// evt.rawres, and/or/not, in, contains, startswith.
const FILTERS: &[&str] = &[
    "evt.type = open",
    "evt.type in (open, openat, close)",
    "evt.type = connect or evt.type = socket",
    "proc.name = curl",
    "proc.name = curl and evt.type = read",
    "evt.type = read and not proc.name = curl",
    "not (evt.type = read or evt.type = write)",
    "fd.name contains /etc and evt.type in (open, openat, read, write, close)",
    "fd.name startswith /usr/lib and evt.type in (open, openat, read, close)",
    "fd.name = /etc/hosts and not evt.type = fstat",
    "evt.res = SUCCESS and evt.type in (open, openat, read, write, close, connect, socket)",
    "evt.res != SUCCESS",
    // A legacy exit without a return value (madvise's generic one) has no evt.res in either.
    "evt.res = SUCCESS",
    "evt.rawres < 0",
    "evt.rawres > 0 and evt.type in (read, write, sendto, recvfrom)",
];

/// Expressions where the two must differ, and why. Each must still differ
/// on at least one capture (else it belongs in FILTERS).
const MUST_DIFFER: &[(&str, &str)] = &[
    (
        "fd.name contains /etc",
        "syscalls Harrier has no typed form for (fstat, mmap...) are generic events that keep no legacy \
         parameters, so no fd and no fd.name; sysdig resolves the fd of any event",
    ),
    ("fd.name = /etc/hosts", "the same: fstat on the fd is generic in Harrier"),
];

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

use harrier_scap::testing::scap_dir;

/// (tid, syscall, ret) of one selected exit; syscall None where sysdig has
/// no name for it ("<unknown>"), ret None where it has no return value.
type Sel = (u64, Option<String>, Option<i64>);

fn sysdig_select(sysdig: &Path, capture: &Path, expr: &str) -> Vec<Sel> {
    let out = Command::new(sysdig)
        .arg("-r")
        .arg(capture)
        .arg("-p")
        .arg("*%thread.tid|%evt.type|%evt.rawres")
        .arg(format!("evt.dir=< and ({expr})"))
        .output()
        .unwrap();
    assert!(out.status.success(), "sysdig {expr:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            assert_eq!(f.len(), 3, "sysdig line {l:?}");
            // The libs name a few events unlike their x86_64 syscall.
            let name = match f[1] {
                "<unknown>" => None,
                "pread" => Some("pread64".into()),
                "pwrite" => Some("pwrite64".into()),
                "umount" => Some("umount2".into()),
                "prlimit" => Some("prlimit64".into()),
                s => Some(s.to_string()),
            };
            (f[0].parse().unwrap(), name, f[2].parse::<i128>().ok().map(|v| v as i64))
        })
        .collect()
}

/// The syscall events `read --json --filter` prints, without foreign events
/// and the noreturn exit/exit_group (sysdig shows no exit for those).
fn harrier_select(file: &Path, expr: &str) -> Vec<Sel> {
    let out =
        Command::new(HARRIER).arg("read").arg(file).args(["--json", "--filter", expr]).output().unwrap();
    assert!(out.status.success(), "harrier read --filter {expr:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let name = v.get("syscall")?.as_str()?;
            if v.get("foreign").is_some() || name == "exit" || name == "exit_group" {
                return None;
            }
            Some((v["tid"].as_u64().unwrap(), Some(name.to_string()), v["ret"].as_i64()))
        })
        .collect()
}

fn same(want: &[Sel], got: &[Sel]) -> Result<(), String> {
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let ok = w.0 == g.0 && (w.1.is_none() || w.1 == g.1) && (w.2.is_none() || w.2 == g.2);
        if !ok {
            return Err(format!("event #{i}: sysdig {w:?}, harrier {g:?}"));
        }
    }
    if want.len() != got.len() {
        return Err(format!("sysdig selects {} events, harrier {}", want.len(), got.len()));
    }
    Ok(())
}

#[test]
fn read_filter_selects_what_sysdig_selects_on_converted_captures() {
    let (Some(dir), Some(sysdig)) = (scap_dir(), sysdig()) else { return };
    let tmp = std::env::temp_dir().join(format!("harrier-filter-parity-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut failures = Vec::new();
    let (mut compared, mut selected) = (0, 0);
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "scap"))
        // sysdig 0.29 cannot skip section-header options (see harrier-scap's sysdig_reference.rs).
        .filter(|p| !p.ends_with("curl_google_comments.scap"))
        .collect();
    names.sort();
    for capture in &names {
        let name = capture.file_name().unwrap().to_string_lossy().to_string();
        let file = tmp.join(format!("{name}.hrcap"));
        let out = Command::new(HARRIER).arg("convert").arg(capture).arg(&file).output().unwrap();
        assert!(out.status.success(), "convert {name}: {}", String::from_utf8_lossy(&out.stderr));
        for expr in FILTERS {
            let want = sysdig_select(&sysdig, capture, expr);
            let got = harrier_select(&file, expr);
            selected += want.len();
            compared += 1;
            if let Err(e) = same(&want, &got) {
                failures.push(format!("{name}: {expr:?}: {e}"));
            }
        }
    }
    for (expr, why) in MUST_DIFFER {
        let differs = names.iter().any(|capture| {
            let file = tmp.join(format!("{}.hrcap", capture.file_name().unwrap().to_string_lossy()));
            same(&sysdig_select(&sysdig, capture, expr), &harrier_select(&file, expr)).is_err()
        });
        if !differs {
            failures.push(format!("{expr:?} is listed as differing ({why}) but agrees on every capture"));
        }
    }
    std::fs::remove_dir_all(&tmp).unwrap();
    assert!(failures.is_empty(), "{} of {compared} differ:\n{}", failures.len(), failures.join("\n"));
    assert!(names.len() >= 7 && selected > 1000, "{} captures, {selected} events selected", names.len());
}
