//! `falco -V FILE...`: each file validated with the ones before it loaded (a later file may
//! append to an earlier one), reported as Falco reports it: `<file>: Ok` / `Invalid` with the
//! error codes, or with json_output Falco's `falco_load_results` (codes, messages, the item
//! each diagnostic is about and its position, a snippet).

use harrier_rules::ruleset::{LoadOptions, RuleSet};
use harrier_rules::Diagnostic;
use serde_json::{json, Value};

/// One diagnostic as Falco files it.
#[derive(Debug, Clone)]
pub struct Item {
    pub code: &'static str,
    pub message: String,
    /// The items it is about, outermost first, e.g. [("rule", "r"), ("exception", "ex1")].
    pub items: Vec<(&'static str, String)>,
    /// 1-based, as Harrier's loader reports them; 0 when unknown.
    pub line: u32,
    pub col: u32,
}

#[derive(Debug, Clone)]
pub struct FileResult {
    pub name: String,
    pub successful: bool,
    pub errors: Vec<Item>,
    pub warnings: Vec<Item>,
}

/// Falco's error codes' short texts (falco_load_result.cpp's error_strings; Falco puts these
/// in `codedesc` too).
fn error_text(code: &str) -> &'static str {
    match code {
        "LOAD_ERR_FILE_READ" => "File read error",
        "LOAD_ERR_YAML_PARSE" => "YAML parse error",
        "LOAD_ERR_YAML_VALIDATE" => "Error validating internal structure of YAML file",
        "LOAD_ERR_COMPILE_CONDITION" => "Error compiling condition",
        "LOAD_ERR_COMPILE_OUTPUT" => "Error compiling output",
        "LOAD_ERR_EXTENSION" => "Error in extension item",
        _ => "Error validating rule/macro/list/exception objects",
    }
}

fn warning_text(code: &str) -> &'static str {
    match code {
        "LOAD_UNKNOWN_SOURCE" => "Unknown event source",
        "LOAD_UNSAFE_NA_CHECK" => "Unsafe <NA> comparison in condition",
        "LOAD_NO_EVTTYPE" => "Condition has no event-type restriction",
        "LOAD_UNKNOWN_FILTER" => "Unknown field or event-type in condition or output",
        "LOAD_UNUSED_MACRO" => "Unused macro",
        "LOAD_UNUSED_LIST" => "Unused list",
        "LOAD_UNKNOWN_ITEM" => "Unknown rules file item",
        "LOAD_DEPRECATED_ITEM" => "Used deprecated item",
        "LOAD_APPEND_NO_VALUES" => "Overriding/appending with no values",
        "LOAD_EXCEPTION_NAME_NOT_UNIQUE" => "Multiple exceptions defined with the same name",
        "LOAD_INVALID_MACRO_NAME" => "Invalid macro name",
        "LOAD_INVALID_LIST_NAME" => "Invalid list name",
        "LOAD_COMPILE_CONDITION" => "Warning in rule condition",
        _ => "Warning in extension item",
    }
}

/// The Falco code of one of Harrier's diagnostics that does not say it itself, from what its
/// message says. None: a diagnostic Falco has no counterpart for (a field Harrier cannot
/// extract yet, its plugin notice).
fn infer_code(d: &Diagnostic) -> Option<&'static str> {
    let m = d.msg.as_str();
    let has = |s: &str| m.contains(s);
    if !d.is_error() {
        return None;
    }
    Some(if has("invalid YAML") {
        "LOAD_ERR_YAML_PARSE"
    } else if has("in output") {
        "LOAD_ERR_COMPILE_OUTPUT"
    } else if has("must be a") || has("misses") || has("unknown item") {
        "LOAD_ERR_YAML_VALIDATE"
    } else if has("append") || has("override") || has("exception") {
        "LOAD_ERR_VALIDATE"
    } else {
        "LOAD_ERR_COMPILE_CONDITION"
    })
}

/// The rule, macro or list a message names ("rule 'x': ...").
fn item_of(m: &str) -> Vec<(&'static str, String)> {
    for (kind, prefix) in [("rule", "rule '"), ("macro", "macro '"), ("list", "list '")] {
        if let Some(i) = m.find(prefix) {
            let rest = &m[i + prefix.len()..];
            if let Some(end) = rest.find('\'') {
                return vec![(kind, rest[..end].to_string())];
            }
        }
    }
    Vec::new()
}

/// One diagnostic as Falco files it, or None for Harrier's own notes.
fn item(d: &Diagnostic) -> Option<Item> {
    let (code, message, items) = match &d.falco {
        Some(f) => (f.code, f.message.clone(), f.items.clone()),
        None => (infer_code(d)?, d.msg.clone(), item_of(&d.msg)),
    };
    Some(Item { code, message, items, line: d.line, col: d.col })
}

/// Validates each file with those before it loaded: a file's results are what loading it
/// added to the loads before (Falco loads them one after the other into one engine).
pub fn validate(contents: &[(String, String)], opts: &LoadOptions) -> Vec<FileResult> {
    let mut out = Vec::new();
    let mut before: Vec<Diagnostic> = Vec::new();
    for i in 0..contents.len() {
        let diags = diagnose_all(&contents[..=i], opts);
        let mut r = FileResult {
            name: contents[i].0.clone(),
            successful: true,
            errors: Vec::new(),
            warnings: Vec::new(),
        };
        for d in diags.iter().filter(|d| !before.contains(d)) {
            let Some(it) = item(d) else { continue };
            if it.code.starts_with("LOAD_ERR") {
                // Falco's loader stops at a file's first error.
                if r.successful {
                    r.errors.push(it);
                }
                r.successful = false;
            } else {
                r.warnings.push(it);
            }
        }
        before = diags;
        out.push(r);
    }
    out
}

