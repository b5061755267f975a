//! docs/fields.md, generated from the field table.

use crate::fields::FIELDS;
use std::fmt::Write;

/// The command that regenerates docs/fields.md.
pub const REGENERATE: &str = "UPDATE_FIELDS_DOC=1 cargo test -p harrier-rules --test fields_doc";

pub fn fields_markdown() -> String {
    let mut s = String::new();
    s.push_str("# Rule fields\n\n");
    s.push_str("<!-- Generated from schema/fields.tbl; do not edit. Regenerate with:\n     ");
    s.push_str(REGENERATE);
    s.push_str(" -->\n\n");
    s.push_str(
        "The fields Harrier's rules (Falco's language) can use in conditions and outputs. \
         **Events** says which events can give the field a value: on any other event a \
         comparison on it is false. **Extractor** is the routine of the integration that \
         produces it.\n\n",
    );
    let mut class = "";
    for f in FIELDS {
        let c = f.name.split('.').next().unwrap_or("");
        if c != class {
            class = c;
            let _ = write!(s, "\n## {c}\n\n| field | type | argument | events | extractor | description |\n|---|---|---|---|---|---|\n");
        }
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | `{}` | {} |",
            f.name,
            f.ty.name(),
            f.arg.name(),
            f.events.describe(),
            f.extractor,
            f.desc.replace('|', "\\|")
        );
    }
    s
}
