//! One alert, and its two renderings: Falco's text line and Falco's JSON.
//! Both are written into a caller's buffer, so a sink that reuses its buffer
//! renders an alert without allocating.

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};
use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Falco's priorities, most severe first: an alert's rank is its index.
pub const PRIORITIES: [&str; 8] =
    ["Emergency", "Alert", "Critical", "Error", "Warning", "Notice", "Informational", "Debug"];

/// `priority`'s rank in [`PRIORITIES`] (0 is Emergency); any other name ranks as Debug.
pub fn rank(priority: &str) -> usize {
    PRIORITIES.iter().position(|p| *p == priority).unwrap_or(PRIORITIES.len() - 1)
}

/// A rule match, ready for every output. Built once, shared by reference.
#[derive(Debug, Clone)]
pub struct Alert {
    /// Wall-clock time of the event, ns since the epoch.
    pub time_ns: u64,
    pub rule: String,
    /// Falco's priority name: Emergency, Alert, Critical, Error, Warning,
    /// Notice, Informational or Debug.
    pub priority: &'static str,
    /// The rule's output with its fields filled in.
    pub output: String,
    /// Each field of the output (and appended ones) with its value.
    pub output_fields: Map<String, Value>,
    pub tags: Vec<String>,
    pub source: String,
    pub hostname: String,
    pub uuid: String,
}

/// What the JSON object carries beyond the always-present keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonShape {
    /// Falco's json_include_output_property (default true).
    pub include_output: bool,
    /// Falco's json_include_tags_property (default true).
    pub include_tags: bool,
    /// Falco's json_include_message_property (default false): the output without its prefix.
    pub include_message: bool,
    /// Falco's json_include_output_fields_property (default true).
    pub include_output_fields: bool,
}

impl Default for JsonShape {
    fn default() -> JsonShape {
        JsonShape {
            include_output: true,
            include_tags: true,
            include_message: false,
            include_output_fields: true,
        }
    }
}

/// Falco's time_format_iso_8601: like Falco's, one setting for the whole process, made
/// before the first alert (text lines and JSON `output` start with the ISO time, and
/// output_fields carry `evt.time.iso8601` instead of `evt.time`).
static ISO_8601: AtomicBool = AtomicBool::new(false);

pub fn set_time_format_iso_8601(on: bool) {
    ISO_8601.store(on, Ordering::Relaxed);
}

fn iso_8601() -> bool {
    ISO_8601.load(Ordering::Relaxed)
}

/// output_fields with the time field as the time format names it.
struct Fields<'a>(&'a Map<String, Value>, u64);

impl Serialize for Fields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !iso_8601() {
            return self.0.serialize(s);
        }
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            if k == "evt.time" {
                // Falco keeps the number (ns) under the ISO field's name.
                m.serialize_entry("evt.time.iso8601", &self.1)?;
            } else {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

fn utc(time_ns: u64) -> DateTime<Utc> {
    let secs = (time_ns / 1_000_000_000) as i64;
    DateTime::from_timestamp(secs, (time_ns % 1_000_000_000) as u32).unwrap_or_default()
}

/// RFC 3339 with nanoseconds, UTC ("2026-11-23T00:08:58.123456789Z"), formatted
/// from the calendar fields (chrono's own formatter allocates).
pub struct Rfc3339(pub u64);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let t = utc(self.0);
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            self.0 % 1_000_000_000
        )
    }
}

/// Falco's JSON keys in Falco's order, serialized straight from the alert.
struct JsonView<'a>(&'a Alert, JsonShape);

impl Serialize for JsonView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (a, shape) = (self.0, self.1);
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("hostname", &a.hostname)?;
        // Falco's `output` is the whole text line: time, priority, then the rule's output.
        if shape.include_message {
            m.serialize_entry("message", &a.output)?;
        }
        if shape.include_output {
            m.serialize_entry("output", &Displayed(TextLine(a)))?;
        }
        if shape.include_output_fields {
            m.serialize_entry("output_fields", &Fields(&a.output_fields, a.time_ns))?;
        }
        m.serialize_entry("priority", a.priority)?;
        m.serialize_entry("rule", &a.rule)?;
        m.serialize_entry("source", &a.source)?;
        if shape.include_tags {
            m.serialize_entry("tags", &a.tags)?;
        }
        m.serialize_entry("time", &Displayed(Rfc3339(a.time_ns)))?;
        m.serialize_entry("uuid", &a.uuid)?;
        m.end()
    }
}

/// Falco's text line without the newline: "00:08:58.123456789: Warning <output>".
struct TextLine<'a>(&'a Alert);

impl fmt::Display for TextLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let a = self.0;
        if iso_8601() {
            // libsinsp's evt.time.iso8601: UTC with a numeric zone.
            let iso = Rfc3339(a.time_ns).to_string();
            return write!(f, "{}+0000: {} {}", iso.trim_end_matches('Z'), a.priority, a.output);
        }
        let t = utc(a.time_ns);
        let ns = a.time_ns % 1_000_000_000;
        write!(f, "{:02}:{:02}:{:02}.{ns:09}: {} {}", t.hour(), t.minute(), t.second(), a.priority, a.output)
    }
}

/// A Display value as a JSON string (serde_json writes it without a String).
struct Displayed<D>(D);

impl<D: fmt::Display> Serialize for Displayed<D> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl Alert {
    /// RFC 3339 with nanoseconds, UTC: "2026-11-23T00:08:58.123456789Z".
    pub fn rfc3339(&self) -> String {
        Rfc3339(self.time_ns).to_string()
    }

