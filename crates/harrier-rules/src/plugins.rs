//! Rule files' `required_plugin_versions`, checked as Falco checks them: each entry must be
//! met by a loaded plugin of that name (or one of its alternatives) whose version has the
//! same major and is at least the one required.

use crate::diag::Diagnostic;
use crate::yaml::{Node, Pos};

/// One `required_plugin_versions` entry.
#[derive(Debug, Clone)]
pub struct Requirement {
    pub file: usize,
    pub pos: Pos,
    /// The plugin and its alternatives, each with the least version it needs.
    pub any_of: Vec<(String, String)>,
}

/// The entries of a `required_plugin_versions` item; malformed ones are returned as
/// (position, message).
pub fn parse(file: usize, n: &Node) -> Result<Vec<Requirement>, (Pos, String)> {
    let Node::Seq { items, .. } = n else {
        return Err((n.pos(), "required_plugin_versions must be a list".into()));
    };
    let one = |e: &Node| -> Result<(String, String), (Pos, String)> {
        let get = |k: &str| e.get(k).and_then(Node::as_str).map(str::to_string);
        match (get("name"), get("version")) {
            (Some(name), Some(v)) => Ok((name, v)),
            _ => Err((e.pos(), "a required plugin needs a name and a version".into())),
        }
    };
    items
        .iter()
        .map(|e| {
            let mut any_of = vec![one(e)?];
            if let Some(Node::Seq { items: alts, .. }) = e.get("alternatives") {
                for a in alts {
                    any_of.push(one(a)?);
                }
            }
            Ok(Requirement { file, pos: e.pos(), any_of })
        })
        .collect()
}

fn semver(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.trim().split(['-', '+']).next()?;
    let mut p = core.split('.').map(|x| x.parse::<u64>().ok());
    Some((p.next()??, p.next().flatten().unwrap_or(0), p.next().flatten().unwrap_or(0)))
}

/// Whether a plugin of version `have` meets `want`.
pub fn compatible(have: &str, want: &str) -> bool {
    match (semver(have), semver(want)) {
        (Some(h), Some(w)) => h.0 == w.0 && h >= w,
        _ => false,
    }
}

/// Errors for the requirements `loaded` (name, version) does not meet.
pub fn check(
    files: &[(String, String)],
    reqs: &[Requirement],
    loaded: &[(String, String)],
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for r in reqs {
        let met = r.any_of.iter().any(|(n, w)| loaded.iter().any(|(ln, lv)| ln == n && compatible(lv, w)));
        if met {
            continue;
        }
        let names: Vec<String> = r.any_of.iter().map(|(n, v)| format!("{n} (>= {v})")).collect();
        let falco = format!("Plugin requirement not satisfied, must load one of: {}", names.join(", "));
        let msg = format!("the rules need one of these plugins loaded: {}", names.join(", "));
        let d = Diagnostic::error(&files[r.file].0, r.pos.line, r.pos.col, msg);
        out.push(d.as_falco("LOAD_ERR_VALIDATE", ("required_plugin_versions", ""), falco));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_meet_requirements_in_the_same_major_only() {
        assert!(super::compatible("0.18.0", "0.7.0"));
        assert!(super::compatible("0.7.4", "0.7.0"));
        assert!(!super::compatible("0.6.9", "0.7.0"));
        assert!(!super::compatible("1.0.0", "0.7.0"));
        assert!(super::compatible("0.18.0-rc1", "0.18.0"));
    }
}
