//! Outputs: `%field` formats compiled into segments, rendered as Falco renders them, plus
//! the `output_fields` map of Falco's JSON alerts.

use crate::expr::FieldSel;
use crate::fields;
use crate::value::{EventSource, Value};

#[derive(Debug, Clone)]
pub enum Segment {
    Text(String),
    Field { name: String, sel: FieldSel },
}

/// A compiled output format.
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub segments: Vec<Segment>,
    /// Extra `output_fields` that are not in the text (Falco's `append_output.extra_fields`):
    /// a field, or a fixed value.
    pub extra: Vec<(String, Option<FieldSel>, Option<String>)>,
}

/// A value in `output_fields`, typed as Falco's JSON types it.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputValue {
    /// The field has no value (Falco's `<NA>`, JSON null).
    Null,
    Str(String),
    U64(u64),
    S64(i64),
    Bool(bool),
    /// A plugin's list field: "(a,b)" in the text, an array in output_fields.
    List(Vec<OutputValue>),
}

impl OutputValue {
    fn text(&self, out: &mut String) {
        use std::fmt::Write;
        match self {
            OutputValue::Null => out.push_str("<NA>"),
            OutputValue::Str(s) => out.push_str(s),
            OutputValue::U64(n) => {
                let _ = write!(out, "{n}");
            }
            OutputValue::S64(n) => {
                let _ = write!(out, "{n}");
            }
            OutputValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            OutputValue::List(vs) => {
                out.push('(');
                for (i, v) in vs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.text(out);
                }
                out.push(')');
            }
        }
    }
}

/// What `%container.info` stands for when no extra output is configured: Falco's generic
/// replacement.
pub const CONTAINER_INFO: &str = "%container.name (id=%container.id)";

/// Parses an output format. Unknown fields are returned as errors (name, byte offset).
pub fn compile(fmt: &str, container_info: &str) -> Result<Output, (String, usize)> {
    compile_in(None, fmt, container_info)
}

/// [`compile`] for a source's rules (a plugin source's fields: see [`fields::resolve_in`]).
pub fn compile_in(
    scope: Option<&fields::SourceFields>,
    fmt: &str,
    container_info: &str,
) -> Result<Output, (String, usize)> {
    let fmt = fmt.replace("%container.info", container_info);
    let b = fmt.as_bytes();
    let mut segs = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 1 < b.len() && (b[i + 1].is_ascii_alphabetic() || b[i + 1] == b'(') {
            // %field, %field[arg] or %(field)
            let paren = b[i + 1] == b'(';
            let start = if paren { i + 2 } else { i + 1 };
            let mut j = start;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'.' || b[j] == b'_') {
                j += 1;
            }
            let mut name_end = j;
            // Trailing dots belong to the text ("%proc.name." ends a sentence).
            while name_end > start && b[name_end - 1] == b'.' {
                name_end -= 1;
            }
            let name = &fmt[start..name_end];
            let mut arg = None;
            let mut end = name_end;
            if name_end == j && j < b.len() && b[j] == b'[' {
                if let Some(k) = fmt[j..].find(']') {
                    arg = Some(&fmt[j + 1..j + k]);
                    end = j + k + 1;
                }
            }
            if paren {
                if b.get(end) == Some(&b')') {
                    end += 1;
                } else {
                    return Err((name.to_string(), i));
                }
            }
            let (field, farg) = fields::resolve_in(scope, name, arg).map_err(|_| (name.to_string(), i))?;
            if !text.is_empty() {
                segs.push(Segment::Text(std::mem::take(&mut text)));
            }
            let written = match arg {
                Some(a) => format!("{name}[{a}]"),
                None => name.to_string(),
            };
            segs.push(Segment::Field {
                name: written,
                sel: FieldSel { field, arg: farg, tfs: Box::new([]) },
            });
            i = end;
        } else {
            let ch = fmt[i..].chars().next().unwrap();
            text.push(ch);
            i += ch.len_utf8();
        }
    }
    if !text.is_empty() {
        segs.push(Segment::Text(text));
    }
    Ok(Output { segments: segs, extra: Vec::new() })
}

