//! Reading the configuration again on a reload (SIGHUP, watch_config_files): what the rules
//! use is applied in place; any other key that changed is named, to be applied by a restart.

use super::RunConfig;
use crate::doc::ConfigDoc;
use anyhow::Result;
use harrier_rules::yaml::Node;

/// Keys a reload applies in place: they only shape the rules.
const LIVE: &[&str] = &[
    "rules_files",
    "rules_file",
    "rules",
    "priority",
    "rule_matching",
    "append_output",
    "config_files",
    "watch_config_files",
];

/// How `falco` built the running configuration, to build it again.
#[derive(Debug, Clone, Default)]
pub struct FalcoSource {
    pub path: Option<String>,
    pub options: Vec<String>,
    /// `-r` paths, which replace the config's rules_files.
    pub rules: Vec<String>,
}

/// A node's value as text, without positions: two readings compare equal when the value did.
fn text(n: &Node, out: &mut String) {
    match n {
        Node::Scalar { value, .. } => {
            out.push_str(value);
            out.push(';');
        }
        Node::Seq { items, .. } => {
            out.push('[');
            items.iter().for_each(|i| text(i, out));
            out.push(']');
        }
        Node::Map { entries, .. } => {
            out.push('{');
            for (k, v) in entries {
                text(k, out);
                out.push(':');
                text(v, out);
            }
            out.push('}');
        }
    }
}

/// Each top-level key with its value's text.
pub(super) fn key_texts(doc: &ConfigDoc) -> Vec<(String, String)> {
    let Node::Map { entries, .. } = &doc.root else { return Vec::new() };
    entries
        .iter()
        .map(|(k, v)| {
            let mut s = String::new();
            text(v, &mut s);
            (k.as_str().unwrap_or("").to_string(), s)
        })
        .collect()
}

impl RunConfig {
    /// The keys that differ between two readings and that a reload does not apply.
    pub fn needs_restart(&self, fresh: &RunConfig) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        let find = |v: &[(String, String)], k: &str| v.iter().find(|x| x.0 == k).map(|x| x.1.clone());
        for (k, _) in self.key_texts.iter().chain(&fresh.key_texts) {
            let changed = find(&self.key_texts, k) != find(&fresh.key_texts, k);
            if changed && !LIVE.contains(&k.as_str()) && !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        keys
    }

    /// `falco`'s configuration read again as it was first built; the plugins stay those loaded.
    pub fn reread_falco(&self, src: &FalcoSource) -> Result<RunConfig> {
        let doc = ConfigDoc::load(src.path.as_deref(), &src.options)?;
        let mut c = RunConfig::from_doc(&doc)?;
        c.as_falco = true;
        if !src.rules.is_empty() {
            c.rules_files = src.rules.clone();
        } else {
            c.rules_files.retain(|f| std::path::Path::new(f).exists());
        }
        c.append_output.extend(self.print_output.iter().cloned());
        c.falco_source = Some(src.clone());
        c.print_output = self.print_output.clone();
        c.plugins = self.plugins.clone();
        c.plugin_sources = self.plugin_sources.clone();
        c.plugin_versions = self.plugin_versions.clone();
        c.plugin_sources_enabled = self.plugin_sources_enabled.clone();
        c.syscall_source = self.syscall_source;
        Ok(c)
    }
}
