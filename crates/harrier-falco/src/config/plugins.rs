//! `load_plugins` and `plugins`: which plugins load, from where, with what init_config and
//! open_params. `container` is Harrier's own container engine; every other plugin is opened
//! by harrier-plugin when a command needs it ([`super::RunConfig::open_plugins`]).

use super::Reader;
use anyhow::{bail, Result};
use harrier_rules::yaml::Node;

/// Where Falco looks for a plugin whose library_path is relative.
pub const PLUGINS_DIR: &str = "/usr/share/falco/plugins";

/// One `plugins` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginDef {
    pub name: String,
    pub library_path: String,
    /// As the plugin gets it: a mapping is turned into JSON, as Falco does.
    pub init_config: String,
    pub open_params: String,
}

impl PluginDef {
    /// The library's path: relative ones are under Falco's plugins directory.
    pub fn path(&self) -> String {
        match self.library_path.starts_with('/') {
            true => self.library_path.clone(),
            false => format!("{PLUGINS_DIR}/{}", self.library_path),
        }
    }
}

/// A YAML node as JSON (init_config written as a mapping).
fn json(n: &Node) -> serde_json::Value {
    match n {
        Node::Scalar { value, style, .. } => {
            if *style == harrier_rules::yaml::Style::Plain {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(value) {
                    if !v.is_object() && !v.is_array() {
                        return v;
                    }
                }
            }
            serde_json::Value::String(value.clone())
        }
        Node::Seq { items, .. } => items.iter().map(json).collect(),
        Node::Map { entries, .. } => {
            entries.iter().map(|(k, v)| (k.as_str().unwrap_or("").to_string(), json(v))).collect()
        }
    }
}

impl Reader<'_> {
    pub(super) fn plugin_defs(&self, v: &Node) -> Result<Vec<PluginDef>> {
        let Node::Seq { items, .. } = v else {
            if v.is_null() {
                return Ok(Vec::new());
            }
            bail!(self.err(v, "plugins must be a list of {name, library_path, init_config, open_params}"));
        };
        let mut out = Vec::new();
        for item in items {
            let text = |k: &str| -> Result<Option<String>> {
                item.get(k)
                    .filter(|n| !n.is_null())
                    .map(|n| self.str(n, &format!("plugins[].{k}")).map(String::from))
                    .transpose()
            };
            let name = text("name")?.ok_or_else(|| self.err(item, "a plugins entry needs a name"))?;
            let library_path = text("library_path")?
                .ok_or_else(|| self.err(item, format!("plugin '{name}' needs a library_path")))?;
            let init_config = match item.get("init_config") {
                None => String::new(),
                Some(n) if n.is_null() => String::new(),
                Some(n @ Node::Scalar { .. }) => n.as_str().unwrap_or("").to_string(),
                Some(n) => json(n).to_string(),
            };
            let open_params = text("open_params")?.unwrap_or_default();
            out.push(PluginDef { name, library_path, init_config, open_params });
        }
        Ok(out)
    }
}

/// The entries `load_plugins` names, in its order (container excepted: built in).
pub fn selected(load: &[String], defs: &[PluginDef]) -> Result<Vec<PluginDef>> {
    load.iter()
        .filter(|n| *n != "container")
        .map(|n| {
            defs.iter().find(|d| &d.name == n).cloned().ok_or_else(|| {
                anyhow::anyhow!("Cannot load plugin '{n}': plugin config not found for given name")
            })
        })
        .collect()
}

impl super::RunConfig {
    /// Opens the plugins load_plugins names (checking their API version and what they
    /// declare), and records their sources' fields for the rules. Errors name the plugin.
    pub fn open_plugins(&mut self) -> Result<Vec<harrier_engine::plugins::Loaded>> {
        let mut loaded = Vec::new();
        for d in selected(&self.load_plugins, &self.plugin_defs)? {
            let lib = harrier_plugin::Library::open(&d.path())
                .map_err(|e| anyhow::anyhow!("Could not load plugin '{}': {e:#}", d.name))?;
            if loaded.iter().any(|l: &harrier_engine::plugins::Loaded| l.lib.name == lib.name) {
                bail!("plugin '{}' is loaded twice", lib.name);
            }
            let lib = std::sync::Arc::new(lib);
            loaded.push(harrier_engine::plugins::Loaded {
                lib,
                init_config: d.init_config,
                open_params: d.open_params,
            });
        }
        let mut sources = Vec::new();
        // Syscall's entry holds the fields of plugins that extract from it (json: any source);
        // they have no value on Harrier's syscall events, which are not in libscap's layout.
        let srcs = loaded.iter().filter_map(|l| l.lib.source.clone());
        for src in srcs.chain(["syscall".to_string()]) {
            if sources.iter().any(|s: &harrier_rules::fields::SourceFields| s.source == src) {
                bail!("event source '{src}' is given by more than one plugin (or is syscall)");
            }
            let mut fields: Vec<harrier_rules::fields::PluginField> = Vec::new();
            for (i, l) in loaded.iter().enumerate().filter(|(_, l)| l.lib.extracts_from(&src)) {
                let json = l.lib.fields_json.as_deref().unwrap_or("[]");
                let mine = harrier_plugin::fields::parse(i as u16, json)
                    .map_err(|e| anyhow::anyhow!("plugin '{}': {e:#}", l.lib.name))?;
                fields.extend(mine.into_iter().filter(|f| !harrier_rules::fields::lookup(&f.name).is_some()));
            }
            sources.push(harrier_rules::fields::SourceFields { source: src, fields });
        }
        self.plugin_sources = sources;
        self.plugin_versions = loaded.iter().map(|l| (l.lib.name.clone(), l.lib.version.clone())).collect();
        self.plugin_sources_enabled =
            self.plugin_sources.iter().map(|s| s.source.clone()).filter(|s| s != "syscall").collect();
        self.plugins = loaded.clone();
        if self.container_plugin {
            self.plugin_versions.push(("container".into(), crate::lists::CONTAINER_PLUGIN_VERSION.into()));
        }
        Ok(loaded)
    }
}