/// The diagnostics of every source's rules: syscall's, then each plugin source's (their
/// rules compile against their plugins' fields), each said once.
fn diagnose_all(files: &[(String, String)], opts: &LoadOptions) -> Vec<Diagnostic> {
    let mut all = RuleSet::diagnose(files, opts);
    for src in opts.plugin_sources.iter().filter(|s| s.source != "syscall") {
        let o = LoadOptions { source: src.source.clone(), ..opts.clone() };
        for d in RuleSet::diagnose(files, &o) {
            if !all.contains(&d) {
                all.push(d);
            }
        }
    }
    all
}

/// Byte offset of a 1-based line and column.
fn offset(text: &str, line: u32, col: u32) -> usize {
    let start: usize = text.split_inclusive('\n').take(line.saturating_sub(1) as usize).map(str::len).sum();
    let rest = &text[start.min(text.len())..];
    start + rest.chars().take(col.saturating_sub(1) as usize).map(char::len_utf8).sum::<usize>()
}

/// Falco's snippet: the line holding the position, then a caret under it.
fn snippet(text: &str, it: &Item) -> String {
    if it.line == 0 {
        return "<No context available>\n".into();
    }
    let Some(l) = text.lines().nth(it.line as usize - 1) else { return "<No context available>\n".into() };
    format!("{l}\n{}^\n", " ".repeat(it.col.saturating_sub(1) as usize))
}

fn context(file: &str, text: &str, it: &Item) -> Value {
    let pos = |line: u32, col: u32| {
        json!({"name": file, "line": line.saturating_sub(1), "column": col.saturating_sub(1),
               "offset": if line == 0 { 0 } else { offset(text, line, col) }})
    };
    let mut locs = vec![json!({"item_type": "rules content", "item_name": "", "position": pos(0, 0)})];
    for (kind, name) in it.items.iter().filter(|(k, _)| *k != "rules content") {
        locs.push(json!({"item_type": kind, "item_name": name, "position": pos(it.line, it.col)}));
    }
    json!({"locations": locs, "snippet": snippet(text, it)})
}

/// Falco's JSON: `{"falco_load_results": [...]}`.
pub fn json(results: &[FileResult], contents: &[(String, String)]) -> Value {
    let text = |n: &str| contents.iter().find(|(f, _)| f == n).map_or("", |(_, t)| t.as_str());
    let rs: Vec<Value> = results
        .iter()
        .map(|r| {
            let t = text(&r.name);
            let one = |it: &Item, desc: &str| {
                json!({"code": it.code, "codedesc": desc, "message": it.message, "context": context(&r.name, t, it)})
            };
            json!({
                "name": r.name,
                "successful": r.successful,
                "errors": r.errors.iter().map(|e| one(e, error_text(e.code))).collect::<Vec<_>>(),
                "warnings": r.warnings.iter().map(|w| one(w, warning_text(w.code))).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "falco_load_results": rs })
}

/// Falco's verbose text for one file: the summary line, then each error and warning with
/// where it is, a snippet and its code.
pub fn verbose(r: &FileResult, contents: &[(String, String)]) -> String {
    let t = contents.iter().find(|(f, _)| *f == r.name).map_or("", |(_, t)| t.as_str());
    let mut s = format!("{}: {}", r.name, status(r));
    for (title, list, errors) in [("Errors", &r.errors, true), ("Warnings", &r.warnings, false)] {
        if list.is_empty() {
            continue;
        }
        s += &format!("\n{} {title}:\n", list.len());
        for it in list {
            s += &format!("In rules content: ({}:0:0)\n", r.name);
            for (kind, name) in it.items.iter().filter(|(k, _)| *k != "rules content") {
                s += &format!(
                    "    {kind} '{name}': ({}:{}:{})\n",
                    r.name,
                    it.line.saturating_sub(1),
                    it.col.saturating_sub(1)
                );
            }
            s += &format!("------\n{}------\n", snippet(t, it));
            let desc = if errors { error_text(it.code) } else { warning_text(it.code) };
            s += &format!("{} ({desc}): {}\n", it.code, it.message);
        }
    }
    s
}

fn status(r: &FileResult) -> &'static str {
    match (r.successful, r.warnings.is_empty()) {
        (false, _) => "Invalid",
        (true, true) => "Ok",
        (true, false) => "Ok, with warnings",
    }
}

/// What -V prints without json_output: per file `<file>: Ok`, or the verbose text of an
/// invalid one.
pub fn summary(results: &[FileResult], contents: &[(String, String)]) -> String {
    let lines: Vec<String> = results
        .iter()
        .map(|r| {
            if !r.successful || r.warnings.is_empty() {
                verbose(r, contents)
            } else {
                format!("{}: Ok, with warnings", r.name)
            }
        })
        .collect();
    lines.join("\n")
}