    /// Appends Falco's text line and a newline: "00:08:58.123456789: Warning <output>".
    pub fn write_text(&self, out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let _ = writeln!(out, "{}", TextLine(self));
    }

    /// Appends Falco's JSON alert and a newline (the shape Falcosidekick and
    /// event-generator read).
    pub fn write_json(&self, shape: JsonShape, out: &mut Vec<u8>) {
        // A Map of strings and JSON values always serializes.
        let _ = serde_json::to_writer(&mut *out, &JsonView(self, shape));
        out.push(b'\n');
    }

    /// Appends the line `json` asks for: JSON with that shape, else text.
    pub fn write_line(&self, json: Option<JsonShape>, out: &mut Vec<u8>) {
        match json {
            Some(shape) => self.write_json(shape, out),
            None => self.write_text(out),
        }
    }

    /// Falco's text line, without the newline.
    pub fn text(&self) -> String {
        let mut v = Vec::new();
        self.write_text(&mut v);
        v.pop();
        String::from_utf8(v).expect("the line is made of UTF-8 strings")
    }

    /// Falco's JSON alert as a value.
    pub fn json(&self, shape: JsonShape) -> Value {
        serde_json::to_value(JsonView(self, shape)).expect("an alert serializes")
    }

    /// Heap bytes this alert holds (with the allocator's per-block overhead):
    /// what a queued alert costs, for the queue's byte limit.
    pub fn heap_bytes(&self) -> usize {
        // glibc's malloc: 16 bytes of header and rounding per block, about.
        const BLOCK: usize = 16;
        let s = |x: &String| if x.capacity() == 0 { 0 } else { x.capacity() + BLOCK };
        let mut n = std::mem::size_of::<Alert>() + 2 * std::mem::size_of::<usize>() + BLOCK; // Arc
        n += s(&self.rule) + s(&self.output) + s(&self.source) + s(&self.hostname) + s(&self.uuid);
        n += self.tags.capacity() * std::mem::size_of::<String>() + BLOCK;
        n += self.tags.iter().map(s).sum::<usize>();
        // preserve_order's map: an entry vector (hash, key, value) and an index table.
        let entry = std::mem::size_of::<(u64, String, Value)>() + 2 * std::mem::size_of::<usize>();
        n += 2 * BLOCK + self.output_fields.len() * entry;
        n += self.output_fields.iter().map(|(k, v)| s(k) + value_heap(v)).sum::<usize>();
        n
    }
}

fn value_heap(v: &Value) -> usize {
    match v {
        Value::String(x) => x.capacity() + 16,
        Value::Array(a) => 16 + a.iter().map(|v| std::mem::size_of::<Value>() + value_heap(v)).sum::<usize>(),
        Value::Object(m) => {
            32 + m
                .iter()
                .map(|(k, v)| 64 + k.capacity() + std::mem::size_of::<Value>() + value_heap(v))
                .sum::<usize>()
        }
        _ => 0,
    }
}

/// This machine's name, as Falco puts it in every alert.
pub fn hostname() -> String {
    // Falco's override, for containers whose own name says nothing.
    if let Some(h) = std::env::var("FALCO_HOSTNAME").ok().filter(|h| !h.is_empty()) {
        return h;
    }
    let mut buf = [0u8; 256];
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A random (v4) uuid for one alert.
pub fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn sample() -> Alert {
        let mut fields = Map::new();
        fields.insert("proc.name".into(), "cat".into());
        fields.insert("fd.name".into(), "/etc/shadow".into());
        Alert {
            time_ns: 1_795_392_538_123_456_789,
            rule: "Read sensitive file untrusted".into(),
            priority: "Warning",
            output: "Sensitive file opened (file=/etc/shadow)".into(),
            output_fields: fields,
            tags: vec!["filesystem".into()],
            source: "syscall".into(),
            hostname: "h".into(),
            uuid: "u".into(),
        }
    }

    #[test]
    fn json_has_falcos_keys_in_order_and_an_rfc3339_time() {
        let j = sample().json(JsonShape::default());
        assert_eq!(j["time"], "2026-11-23T00:08:58.123456789Z");
        assert_eq!(j["rule"], "Read sensitive file untrusted");
        assert_eq!(j["priority"], "Warning");
        assert_eq!(j["output_fields"]["fd.name"], "/etc/shadow");
        let keys: Vec<&str> = j.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(
            keys,
            ["hostname", "output", "output_fields", "priority", "rule", "source", "tags", "time", "uuid"]
        );
        assert_eq!(
            j["output"], "00:08:58.123456789: Warning Sensitive file opened (file=/etc/shadow)",
            "Falco's output carries the time and priority"
        );
        let lean =
            sample().json(JsonShape { include_output: false, include_tags: false, ..JsonShape::default() });
        assert!(lean.get("output").is_none() && lean.get("tags").is_none());
        let mut line = Vec::new();
        sample().write_json(JsonShape::default(), &mut line);
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(serde_json::from_slice::<Value>(&line).unwrap(), j);
    }

    #[test]
    fn text_is_time_priority_output() {
        assert_eq!(sample().text(), "00:08:58.123456789: Warning Sensitive file opened (file=/etc/shadow)");
        assert_eq!(sample().rfc3339(), "2026-11-23T00:08:58.123456789Z");
        assert_eq!(Rfc3339(0).to_string(), "1970-01-01T00:00:00.000000000Z");
    }

    #[test]
    fn priorities_rank_most_severe_first() {
        assert_eq!(rank("Emergency"), 0);
        assert_eq!(rank("Critical"), 2);
        assert_eq!(rank("Warning"), 4);
        assert_eq!(rank("Debug"), 7);
        assert_eq!(rank("nonsense"), 7);
    }
}
