//! Generates the typed BPF handlers from schema/events.tbl, compiles
//! bpf/capture.bpf.c with clang and writes its libbpf-rs skeleton.

use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let root = PathBuf::from(&manifest).join("../..");
    let schema = harrier_eventgen::schema_dir_from_manifest(&manifest);
    let tables = harrier_eventgen::load(&schema).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(out.join("capture.gen.c"), harrier_eventgen::generate_c(&tables)).unwrap();

    for (name, skel) in [("capture", "capture.skel.rs"), ("empty", "empty.skel.rs")] {
        let src = root.join(format!("bpf/{name}.bpf.c"));
        SkeletonBuilder::new()
            .source(&src)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args([
                format!("-I{}", root.join("bpf/include").display()),
                format!("-I{}", root.join("bpf/vmlinux").display()),
                format!("-I{}", out.display()),
                "-Wall".into(),
                "-Wno-unused-function".into(),
            ])
            .build_and_generate(out.join(skel))
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
    }
    for dir in ["bpf", "schema"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
}
