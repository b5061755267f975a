//! Generates the `Field` enum and its metadata table from schema/fields.tbl, the one
//! definition of rule fields (docs/fields.md is generated from the same table).

use std::fmt::Write as _;
use std::path::PathBuf;

const TYPES: &[&str] = &[
    "string", "u64", "s64", "bool", "ipaddr", "ipnet", "port", "bytes", "flags", "list", "reltime",
    "abstime", "dyn",
];
const ARGS: &[&str] = &["-", "idx", "idx?", "key", "key?", "idxkey"];

fn camel(name: &str) -> String {
    let mut out = String::new();
    for part in name.split(['.', '_']) {
        let mut c = part.chars();
        if let Some(f) = c.next() {
            out.push(f.to_ascii_uppercase());
            out.extend(c);
        }
    }
    out
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let tbl = manifest.join("../../schema/fields.tbl");
    println!("cargo:rerun-if-changed={}", tbl.display());
    let text = std::fs::read_to_string(&tbl).unwrap_or_else(|e| panic!("{}: {e}", tbl.display()));
    let mut variants = String::new();
    let mut infos = String::new();
    let mut names = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut it = line.split_whitespace();
        let mut next = |what: &str| {
            it.next().unwrap_or_else(|| panic!("fields.tbl:{}: missing {what}", n + 1)).to_string()
        };
        let (name, ty, arg, events, extractor) =
            (next("name"), next("type"), next("arg"), next("events"), next("extractor"));
        let desc: Vec<&str> = it.collect();
        let desc = desc.join(" ");
        assert!(TYPES.contains(&ty.as_str()), "fields.tbl:{}: unknown type {ty}", n + 1);
        assert!(ARGS.contains(&arg.as_str()), "fields.tbl:{}: unknown arg form {arg}", n + 1);
        assert!(!desc.is_empty(), "fields.tbl:{}: missing description", n + 1);
        assert!(!names.contains(&name), "fields.tbl:{}: duplicate field {name}", n + 1);
        let variant = camel(&name);
        let ty_v = match ty.as_str() {
            "string" => "Str",
            "u64" => "U64",
            "s64" => "S64",
            "bool" => "Bool",
            "ipaddr" => "IpAddr",
            "ipnet" => "IpNet",
            "port" => "Port",
            "bytes" => "Bytes",
            "flags" => "Flags",
            "list" => "List",
            "reltime" => "RelTime",
            "abstime" => "AbsTime",
            _ => "Dyn",
        };
        let arg_v = match arg.as_str() {
            "-" => "None",
            "idx" => "Index",
            "idx?" => "OptIndex",
            "key" => "Key",
            "key?" => "OptKey",
            _ => "IndexOrKey",
        };
        let ev = match events.as_str() {
            "all" => "Events::All".to_string(),
            "fd" => "Events::Fd".to_string(),
            "file" => "Events::File".to_string(),
            "net" => "Events::Net".to_string(),
            "exec" => "Events::Exec".to_string(),
            "param" => "Events::Param".to_string(),
            "none" => "Events::Never".to_string(),
            "plugin" => "Events::Plugin".to_string(),
            list => format!("Events::Syscalls(&{:?})", list.split(',').collect::<Vec<_>>()),
        };
        writeln!(variants, "    /// {desc}\n    {variant},").unwrap();
        writeln!(
            infos,
            "    FieldInfo {{ field: Field::{variant}, name: {name:?}, ty: FieldType::{ty_v}, arg: ArgForm::{arg_v}, events: {ev}, extractor: {extractor:?}, desc: {desc:?} }},"
        )
        .unwrap();
        names.push(name);
    }
    let out = format!(
        "/// A rule field, one per row of schema/fields.tbl.\n#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\n#[repr(u16)]\npub enum Field {{\n{variants}}}\n\n/// Metadata of every field, indexed by `Field as usize`.\npub static FIELDS: &[FieldInfo] = &[\n{infos}];\n"
    );
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("fields.gen.rs");
    std::fs::write(dest, out).unwrap();
}
