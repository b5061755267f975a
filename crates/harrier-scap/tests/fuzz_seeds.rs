//! The crafted captures the legacy reader's fuzz target starts from
//! (fuzz/seeds/convert, beside the real captures of shared/data/scap that
//! scripts/fuzz.sh adds): every process-list version, every event-block kind,
//! gzip and the large-payload block, built with the same helpers as the block
//! tests. Each must convert, so the fuzzer starts from inputs that reach deep
//! into the converter; the committed files must equal what is built here
//! (HARRIER_UPDATE_SEEDS=1 rewrites them).

mod common;

use common::build::*;
use std::path::PathBuf;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    let pair = |f: &mut Vec<u8>, kind: u32| {
        let (path, flags, mode) = (b"/etc/hosts\0".to_vec(), u32b(1 | 1 << 12), u32b(0));
        f.extend(event(kind, 10, 101, 2, &[&path, &flags, &mode], false));
        f.extend(event(kind, 20, 101, 3, &[&i64b(3), &path, &flags, &mode], false));
    };
    for version in 1..=9 {
        let mut f = shb(1, 2);
        let mut body = proc_entry(version, 100);
        body.extend(proc_entry(version, 200));
        f.extend(block(proclist_kind(version), &body));
        pair(&mut f, 0x216);
        v.push((format!("proclist-v{version}.scap"), f));
    }
    for kind in [0x204, 0x8010ABCD, 0x208, 0x216, 0x217, 0x221, 0x222] {
        let mut f = shb(1, 0);
        pair(&mut f, kind);
        v.push((format!("events-{kind:#x}.scap"), f));
    }
    let mut f = shb(1, 2);
    f.extend(event(0x221, 5, 1, 324, &[&[b'x'; 300]], true));
    v.push(("large-payload.scap".into(), f));
    let mut plain = shb(1, 1);
    pair(&mut plain, 0x216);
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut e, &plain).unwrap();
    v.push(("gzip.scap".into(), e.finish().unwrap()));
    v
}

#[test]
fn fuzz_seeds_convert_and_match_the_committed_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/convert");
    let update = std::env::var_os("HARRIER_UPDATE_SEEDS").is_some();
    for (name, bytes) in seeds() {
        common::convert_bytes(bytes.clone()).unwrap_or_else(|e| panic!("seed {name}: {e}"));
        let path = dir.join(&name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (HARRIER_UPDATE_SEEDS=1 writes it)", path.display()));
        assert!(
            committed == bytes,
            "{} differs from the crafted seed (HARRIER_UPDATE_SEEDS=1)",
            path.display()
        );
    }
}
