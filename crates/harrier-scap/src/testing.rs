//! For tests (this crate's and the CLI's): where Falco's public legacy captures are.

use std::path::PathBuf;

/// SCAP_DATA_DIR, else the first `shared/data/scap` above this crate, else
/// /work/shared/data/scap (the project's machines keep Falco's public test
/// captures there, so a checkout anywhere finds them; they are not copied into
/// the repository). Under CI=true a missing directory fails the test;
/// otherwise None, after a note.
pub fn scap_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SCAP_DATA_DIR") {
        return Some(PathBuf::from(d));
    }
    let above = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join("shared/data/scap"))
        .find(|d| d.join("curl_google.scap").exists());
    let fixed = Some(PathBuf::from("/work/shared/data/scap")).filter(|d| d.join("curl_google.scap").exists());
    let found = above.or(fixed);
    if found.is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("the legacy captures (shared/data/scap) were not found: set SCAP_DATA_DIR");
        }
        eprintln!("note: legacy captures not found (set SCAP_DATA_DIR); skipped");
    }
    found
}
