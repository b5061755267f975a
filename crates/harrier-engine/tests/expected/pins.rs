//! The differences docs/falco-differences.md explains, each accepted only
//! with Harrier's own value asserted (so that a change on either side shows).

use super::Alert;
use serde_json::Value;

/// Container fields Falco's container plugin asks the runtime's API for.
const RUNTIME_FIELDS: [&str; 7] = [
    "container.name",
    "container.image.repository",
    "container.image.tag",
    "container.mounts",
    "k8s.pod.name",
    "k8s.ns.name",
    "container.privileged",
];

fn text<'a>(a: &'a Alert, f: &str) -> &'a str {
    a.fields.get(f).and_then(|v| v.as_str()).unwrap_or("")
}

fn in_container(a: &Alert) -> bool {
    !matches!(text(a, "container.id"), "" | "host")
}

/// A differing field (normalised values) that an explained cause accounts for:
/// Some(Ok(cause)) when Harrier's value is the one pinned, Some(Err) when the
/// cause applies but Harrier's value is not the pinned one, None otherwise.
pub fn check(
    f: &Alert,
    h: &Alert,
    field: &str,
    fv: &Value,
    hv: &Value,
) -> Option<Result<&'static str, String>> {
    // container-metadata: no runtime answers Falco's plugin for the battery's runc
    // containers (null); Harrier reads what the runtime's files say, which are the
    // battery's annotations (harrier_actions::battery's containers.rs).
    if RUNTIME_FIELDS.contains(&field) && in_container(f) && fv.is_null() {
        let name = text(h, "container.name");
        let ok = match field {
            "container.mounts" => hv == "",
            "k8s.ns.name" => hv == "harrier-battery",
            "container.image.repository" => hv == "docker.io/library/busybox",
            "container.image.tag" => hv == "1.35",
            "container.name" | "k8s.pod.name" => {
                !name.is_empty() && text(h, "k8s.pod.name") == format!("{name}-battery")
            }
            _ => false,
        };
        return Some(if ok {
            Ok("container-metadata")
        } else {
            Err(format!(
                "{field} (container-metadata): Harrier {hv}, not what the battery's runtime files say"
            ))
        });
    }
    None
}

/// Rules that fire on container.privileged, which Harrier reads from the
/// capabilities runc granted and Falco's plugin from the runtime's API.
const PRIVILEGED_RULES: [&str; 3] = [
    "Launch Privileged Container",
    "Debugfs Launched in Privileged Container",
    "Mount Launched in Privileged Container",
];

/// An alert only Falco raised, explained (see [`check`]).
pub fn only_falco<'a>(
    f: &Alert,
    mut harrier: impl Iterator<Item = &'a Alert>,
) -> Option<Result<&'static str, String>> {
    // privileged: Falco's next rule; Harrier matched Launch Privileged Container first.
    if f.rule == "Launch Excessively Capable Container" && in_container(f) {
        let ok = harrier.any(|h| h.rule == "Launch Privileged Container");
        return Some(
            ok.then_some("privileged").ok_or_else(|| "privileged: nor Launch Privileged Container".into()),
        );
    }
    None
}

/// An alert only Harrier raised, explained (see [`check`]).
pub fn only_harrier(h: &Alert) -> Option<Result<&'static str, String>> {
    if PRIVILEGED_RULES.contains(&h.rule.as_str()) && in_container(h) {
        // Only the battery's containers runc granted every capability.
        let ok = h.behaviour.ends_with("-privileged");
        return Some(
            ok.then_some("privileged").ok_or_else(|| "privileged: not a privileged container".into()),
        );
    }
    // plain-runc: a cgroup /<name> is no container to Falco's plugin; Harrier
    // names it by runc's name.
    let id = text(h, "container.id");
    if in_container(h) && !(id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit())) {
        let ok = id.starts_with("hrbat-") && text(h, "container.name") == id;
        return Some(ok.then_some("plain-runc").ok_or_else(|| format!("plain-runc: container.id {id}")));
    }
    None
}

/// Pins checked on every matched pair, whatever the normalised values.
pub fn always(f: &Alert, h: &Alert) -> Vec<String> {
    let mut e = Vec::new();
    // exe-mtime: Falco's proc.exe_ino.mtime is no time of the file (it decodes to
    // 2157); Harrier's is when the battery wrote the binary, just before it ran.
    if let Some(m) = h.fields.get("proc.exe_ino.mtime") {
        let (m, t) = (m.as_u64().unwrap_or(0), h.fields["evt.time"].as_u64().unwrap_or(0));
        if !(m <= t && t - m < 60_000_000_000) {
            e.push(format!("proc.exe_ino.mtime (exe-mtime): Harrier {m}, not the file's mtime shortly before the exec at {t}"));
        }
        if f.fields.get("proc.exe_ino.mtime").and_then(|v| v.as_u64()) == Some(m) {
            e.push("proc.exe_ino.mtime (exe-mtime): Harrier now has Falco's value: update docs/falco-differences.md".into());
        }
    }
    e
}
