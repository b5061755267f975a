//! Shared by the tests: where the legacy captures are, and converting one.
#![allow(dead_code, unused_imports)]

pub mod build;

use harrier_scap::{Converted, Converter, ForeignEvent, Snapshot, Stats};
use std::path::{Path, PathBuf};

pub use harrier_scap::testing::scap_dir;

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
