//! Harrier's enforcement keys: `enforce` (rules or tags and their action)
//! and `enforce_exempt`, and `--enforce RULE[=ACTION]`.

use super::Reader;
use anyhow::{bail, Result};
use harrier_rules::yaml::Node;

/// One `enforce` entry: a rule name or a tag, and the action.
#[derive(Debug, Clone, PartialEq)]
pub struct EnforceEntry {
    pub what: harrier_rules::ruleset::Selector,
    pub action: harrier_engine::enforce::Action,
}

impl EnforceEntry {
    /// `--enforce RULE[=kill|dry-run]` (dry-run unless said).
    pub fn parse_arg(s: &str) -> Result<EnforceEntry> {
        let (rule, action) = match s.rsplit_once('=') {
            Some((r, a)) => (
                r,
                parse_action(a).ok_or_else(|| {
                    anyhow::anyhow!("--enforce '{s}': the action is kill or dry-run, not '{a}'")
                })?,
            ),
            None => (s, harrier_engine::enforce::Action::DryRun),
        };
        Ok(EnforceEntry { what: harrier_rules::ruleset::Selector::Rule(rule.to_string()), action })
    }
}

fn parse_action(a: &str) -> Option<harrier_engine::enforce::Action> {
    match a {
        "kill" => Some(harrier_engine::enforce::Action::Kill),
        "dry-run" | "dry_run" => Some(harrier_engine::enforce::Action::DryRun),
        _ => None,
    }
}

impl Reader<'_> {
    pub(super) fn enforce(&self, v: &Node) -> Result<Vec<EnforceEntry>> {
        use harrier_rules::ruleset::Selector;
        let Node::Seq { items, .. } = v else {
            bail!(self.err(v, "enforce must be a list of entries with a rule or a tag and an action"));
        };
        let mut out = Vec::new();
        for item in items {
            let what = match (item.get("rule"), item.get("tag")) {
                (Some(r), None) => Selector::Rule(self.str(r, "enforce[].rule")?.to_string()),
                (None, Some(t)) => Selector::Tag(self.str(t, "enforce[].tag")?.to_string()),
                _ => bail!(self.err(item, "an enforce entry names one rule or one tag")),
            };
            let action = match item.get("action") {
                None => harrier_engine::enforce::Action::DryRun,
                Some(a) => {
                    let s = self.str(a, "enforce[].action")?;
                    parse_action(s)
                        .ok_or_else(|| self.err(a, format!("enforce action '{s}': kill or dry-run")))?
                }
            };
            out.push(EnforceEntry { what, action });
        }
        Ok(out)
    }

    pub(super) fn exempt(&self, v: &Node) -> Result<harrier_engine::guard::Exempt> {
        let mut e = harrier_engine::guard::Exempt::default();
        if let Some(n) = v.get("proc_names") {
            for name in self.strings(n, "enforce_exempt.proc_names")? {
                if name.len() > 15 {
                    bail!(self.err(
                        n,
                        format!("enforce_exempt: process name '{name}' is longer than the kernel's 15 bytes")
                    ));
                }
                e.comms.push(name.into_bytes());
            }
        }
        if let Some(n) = v.get("uids") {
            for u in self.strings(n, "enforce_exempt.uids")? {
                e.uids.push(
                    u.parse()
                        .map_err(|_| self.err(n, format!("enforce_exempt: uid '{u}' is not a number")))?,
                );
            }
        }
        Ok(e)
    }
}
