fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let schema = harrier_eventgen::schema_dir_from_manifest(&manifest);
    println!("cargo:rerun-if-changed={}", schema.display());
    let tables = harrier_eventgen::load(&schema).unwrap_or_else(|e| panic!("{e}"));
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("schema.gen.rs");
    std::fs::write(out, harrier_eventgen::generate_rust(&tables)).unwrap();
}
