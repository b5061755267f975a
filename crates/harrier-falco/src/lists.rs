//! What Falco's listing options print: -L/-l (rules and their descriptions), --list (fields),
//! --list-events, and the schemas.

use crate::cli::Format;
use anyhow::{bail, Result};
use harrier_rules::ruleset::RuleSet;
use serde_json::json;

/// Falco's two columns: the name padded to 50, then the text.
fn two_columns(l: &str, r: &str) -> String {
    format!("{l:<50} {r}\n")
}

/// Falco's wrap_text: words on lines of `line_len - indent`, continued lines indented.
fn wrap(text: &str, indent: usize, line_len: usize) -> String {
    let mut out = String::new();
    let mut len = 0;
    for w in text.split_whitespace() {
        if len + w.len() + 1 <= line_len - indent {
            len += w.len() + 1;
        } else {
            out.push('\n');
            out.push_str(&" ".repeat(indent.max(1)));
            len = w.len() + 1;
        }
        out.push_str(w);
        out.push(' ');
    }
    out
}

/// -L (every rule) or -l RULE: Falco's text table (with json_output: [`crate::describe`]).
pub fn describe(rules: &RuleSet, only: Option<&str>) -> Result<String> {
    let picked: Vec<_> = rules.rules().iter().filter(|r| only.is_none_or(|n| r.name == n)).collect();
    if let Some(n) = only {
        if picked.is_empty() {
            bail!("Rule \"{n}\" is not loaded");
        }
    }
    let mut s = two_columns("Rule", "Description") + &two_columns("----", "-----------");
    for r in picked {
        s += &two_columns(&r.name, &(wrap(&r.desc, 51, 110) + "\n"));
    }
    Ok(s.trim_end_matches('\n').to_string() + "\n")
}

/// --list [syscall]: every field Harrier's rules can use.
pub fn fields(names_only: bool, format: Format) -> String {
    use harrier_rules::fields::FIELDS;
    match format {
        Format::Json => {
            let fs: Vec<_> =
                FIELDS.iter().map(|f| json!({"name": f.name, "type": f.ty.name(), "desc": f.desc})).collect();
            json!([{"source": "syscall", "fields": fs}]).to_string() + "\n"
        }
        _ if names_only => FIELDS.iter().map(|f| format!("{}\n", f.name)).collect(),
        Format::Markdown => {
            FIELDS.iter().map(|f| format!("`{}` | {} | {}\n", f.name, f.ty.name(), f.desc)).collect()
        }
        Format::Text => {
            FIELDS.iter().map(|f| format!("{:<30} {:<12} {}\n", f.name, f.ty.name(), f.desc)).collect()
        }
    }
}

/// --list-events: the syscalls Harrier decodes.
pub fn events(format: Format) -> String {
    let names = harrier_schema::SYSCALLS.iter().map(|s| s.name);
    match format {
        Format::Json => json!({"syscalls": names.collect::<Vec<_>>()}).to_string() + "\n",
        _ => names.map(|n| format!("syscall {n}\n")).collect(),
    }
}

/// -i: the high-volume I/O syscalls Falco leaves out by default. Harrier attaches only what
/// the loaded rules and state tables read, so these too stay out unless a rule reads them.
pub fn ignored_events() -> String {
    const IO: &[&str] = &[
        "pread64", "preadv", "preadv2", "pwrite64", "pwritev", "pwritev2", "read", "readv", "recvfrom",
        "recvmmsg", "recvmsg", "sendfile", "sendmmsg", "sendmsg", "sendto", "splice", "tee", "vmsplice",
        "write", "writev",
    ];
    let mut s = String::from("Ignored syscall(s) (unless a loaded rule reads them):\n");
    for n in IO {
        s += &format!("- {n}\n");
    }
    s
}

/// The version Harrier's container engine answers for Falco's container plugin.
pub const CONTAINER_PLUGIN_VERSION: &str = "0.7.1";