/// Text as Falco prints a field: invalid UTF-8 and non-printable characters
/// (C0 and C1 controls, DEL) each become U+FFFD (libsinsp's sanitize_string).
pub fn sanitize(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.chars().all(|c| !c.is_control()) {
        return s.into_owned();
    }
    s.chars().map(|c| if c.is_control() { '\u{FFFD}' } else { c }).collect()
}

/// The value of a field for an output: several values are joined with commas.
pub fn field_value<S: EventSource + ?Sized>(src: &S, sel: &FieldSel) -> OutputValue {
    let mut out: Option<OutputValue> = None;
    let list = matches!(&sel.arg, crate::fields::FieldArg::Plugin(p) if p.list);
    src.extract(sel.field, &sel.arg, &mut |v| {
        let this = match v {
            Value::Str(s) => OutputValue::Str(sanitize(s)),
            Value::U64(n) => OutputValue::U64(n),
            Value::S64(n) => OutputValue::S64(n),
            Value::Bool(b) => OutputValue::Bool(b),
            Value::Ip(ip) => OutputValue::Str(ip.to_string()),
            Value::Flags { bits, renderer } => OutputValue::Str(
                harrier_schema::render::render(renderer, bits).unwrap_or_else(|| bits.to_string()),
            ),
        };
        out = Some(match out.take() {
            None if list => OutputValue::List(vec![this]),
            Some(OutputValue::List(mut vs)) if list => {
                vs.push(this);
                OutputValue::List(vs)
            }
            None => this,
            Some(prev) => {
                let mut s = String::new();
                prev.text(&mut s);
                s.push(',');
                this.text(&mut s);
                OutputValue::Str(s)
            }
        });
        false
    });
    out.unwrap_or(OutputValue::Null)
}

/// Falco writes a time field as text in the output but as the event's time in ns (a JSON
/// number) in `output_fields` (libsinsp's extract_as_js for evt.time, evt.datetime...).
fn json_value<S: EventSource + ?Sized>(src: &S, sel: &FieldSel, text: OutputValue) -> OutputValue {
    use crate::fields::Field::*;
    match sel.field {
        EvtTime | EvtTimeS | EvtTimeIso8601 | EvtDatetime => {
            field_value(src, &FieldSel { field: EvtRawtime, arg: sel.arg.clone(), tfs: Box::new([]) })
        }
        _ => text,
    }
}

impl Output {
    /// Renders the text and the `output_fields` (each field once, as written).
    pub fn format<S: EventSource + ?Sized>(&self, src: &S) -> (String, Vec<(String, OutputValue)>) {
        let mut text = String::new();
        let mut fields: Vec<(String, OutputValue)> = Vec::new();
        for seg in &self.segments {
            match seg {
                Segment::Text(t) => text.push_str(t),
                Segment::Field { name, sel } => {
                    let v = field_value(src, sel);
                    v.text(&mut text);
                    if !fields.iter().any(|(n, _)| n == name) {
                        fields.push((name.clone(), json_value(src, sel, v)));
                    }
                }
            }
        }
        for (name, sel, fixed) in &self.extra {
            if fields.iter().any(|(n, _)| n == name) {
                continue;
            }
            let v = match (sel, fixed) {
                (_, Some(s)) => OutputValue::Str(s.clone()),
                (Some(sel), None) => json_value(src, sel, field_value(src, sel)),
                (None, None) => OutputValue::Null,
            };
            fields.push((name.clone(), v));
        }
        (text, fields)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_and_bad_utf8_print_as_falco_prints_them() {
        assert_eq!(super::sanitize(b"perl -e a;\n  b"), "perl -e a;\u{FFFD}  b");
        assert_eq!(super::sanitize(b"x\x7f\xc2\x85y\xffz"), "x\u{FFFD}\u{FFFD}y\u{FFFD}z");
        assert_eq!(super::sanitize("caf\u{e9}".as_bytes()), "caf\u{e9}");
    }
}
