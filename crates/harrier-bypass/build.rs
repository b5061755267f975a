//! Compiles bpf/bypass.bpf.c into a libbpf-rs skeleton and builds the C
//! library bypass/libharrier-bypass.so (plus its test and bench programs) with
//! `make -C bypass`, into target/<profile>/bypass/. The library is also linked
//! from target/<profile>/libharrier-bypass.so; its path is exported to the crate
//! as env!("HARRIER_BYPASS_LIB").

use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let root = manifest.join("../..").canonicalize().unwrap();

    let src = root.join("bpf/bypass.bpf.c");
    SkeletonBuilder::new()
        .source(&src)
        .obj(out.join("bypass.bpf.o"))
        .clang_args([
            format!("-I{}", root.join("bpf/include").display()),
            format!("-I{}", root.join("bpf/vmlinux").display()),
            "-mcpu=v3".into(), // atomics with fetch/cmpxchg
            "-Wall".into(),
            "-Wno-unused-function".into(),
        ])
        .build_and_generate(out.join("bypass.skel.rs"))
        .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));

    // OUT_DIR is target/<profile>/build/harrier-bypass-<hash>/out.
    let profile_dir = out.ancestors().nth(3).unwrap().to_path_buf();
    let build_dir = profile_dir.join("bypass");
    let status = Command::new("make")
        .arg("-C")
        .arg(root.join("bypass"))
        .arg(format!("O={}", build_dir.display()))
        .arg("all")
        .env_remove("MAKEFLAGS") // cargo's jobserver flags confuse nested make
        .env_remove("MFLAGS")
        .status()
        .expect("running make -C bypass");
    assert!(status.success(), "make -C bypass failed");
    let lib = build_dir.join("libharrier-bypass.so");
    // A symlink, not a copy: the uprobe is attached by inode, so both paths
    // must be the same file.
    let copy = profile_dir.join("libharrier-bypass.so");
    let _ = std::fs::remove_file(&copy);
    std::os::unix::fs::symlink(&lib, &copy).expect("linking libharrier-bypass.so");

    println!("cargo:rustc-env=HARRIER_BYPASS_LIB={}", copy.display());
    println!("cargo:rustc-env=HARRIER_BYPASS_BUILD={}", build_dir.display());
    for p in ["bpf/bypass.bpf.c", "bpf/include/bypass.h", "bypass"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
}
