//! Compiles bpf/fswatch.bpf.c with clang and writes its libbpf-rs skeleton.

use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let root = PathBuf::from(&manifest).join("../..");
    let src = root.join("bpf/fswatch.bpf.c");
    SkeletonBuilder::new()
        .source(&src)
        .obj(out.join("fswatch.bpf.o"))
        .clang_args([
            format!("-I{}", root.join("bpf/include").display()),
            format!("-I{}", root.join("bpf/vmlinux").display()),
            "-Wall".into(),
            "-Wno-unused-function".into(),
        ])
        .build_and_generate(out.join("fswatch.skel.rs"))
        .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
    // The directory: fswatch's parts (bpf/include/fswatch/) and the shared headers.
    for f in ["bpf/fswatch.bpf.c", "bpf/include"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
}