/// --list-plugins / --plugin-info for a loaded plugin, in Falco's words.
pub fn plugin(lib: &harrier_plugin::Library, info: Option<Option<String>>) -> String {
    let mut s = format!(
        "Name: {}\nDescription: {}\nContact: {}\nVersion: {}\nCapabilities: \n",
        lib.name, lib.description, lib.contact, lib.version
    );
    if let Some(src) = &lib.source {
        s += &format!("  - Event Sourcing (ID={}, source='{src}')\n", lib.id);
    }
    let caps = [
        (lib.caps.extraction, "Field Extraction"),
        (lib.caps.parsing, "Event Parsing"),
        (lib.caps.async_events, "Async Events"),
    ];
    for (_, c) in caps.iter().filter(|c| c.0) {
        s += &format!("  - {c}\n");
    }
    if let Some(params) = info {
        match &lib.init_schema {
            Some(schema) => s += &format!("\nInit config schema type: JSON\n{schema}\n"),
            None => s += "\nInit config schema type: Not available\n",
        }
        match params {
            Some(p) => s += &format!("\nSuggested open params:\n{p}\n"),
            None => s += "\nNo suggested open params available: plugin has not been configured, or it does not implement the open params suggestion functionality\n",
        }
    }
    s
}

/// --list SOURCE for a plugin source: each plugin's fields that apply to it.
pub fn plugin_fields(
    source: &str,
    libs: &[&harrier_plugin::Library],
    fields: &harrier_rules::fields::SourceFields,
    names_only: bool,
) -> String {
    let mut s = String::new();
    for (i, lib) in libs.iter().enumerate() {
        let mine: Vec<_> = fields.fields.iter().filter(|f| f.plugin as usize == i).collect();
        if mine.is_empty() {
            continue;
        }
        if !names_only {
            s += &format!(
                "-------------------------------\n{:<30}{} (plugin)\n{:<30}{source} \n\n",
                "Field Class:", lib.name, "Event Sources:"
            );
        }
        for f in mine {
            match names_only {
                true => s += &format!("{}\n", f.name),
                false => s += &format!("{:<30}{} \n", f.name, f.desc),
            }
        }
        if !names_only {
            s += "\n";
        }
    }
    s
}

/// --list-plugins / --plugin-info for `container`: Harrier's built-in container engine, which
/// stands in for Falco's container plugin (its fields; no plugin library is loaded).
pub fn container_plugin(info: bool) -> String {
    let mut s = format!(
        "Name: container\nDescription: Harrier's built-in container engine, standing in for Falco's container plugin (no library loaded)\n\
         Contact: the Harrier project (the plugin it stands in for: falcosecurity/plugins)\nVersion: {CONTAINER_PLUGIN_VERSION} (harrier built-in)\n\
         Capabilities:\n  - Field Extraction\n  - Event Parsing\n  - Async Events\n",
    );
    if info {
        s += "Init config schema type: JSON\n{}\nNo suggested open params available: the container source is not an event source.\n";
    }
    s
}

/// --config-schema / --rule-schema: the keys Harrier reads, as a JSON schema.
pub fn schema(rules: bool) -> String {
    if rules {
        let item = json!({"type": "object", "properties": {
            "rule": {"type": "string"}, "macro": {"type": "string"}, "list": {"type": "string"},
            "condition": {"type": "string"}, "output": {"type": "string"}, "desc": {"type": "string"},
            "priority": {"type": "string"}, "tags": {"type": "array"}, "enabled": {"type": "boolean"},
            "exceptions": {"type": "array"}, "items": {"type": "array"}, "override": {"type": "object"},
            "append": {"type": "boolean"}, "source": {"type": "string"},
            "required_engine_version": {"type": "string"}, "required_plugin_versions": {"type": "array"},
        }});
        return json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": item})
            .to_string();
    }
    let props: serde_json::Map<String, serde_json::Value> =
        crate::keys::KEYS.iter().map(|k| (k.name.to_string(), json!({"description": k.what}))).collect();
    json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": props})
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn descriptions_wrap_as_falcos_do() {
        let w = super::wrap(&"word ".repeat(20), 51, 110);
        assert_eq!(w.lines().next().unwrap(), "word ".repeat(11).as_str());
        assert!(w.lines().nth(1).unwrap().starts_with(&" ".repeat(51)));
    }
}
