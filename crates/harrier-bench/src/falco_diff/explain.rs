//! Known differences between Falco's alerts and Harrier's, each explained in
//! docs/falco-differences.md (the anchor returned); a difference the harness
//! meets that is not here counts as unexplained.

use super::compare::Alert;
use super::Capture;
use serde_json::Value;

/// Container fields Falco's container plugin takes from the runtime's API.
const RUNTIME_FIELDS: [&str; 12] = [
    "container.name",
    "container.image",
    "container.image.id",
    "container.image.repository",
    "container.image.tag",
    "container.image.digest",
    "container.mounts",
    "container.privileged",
    "k8s.pod.name",
    "k8s.ns.name",
    "k8s.pod.uid",
    "k8s.pod.sandbox_id",
];

fn in_container(a: &Alert) -> bool {
    a.fields.get("container.id").and_then(|v| v.as_str()).is_some_and(|id| id != "host")
}

/// Why a matched pair's field differs, if known.
pub fn field(f: &Alert, field: &str, falco: &Value, _harrier: &Value) -> Option<&'static str> {
    if RUNTIME_FIELDS.contains(&field) && in_container(f) && falco.is_null() {
        return Some("container-metadata");
    }
    if field == "proc.exe_ino.mtime" {
        return Some("exe-mtime");
    }
    None
}

/// A plain runc container (cgroup /<name>, not an id Falco's plugin parses).
fn plain_runc(a: &Alert) -> bool {
    a.fields
        .get("container.id")
        .and_then(|v| v.as_str())
        .is_some_and(|id| id != "host" && !(id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit())))
}

fn drops(a: &Alert, cap: &Capture, falco: bool) -> bool {
    cap.steps
        .iter()
        .any(|s| Some(&s.name) == a.step.as_ref() && if falco { s.drops.0 } else { s.drops.1 } > 0)
}

/// Rules that fire on container.privileged=true, which Harrier reads from the
/// capabilities runc granted and Falco's plugin from the runtime's API (none here).
const PRIVILEGED_RULES: [&str; 3] = [
    "Launch Privileged Container",
    "Debugfs Launched in Privileged Container",
    "Mount Launched in Privileged Container",
];

/// Why only Falco alerted, if known.
pub fn only_falco(a: &Alert, cap: &Capture) -> Option<&'static str> {
    // The rule after "Launch Privileged Container", which Harrier matched first.
    if a.rule == "Launch Excessively Capable Container" && in_container(a) {
        return Some("privileged");
    }
    if drops(a, cap, false) {
        return Some("drops");
    }
    None
}

/// Why only Harrier alerted, if known.
pub fn only_harrier(a: &Alert, cap: &Capture) -> Option<&'static str> {
    if plain_runc(a) {
        return Some("plain-runc");
    }
    if PRIVILEGED_RULES.contains(&a.rule.as_str()) && in_container(a) {
        return Some("privileged");
    }
    if drops(a, cap, true) {
        return Some("drops");
    }
    None
}
