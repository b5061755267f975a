//! One alert, and its two renderings: Falco's text line and Falco's JSON.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

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
#[derive(Debug, Clone, Copy)]
pub struct JsonShape {
    /// Falco's json_include_output_property (default true).
    pub include_output: bool,
    /// Falco's json_include_tags_property (default true).
    pub include_tags: bool,
}

impl Default for JsonShape {
    fn default() -> JsonShape {
        JsonShape { include_output: true, include_tags: true }
    }
}

impl Alert {
    fn time(&self) -> DateTime<Utc> {
        let secs = (self.time_ns / 1_000_000_000) as i64;
        DateTime::from_timestamp(secs, (self.time_ns % 1_000_000_000) as u32).unwrap_or_default()
    }

    /// RFC 3339 with nanoseconds, UTC: "2026-11-23T00:08:58.123456789Z".
    pub fn rfc3339(&self) -> String {
        self.time().to_rfc3339_opts(SecondsFormat::Nanos, true)
    }

    /// Falco's text line: "00:08:58.123456789: Warning <output>".
    pub fn text(&self) -> String {
        format!("{}: {} {}", self.time().format("%H:%M:%S%.9f"), self.priority, self.output)
    }

    /// Falco's JSON alert (the shape Falcosidekick and event-generator read).
    pub fn json(&self, shape: JsonShape) -> Value {
        let mut o = Map::new();
        o.insert("hostname".into(), self.hostname.clone().into());
        if shape.include_output {
            o.insert("output".into(), self.output.clone().into());
        }
        o.insert("output_fields".into(), Value::Object(self.output_fields.clone()));
        o.insert("priority".into(), self.priority.into());
        o.insert("rule".into(), self.rule.clone().into());
        o.insert("source".into(), self.source.clone().into());
        if shape.include_tags {
            o.insert("tags".into(), self.tags.clone().into());
        }
        o.insert("time".into(), self.rfc3339().into());
        o.insert("uuid".into(), self.uuid.clone().into());
        Value::Object(o)
    }
}

/// This machine's name, as Falco puts it in every alert.
pub fn hostname() -> String {
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
mod tests {
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
    fn json_has_falcos_keys_and_an_rfc3339_time() {
        let j = sample().json(JsonShape::default());
        assert_eq!(j["time"], "2026-11-23T00:08:58.123456789Z");
        assert_eq!(j["rule"], "Read sensitive file untrusted");
        assert_eq!(j["priority"], "Warning");
        assert_eq!(j["output_fields"]["fd.name"], "/etc/shadow");
        for k in ["hostname", "output", "tags", "source", "uuid"] {
            assert!(j.get(k).is_some(), "{k} missing from {j}");
        }
        let lean = sample().json(JsonShape { include_output: false, include_tags: false });
        assert!(lean.get("output").is_none() && lean.get("tags").is_none());
    }

    #[test]
    fn text_is_time_priority_output() {
        assert_eq!(sample().text(), "00:08:58.123456789: Warning Sensitive file opened (file=/etc/shadow)");
    }
}
