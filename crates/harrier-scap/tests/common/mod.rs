//! Shared by the tests: where the legacy captures are, and converting one.
#![allow(dead_code)]

pub mod build;

use harrier_scap::{Converted, Converter, ForeignEvent, Snapshot, Stats};
use std::path::{Path, PathBuf};

/// SCAP_DATA_DIR, else the first `shared/data/scap` above the crate, else
/// /work/shared/data/scap (the project's machines keep Falco's public test
/// captures there; they are not copied into the repository). Under CI=true a
/// missing directory fails the test.
pub fn scap_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SCAP_DATA_DIR") {
        return Some(PathBuf::from(d));
    }
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        let c = p.join("shared/data/scap");
        if c.join("curl_google.scap").exists() {
            return Some(c);
        }
        if !p.pop() {
            break;
        }
    }
    let fixed = PathBuf::from("/work/shared/data/scap");
    if fixed.join("curl_google.scap").exists() {
        return Some(fixed);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("the legacy captures (shared/data/scap) were not found: set SCAP_DATA_DIR");
    }
    eprintln!("note: legacy captures not found (set SCAP_DATA_DIR); skipped");
    None
}

/// Every .scap file of the directory, sorted.
pub fn captures(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "scap"))
        .collect();
    v.sort();
    assert!(v.len() >= 8, "expected the 8 legacy captures in {}", dir.display());
    v
}

#[derive(Default, Debug)]
pub struct Out {
    pub events: Vec<Vec<u8>>,
    pub foreign: Vec<ForeignEvent>,
    pub snapshots: Vec<Snapshot>,
    pub stats: Stats,
}

pub fn convert_bytes(bytes: Vec<u8>) -> Result<Out, harrier_scap::ConvertError> {
    let mut out = Out::default();
    let len = bytes.len() as u64;
    let c = Converter::from_reader(std::io::Cursor::new(bytes), Some(len))
        .map_err(harrier_scap::ConvertError::Read)?;
    let stats = c.run(|item| {
        match item {
            Converted::Event(b) => out.events.push(b.to_vec()),
            Converted::Foreign(f) => out.foreign.push(f),
            Converted::Snapshot(s) => out.snapshots.push(s),
        }
        Ok(())
    })?;
    out.stats = stats;
    Ok(out)
}

pub fn convert(path: &Path) -> Out {
    convert_bytes(std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
