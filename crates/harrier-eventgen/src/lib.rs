//! Build-time generator for Harrier's event schema.
//!
//! `schema/events.tbl` is the single definition of every typed event; this crate
//! turns it into the BPF exit/entry handlers (C) and the decoder tables (Rust),
//! so the two sides cannot disagree.

mod c;
mod rust;
pub mod table;

use std::path::Path;
pub use table::{TableError, Tables};

/// Reads both tables from the `schema/` folder.
pub fn load(schema_dir: &Path) -> Result<Tables, Box<dyn std::error::Error>> {
    let read = |name: &str| -> Result<(String, String), Box<dyn std::error::Error>> {
        let path = schema_dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok((path.display().to_string(), text))
    };
    let (sys_file, sys_text) = read("syscalls_x86_64.tbl")?;
    let syscalls = table::parse_syscalls(&sys_file, &sys_text)?;
    let (ev_file, ev_text) = read("events.tbl")?;
    let (schema_version, events) = table::parse_events(&ev_file, &ev_text, &syscalls)?;
    Ok(Tables { schema_version, syscalls, events })
}

pub fn generate_c(t: &Tables) -> String {
    c::generate(t)
}

pub fn generate_rust(t: &Tables) -> String {
    rust::generate(t)
}

/// Path of the workspace's `schema/` folder, for build scripts of crates in `crates/`.
pub fn schema_dir_from_manifest(manifest_dir: &str) -> std::path::PathBuf {
    Path::new(manifest_dir).join("../../schema")
}
