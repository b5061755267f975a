//! Builds plugins/testsource.c, Harrier's own plugin for the tests, into
//! target/<profile>/libharrier-testsource.so; its path is env!("HARRIER_TEST_PLUGIN").

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let src = manifest.join("../../plugins/testsource.c").canonicalize().unwrap();
    // OUT_DIR is target/<profile>/build/harrier-plugin-<hash>/out.
    let lib = out.ancestors().nth(3).unwrap().join("libharrier-testsource.so");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("running cc for plugins/testsource.c");
    assert!(status.success(), "building plugins/testsource.c failed");
    println!("cargo:rustc-env=HARRIER_TEST_PLUGIN={}", lib.display());
    println!("cargo:rerun-if-changed={}", src.display());
}
