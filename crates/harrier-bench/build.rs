//! Compiles bpf/cost_probes.bpf.c (the kernel-cost experiments) into a skeleton.

use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let src = root.join("bpf/cost_probes.bpf.c");
    SkeletonBuilder::new()
        .source(&src)
        .obj(out.join("cost_probes.bpf.o"))
        .clang_args([
            format!("-I{}", root.join("bpf/include").display()),
            format!("-I{}", root.join("bpf/vmlinux").display()),
        ])
        .build_and_generate(out.join("cost_probes.skel.rs"))
        .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", root.join("bpf/include").display());
}
