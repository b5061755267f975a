//! falco.yaml as `harrier run -c` and `falco -c` read it: every key of Falco 0.44.1's file is
//! known (see [`crate::keys`]): honoured, or accepted with the reason it changes nothing
//! here. Values are read with their positions, so a bad one names file:line:column (or the
//! `-o` that set it). Keys Falco does not have either are warned about, never fatal.

use crate::doc::ConfigDoc;
use anyhow::{bail, Result};
use harrier_outputs::Limits;
use harrier_rules::loader::Priority;
use harrier_rules::ruleset::RuleMatching;
use harrier_rules::yaml::Node;

mod enforce;
mod outputs;
mod plugins;
mod reread;
pub use enforce::EnforceEntry;
pub use plugins::{PluginDef, PLUGINS_DIR};
pub use reread::FalcoSource;

/// Everything `harrier run` takes from a config file (CLI flags override).
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Rule files or directories of *.yaml, in order; empty: the embedded defaults.
    pub rules_files: Vec<String>,
    pub priority: Priority,
    pub rule_matching: RuleMatching,
    pub json_output: bool,
    pub json_include_output_property: bool,
    pub json_include_tags_property: bool,
    pub json_include_message_property: bool,
    pub json_include_output_fields_property: bool,
    /// Alert times as ISO 8601 in text lines (and `evt.time.iso8601` in output_fields).
    pub time_format_iso_8601: bool,
    pub stdout_output: bool,
    /// Alerts to the local syslog (/dev/log), as Falco's syslog_output does.
    pub syslog_output: bool,
    /// program_output: each alert line to this shell command's standard input, and
    /// whether one process reads them all (keep_alive).
    pub program_output: Option<(String, bool)>,
    /// watch_config_files: a change to a config or rules file reloads as SIGHUP does.
    pub watch_config_files: bool,
    /// The config files read (the main one first), for the watch.
    pub config_files: Vec<String>,
    /// capture (enabled): Falco's capture on alert, and where the files go (path_prefix).
    pub capture: Option<(harrier_engine::CapturePolicy, String)>,
    /// load_plugins names `container`: Harrier's container engine stands in for it.
    pub container_plugin: bool,
    /// load_plugins, in order, and the `plugins` entries (see [`plugins`]).
    pub load_plugins: Vec<String>,
    pub plugin_defs: Vec<PluginDef>,
    /// The plugin sources opened ([`RunConfig::open_plugins`]): their rules' fields, and
    /// the plugins' (name, version) for required_plugin_versions.
    pub plugin_sources: Vec<harrier_rules::fields::SourceFields>,
    pub plugin_versions: Vec<(String, String)>,
    /// The plugins opened, and the sources that run: syscall (live or replay) unless
    /// disabled, and the plugin sources enabled (Falco's --enable-source/--disable-source).
    pub plugins: Vec<harrier_engine::plugins::Loaded>,
    pub syscall_source: bool,
    pub plugin_sources_enabled: Vec<String>,
    /// Each top-level key's value as read (a reload names the changed ones it cannot apply).
    pub key_texts: Vec<(String, String)>,
    /// Run as `falco`: how the configuration was built (a reload builds it again so).
    pub falco_source: Option<FalcoSource>,
    /// `falco -p`'s append_output entry (kept across reloads).
    pub print_output: Option<harrier_rules::ruleset::AppendOutput>,
    /// syscall_event_drops: when drops count, and what is done about them.
    pub drops: harrier_engine::drops::DropPolicy,
    /// Running as the `falco` command: rules load as Falco loads them (what Falco refuses, an
    /// unknown event type or output field, is an error, not a warning about a rule that never
    /// matches), and Falco's closing lines are printed.
    pub as_falco: bool,
    /// engine.kind nodriver: no syscall source (Falco runs only its plugins then).
    pub no_driver: bool,
    /// engine.kind replay: the capture file (legacy .scap or Harrier's) instead of live events.
    pub replay_file: Option<String>,
    /// engine.<kind>.buf_size_preset, as a ring size per CPU (Falco's preset table).
    pub buffer_size: Option<u64>,
    /// The `rules:` key: rules enabled and disabled by name or tag, in order.
    pub rules_selection: Vec<harrier_rules::ruleset::Selection>,
    pub file_output: Option<String>,
    pub http_output: Option<String>,
    /// http_output's options: TLS, user_agent, compress_uploads, keep_alive, echo,
    /// max_consecutive_timeouts (falco.yaml's defaults once the key is read).
    pub http_options: harrier_outputs::sinks::HttpOptions,
    /// Prometheus endpoint address (webserver.listen_address:listen_port).
    pub metrics_addr: Option<String>,
    /// webserver.ssl_enabled: the PEM file (webserver.ssl_certificate) holding the key and
    /// certificate the webserver serves https with.
    pub webserver_ssl: Option<String>,
    /// webserver.k8s_healthz_endpoint.
    pub healthz: String,
    /// metrics.enabled with output_rule or output_file: the periodic snapshots.
    pub metrics: Option<harrier_engine::snapshot::MetricsPolicy>,
    /// Each output's queue: outputs_queue.capacity (Falco's, alerts; 0: no
    /// count limit), .max_bytes and .keep_priority (Harrier's).
    pub outputs_queue: Limits,
    /// Falco's append_output: extra fields (e.g. proc.env) on every alert.
    pub append_fields: Vec<String>,
    /// Falco's append_output entries with their match, extra text and fields.
    pub append_output: Vec<harrier_rules::ruleset::AppendOutput>,
    /// An append_output entry asked for the suggested output fields: Falco 0.44 then
    /// appends its container plugin's suggested fields and drops `%container.info`.
    pub suggested_output: bool,
    /// Conditions whose events the kernel does not send (see [`harrier_engine::kfilter`]).
    pub kernel_drop: Vec<String>,
    /// Harrier's: copy pointer arguments at syscall entry (the default; see
    /// [`harrier_engine::collect::without_entry_copies`] for what turning it off costs).
    pub entry_copies: bool,
    /// Harrier's `enforce`: rules (by name or tag) whose alerts act on the process.
    pub enforce: Vec<EnforceEntry>,
    /// Harrier's `enforce_exempt`: processes and users never acted on.
    pub enforce_exempt: harrier_engine::guard::Exempt,
    /// Harrier's `enforce_rate`: kills per rule per second at most.
    pub enforce_rate: u32,
    /// Harrier's `enforce_hold` (default true): a kill rule the kernel leaves to
    /// user space stops the task at the syscall's exit until user space decides.
    pub enforce_hold: bool,
    pub warnings: Vec<String>,
}

impl Default for RunConfig {
    fn default() -> RunConfig {
        RunConfig {
            rules_files: Vec::new(),
            priority: Priority::Debug,
            rule_matching: RuleMatching::First,
            json_output: false,
            json_include_output_property: true,
            json_include_tags_property: true,
            json_include_message_property: false,
            json_include_output_fields_property: true,
            time_format_iso_8601: false,
            stdout_output: true,
            syslog_output: false,
            program_output: None,
            watch_config_files: false,
            config_files: Vec::new(),
            no_driver: false,
            as_falco: false,
            container_plugin: false,
            load_plugins: Vec::new(),
            plugin_defs: Vec::new(),
            plugin_sources: Vec::new(),
            plugin_versions: Vec::new(),
            plugins: Vec::new(),
            syscall_source: true,
            plugin_sources_enabled: Vec::new(),
            key_texts: Vec::new(),
            falco_source: None,
            print_output: None,
            capture: None,
            drops: Default::default(),
            replay_file: None,
            buffer_size: None,
            rules_selection: Vec::new(),
            file_output: None,
            http_output: None,
            http_options: Default::default(),
            metrics_addr: None,
            webserver_ssl: None,
            healthz: "/healthz".into(),
            metrics: None,
            outputs_queue: Limits::default(),
            append_fields: Vec::new(),
            append_output: Vec::new(),
            suggested_output: false,
            kernel_drop: Vec::new(),
            enforce: Vec::new(),
            enforce_exempt: Default::default(),
            enforce_rate: 100,
            enforce_hold: true,
            entry_copies: true,
            warnings: Vec::new(),
        }
    }
}

struct Reader<'a> {
    /// The file of the key being read ("-o" for the command line).
    file: &'a str,
}

impl Reader<'_> {
    fn err(&self, n: &Node, msg: impl std::fmt::Display) -> anyhow::Error {
        let p = n.pos();
        if p.line == 0 {
            return anyhow::anyhow!("-o: {msg}");
        }
        anyhow::anyhow!("{}:{}:{}: {msg}", self.file, p.line, p.col)
    }

    fn str<'n>(&self, n: &'n Node, key: &str) -> Result<&'n str> {
        n.as_str().ok_or_else(|| self.err(n, format!("{key} must be a scalar, not {}", n.kind())))
    }

    fn bool(&self, n: &Node, key: &str) -> Result<bool> {
        match self.str(n, key)? {
            "true" | "True" | "yes" => Ok(true),
            "false" | "False" | "no" => Ok(false),
            v => Err(self.err(n, format!("{key} must be true or false, not '{v}'"))),
        }
    }

    fn strings(&self, n: &Node, key: &str) -> Result<Vec<String>> {
        match n {
            Node::Seq { items, .. } => items.iter().map(|i| self.str(i, key).map(String::from)).collect(),
            _ => Ok(vec![self.str(n, key)?.to_string()]),
        }
    }

    /// `key: {enabled: bool, ...}`: whether it is enabled.
    fn enabled(&self, n: &Node, key: &str) -> Result<bool> {
        match n.get("enabled") {
            Some(e) => self.bool(e, &format!("{key}.enabled")),
            None => Ok(false),
        }
    }
}

/// Falco 0.44's suggested output fields (its container plugin's), in the plugin's order,
/// each appended to every output as `name_with_underscores=%name`.
pub const SUGGESTED_FIELDS: [&str; 6] = [
    "container.id",
    "container.name",
    "container.image.repository",
    "container.image.tag",
    "k8s.pod.name",
    "k8s.ns.name",
];

/// The text Falco appends for [`SUGGESTED_FIELDS`].
pub fn suggested_output() -> String {
    SUGGESTED_FIELDS.iter().map(|f| format!("{}=%{f}", f.replace('.', "_"))).collect::<Vec<_>>().join(" ")
}

impl Reader<'_> {
    /// One append_output entry: `match` (source, tags, rule), `extra_output`,
    /// `extra_fields` (field names, or `key: fixed text`) and `suggested_output`.
    fn append_entry(&self, item: &Node, c: &mut RunConfig) -> Result<()> {
        let mut a = harrier_rules::ruleset::AppendOutput::default();
        if let Some(m) = item.get("match") {
            if let Some(s) = m.get("source") {
                a.source = Some(self.str(s, "append_output.match.source")?.to_string());
            }
            if let Some(r) = m.get("rule") {
                a.rule = Some(self.str(r, "append_output.match.rule")?.to_string());
            }
            if let Some(t) = m.get("tags") {
                a.tags = self.strings(t, "append_output.match.tags")?;
            }
        }
        if let Some(o) = item.get("extra_output") {
            a.extra_output = self.str(o, "append_output.extra_output")?.to_string();
        }
        if let Some(fields) = item.get("extra_fields") {
            let Node::Seq { items, .. } = fields else {
                bail!(self.err(fields, "extra_fields must be a list"));
            };
            for f in items {
                match f {
                    Node::Scalar { value, .. } => {
                        c.append_fields.push(value.clone());
                        a.extra_fields.push((value.clone(), None));
                    }
                    Node::Map { entries, .. } => {
                        for (k, v) in entries {
                            let key = self.str(k, "extra_fields key")?.to_string();
                            let text = self.str(v, "extra_fields value")?;
                            if text.contains('%') {
                                c.warnings.push(format!(
                                    "{}:{}:{}: only fixed text is supported in extra_fields values",
                                    self.file,
                                    v.pos().line,
                                    v.pos().col
                                ));
                                continue;
                            }
                            a.extra_fields.push((key, Some(text.to_string())));
                        }
                    }
                    _ => bail!(self.err(f, "an extra_fields item is a field name or a key: value")),
                }
            }
        }
        let suggested = match item.get("suggested_output") {
            Some(n) => self.bool(n, "append_output.suggested_output")?,
            None => false,
        };
        let (source, tags, rule) = (a.source.clone(), a.tags.clone(), a.rule.clone());
        if !a.extra_output.is_empty() || !a.extra_fields.is_empty() {
            c.append_output.push(a);
        }
        if suggested {
            c.suggested_output = true;
            c.append_output.push(harrier_rules::ruleset::AppendOutput {
                source,
                tags,
                rule,
                extra_output: suggested_output(),
                extra_fields: Vec::new(),
            });
        }
        Ok(())
    }
}

impl RunConfig {
    /// How the rule files load under this config (`harrier run`'s and the live tests').
    pub fn load_options(&self) -> harrier_rules::ruleset::LoadOptions {
        use harrier_rules::ruleset::{AppendOutput, LoadOptions};
        // Fields given on the command line (--append-field) and not from the config's entries.
        let mut append_output = self.append_output.clone();
        let from_config: Vec<&String> =
            self.append_output.iter().flat_map(|a| a.extra_fields.iter().map(|(n, _)| n)).collect();
        let loose: Vec<_> = self
            .append_fields
            .iter()
            .filter(|f| !from_config.contains(f))
            .map(|f| (f.clone(), None))
            .collect();
        if !loose.is_empty() {
            append_output.push(AppendOutput { extra_fields: loose, ..Default::default() });
        }
        let mut opts = LoadOptions {
            rule_matching: self.rule_matching,
            min_priority: self.priority,
            supported: std::sync::Arc::new(harrier_engine::source::supported),
            append_output,
            selection: self.rules_selection.clone(),
            plugin_sources: self.plugin_sources.clone(),
            plugins: self.plugin_versions.clone(),
            ..Default::default()
        };
        // Falco 0.44 with suggested output: %container.info expands to nothing (the suggested
        // container fields are appended instead).
        if self.suggested_output {
            opts.container_info = String::new();
        }
        opts
    }

    /// A config file alone (`harrier run -c`): its config_files merged, no `-o`.
    pub fn load(path: &str) -> Result<RunConfig> {
        RunConfig::from_doc(&ConfigDoc::load(Some(path), &[])?)
    }

    pub fn parse(file: &str, text: &str) -> Result<RunConfig> {
        RunConfig::from_doc(&ConfigDoc::from_text(file, text, &[])?)
    }

    /// Reads every key of the merged configuration.
    pub fn from_doc(doc: &ConfigDoc) -> Result<RunConfig> {
        let mut c = RunConfig {
            config_files: doc.files.clone(),
            key_texts: reread::key_texts(doc),
            ..RunConfig::default()
        };
        let Node::Map { entries, .. } = &doc.root else { return Ok(c) };
        for (k, v) in entries {
            let key = k.as_str().unwrap_or("");
            let r = Reader { file: doc.file_of(key) };
            c.read_key(&r, key, k, v)?;
        }
        Ok(c)
    }

    fn read_key(&mut self, r: &Reader, key: &str, k: &Node, v: &Node) -> Result<()> {
        let c = self;
        match key {
            "rules_files" | "rules_file" => c.rules_files = r.strings(v, key)?,
            "priority" => {
                let p = r.str(v, key)?;
                c.priority = Priority::parse(p).ok_or_else(|| r.err(v, format!("unknown priority '{p}'")))?;
            }
            "rule_matching" => {
                c.rule_matching = match r.str(v, key)? {
                    "first" => RuleMatching::First,
                    "all" => RuleMatching::All,
                    m => bail!(r.err(
                        v,
                        format!("Unknown rule matching strategy '{m}': rule_matching must be first or all")
                    )),
                }
            }
            "json_output" => c.json_output = r.bool(v, key)?,
            "json_include_output_property" => c.json_include_output_property = r.bool(v, key)?,
            "json_include_tags_property" => c.json_include_tags_property = r.bool(v, key)?,
            "json_include_message_property" => c.json_include_message_property = r.bool(v, key)?,
            "json_include_output_fields_property" => {
                c.json_include_output_fields_property = r.bool(v, key)?
            }
            "time_format_iso_8601" => c.time_format_iso_8601 = r.bool(v, key)?,
            "watch_config_files" => c.watch_config_files = r.bool(v, key)?,
            "stdout_output" => c.stdout_output = r.enabled(v, key)?,
            "syslog_output" => c.syslog_output = r.enabled(v, key)?,
            "file_output" => {
                if r.enabled(v, key)? {
                    let f = v.get("filename").ok_or_else(|| r.err(v, "file_output needs a filename"))?;
                    c.file_output = Some(r.str(f, "file_output.filename")?.to_string());
                }
            }
            "program_output" => {
                if r.enabled(v, key)? {
                    let p = v.get("program").ok_or_else(|| r.err(v, "program_output needs a program"))?;
                    let keep =
                        v.get("keep_alive").map(|k| r.bool(k, "program_output.keep_alive")).transpose()?;
                    c.program_output =
                        Some((r.str(p, "program_output.program")?.to_string(), keep.unwrap_or(false)));
                }
            }
            "http_output" => {
                if r.enabled(v, key)? {
                    let u = v.get("url").ok_or_else(|| r.err(v, "http_output needs a url"))?;
                    c.http_output = Some(r.str(u, "http_output.url")?.to_string());
                    c.http_options = r.http_options(v)?;
                }
            }
            "webserver" => {
                if r.enabled(v, key)? {
                    let addr =
                        v.get("listen_address").map(|a| r.str(a, "webserver.listen_address")).transpose()?;
                    let port = v.get("listen_port").map(|p| r.str(p, "webserver.listen_port")).transpose()?;
                    c.metrics_addr =
                        Some(format!("{}:{}", addr.unwrap_or("0.0.0.0"), port.unwrap_or("8765")));
                    if let Some(h) = v.get("k8s_healthz_endpoint") {
                        c.healthz = r.str(h, "webserver.k8s_healthz_endpoint")?.to_string();
                    }
                    if r.flag(v, "webserver", "ssl_enabled", false)? {
                        let pem = r.text(v, "webserver", "ssl_certificate")?;
                        c.webserver_ssl = Some(pem.unwrap_or_else(|| "/etc/falco/falco.pem".into()));
                    }
                }
            }
            "outputs_queue" => c.outputs_queue = r.queue(v, &mut c.warnings)?,
            "append_output" => match v {
                Node::Seq { items, .. } => {
                    for item in items {
                        r.append_entry(item, c)?;
                    }
                }
                // Falco reads only a list (`-o append_output.x=y` makes it a mapping: no entries).
                _ => {}
            },
            "engine" => r.engine(v, c)?,
            "syscall_event_drops" => c.drops = r.drops(v)?,
            "capture" => c.capture = r.capture(v)?,
            "rules" => c.rules_selection = r.selection(v)?,
            "load_plugins" => {
                c.load_plugins = if v.is_null() { Vec::new() } else { r.strings(v, key)? };
                // Falco's container plugin: Harrier's own container engine does its work.
                c.container_plugin = c.load_plugins.iter().any(|p| p == "container");
            }
            "plugins" => c.plugin_defs = r.plugin_defs(v)?,
            // Harrier's own: checked here so a bad one names its line.
            "kernel_drop" => {
                for t in r.strings(v, key)? {
                    harrier_engine::kfilter::parse_kernel_drop(&t)
                        .map_err(|e| r.err(v, format!("kernel_drop '{t}': {e}")))?;
                    c.kernel_drop.push(t);
                }
            }
            "entry_copies" => c.entry_copies = r.bool(v, key)?,
            "enforce" => c.enforce = r.enforce(v)?,
            "enforce_exempt" => c.enforce_exempt = r.exempt(v)?,
            "enforce_hold" => c.enforce_hold = r.bool(v, key)?,
            "enforce_rate" => {
                c.enforce_rate =
                    r.str(v, key)?.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        r.err(v, "enforce_rate must be a positive number of kills per second")
                    })?
            }
            // Falco's periodic snapshots (output_rule, output_file); Harrier serves Prometheus
            // on the webserver whatever this says, and reads its own listen_address here.
            "metrics" => {
                if r.enabled(v, key)? {
                    if let Some(a) = v.get("listen_address") {
                        c.metrics_addr = Some(r.str(a, "metrics.listen_address")?.to_string());
                    }
                    let m = r.metrics(v)?;
                    c.metrics = (m.output_rule || m.output_file.is_some()).then_some(m);
                }
            }
            _ if crate::keys::accepted(key) => {}
            _ => {
                let p = k.pos();
                c.warnings.push(format!("{}:{}:{}: '{key}' is not used by harrier", r.file, p.line, p.col));
            }
        }
        Ok(())
    }
}

/// Falco's buf_size_preset table: ring bytes per CPU for presets 1-10 (4 is the default).
pub const BUF_SIZE_PRESETS: [u64; 10] =
    [1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20, 256 << 20, 512 << 20];

impl Reader<'_> {
    /// engine: kind (modern_ebpf, ebpf, kmod: Harrier's live sensor; replay: a capture
    /// file), the kind's buf_size_preset.
    fn engine(&self, v: &Node, c: &mut RunConfig) -> Result<()> {
        let kind = match v.get("kind") {
            Some(k) => self.str(k, "engine.kind")?,
            None => "modern_ebpf",
        };
        match kind {
            "modern_ebpf" | "ebpf" | "kmod" => {
                if let Some(p) = v.get(kind).and_then(|k| k.get("buf_size_preset")) {
                    let s = self.str(p, "buf_size_preset")?;
                    let n: usize = s
                        .parse()
                        .map_err(|_| self.err(p, format!("buf_size_preset must be 0-10, not '{s}'")))?;
                    match n {
                        0 => {}
                        1..=10 => c.buffer_size = Some(BUF_SIZE_PRESETS[n - 1]),
                        _ => bail!(self.err(p, format!("buf_size_preset must be 0-10, not '{s}'"))),
                    }
                }
            }
            "replay" => {
                let f = v.get("replay").and_then(|r| r.get("capture_file"));
                let f =
                    f.ok_or_else(|| self.err(v, "engine.kind replay needs engine.replay.capture_file"))?;
                let path = self.str(f, "engine.replay.capture_file")?;
                if path.is_empty() {
                    bail!(self.err(f, "engine.kind replay needs engine.replay.capture_file"));
                }
                c.replay_file = Some(path.to_string());
            }
            "nodriver" => c.no_driver = true,
            "gvisor" => {
                bail!(self
                    .err(v, format!("engine.kind '{kind}' is not supported by harrier (its sensor is eBPF)")))
            }
            other => {
                bail!(self.err(v, format!("unknown engine.kind '{other}' (modern_ebpf, ebpf, kmod, replay)")))
            }
        }
        Ok(())
    }

    /// capture: enabled, mode (rules: rules with `capture: true`; all_rules), path_prefix,
    /// default_duration (ms, 5000).
    fn capture(&self, v: &Node) -> Result<Option<(harrier_engine::CapturePolicy, String)>> {
        if !self.enabled(v, "capture")? {
            return Ok(None);
        }
        let all_rules = match v.get("mode").map(|m| (m, self.str(m, "capture.mode"))) {
            None => false,
            Some((_, Ok("rules"))) => false,
            Some((_, Ok("all_rules"))) => true,
            Some((m, _)) => bail!(self.err(m, "capture.mode must be rules or all_rules")),
        };
        let ms = match v.get("default_duration") {
            Some(d) => {
                let s = self.str(d, "capture.default_duration")?;
                s.parse::<u64>().map_err(|_| {
                    self.err(d, format!("capture.default_duration must be milliseconds, not '{s}'"))
                })?
            }
            None => 5000,
        };
        let prefix = match v.get("path_prefix") {
            Some(p) => self.str(p, "capture.path_prefix")?.to_string(),
            None => "/tmp/falco".to_string(),
        };
        Ok(Some((harrier_engine::CapturePolicy { all_rules, default_ns: ms * 1_000_000 }, prefix)))
    }

    /// syscall_event_drops: actions (ignore, log, alert, exit), threshold, rate, max_burst,
    /// simulate_drops, checked with Falco's messages.
    fn drops(&self, v: &Node) -> Result<harrier_engine::drops::DropPolicy> {
        use harrier_engine::drops::{DropAction, DropPolicy};
        let mut p = DropPolicy { actions: Vec::new(), ..DropPolicy::default() };
        let num = |key: &str, default: f64| -> Result<f64> {
            match v.get(key) {
                None => Ok(default),
                Some(n) => {
                    let s = self.str(n, key)?;
                    s.parse().map_err(|_| {
                        self.err(n, format!("syscall_event_drops.{key} must be a number, not '{s}'"))
                    })
                }
            }
        };
        let nonsense = |a: &str| {
            format!("syscall event drop action \"{a}\" does not make sense with the \"ignore\" action")
        };
        if let Some(acts) = v.get("actions") {
            for a in self.strings(acts, "syscall_event_drops.actions")? {
                let act = match a.as_str() {
                    "ignore" => DropAction::Ignore,
                    "log" => DropAction::Log,
                    "alert" => DropAction::Alert,
                    "exit" => DropAction::Exit,
                    _ => bail!(self.err(acts, "available actions for syscall event drops are \"ignore\", \"log\", \"alert\", and \"exit\"")),
                };
                if matches!(act, DropAction::Log | DropAction::Alert)
                    && p.actions.contains(&DropAction::Ignore)
                {
                    bail!(self.err(acts, nonsense(&a)));
                }
                p.actions.push(act);
            }
        }
        p.actions.sort();
        p.actions.dedup();
        if p.actions.is_empty() {
            p.actions.push(DropAction::Ignore);
        }
        p.threshold = num("threshold", 0.1)?;
        if !(0.0..=1.0).contains(&p.threshold) {
            let at = v.get("threshold").unwrap_or(v);
            bail!(self.err(at, "syscall event drops threshold must be a double in the range [0, 1]"));
        }
        p.rate = num("rate", 0.03333)?;
        p.max_burst = num("max_burst", 1.0)?;
        p.simulate = match v.get("simulate_drops") {
            Some(n) => self.bool(n, "syscall_event_drops.simulate_drops")?,
            None => false,
        };
        Ok(p)
    }

    /// `rules:` entries, each `enable` or `disable` of a `rule` (a name with `*` wildcards)
    /// or a `tag`, applied in order after loading.
    fn selection(&self, v: &Node) -> Result<Vec<harrier_rules::ruleset::Selection>> {
        use harrier_rules::ruleset::{Selection, Selector};
        let items = match v {
            Node::Seq { items, .. } => items.as_slice(),
            n if n.is_null() => return Ok(Vec::new()),
            _ => bail!(self.err(v, "rules must be a list of enable/disable entries")),
        };
        let mut out = Vec::new();
        for item in items {
            let Node::Map { entries, .. } = item else {
                bail!(self.err(item, "a rules entry is a mapping: enable or disable"));
            };
            for (k, body) in entries {
                let enable = match k.as_str() {
                    Some("enable") => true,
                    Some("disable") => false,
                    _ => bail!(self.err(k, "a rules entry is enable or disable")),
                };
                let what = match (body.get("rule"), body.get("tag")) {
                    (Some(r), None) => Selector::Rule(self.str(r, "rules[].rule")?.to_string()),
                    (None, Some(t)) => Selector::Tag(self.str(t, "rules[].tag")?.to_string()),
                    _ => bail!(self.err(body, "an enable or disable entry names one rule or one tag")),
                };
                out.push(Selection { enable, what });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn falco_keys_are_read_and_others_warned_about() {
        let c = RunConfig::parse(
            "falco.yaml",
            "rules_files:\n  - /etc/falco/falco_rules.yaml\npriority: warning\nrule_matching: all\n\
             json_output: true\nstdout_output:\n  enabled: false\nfile_output:\n  enabled: true\n  \
             filename: /tmp/a.json\nhttp_output:\n  enabled: true\n  url: http://127.0.0.1:2801/\n\
             webserver:\n  enabled: true\n  listen_port: 8765\nbogus: []\n\
             append_output:\n  - extra_fields:\n      - proc.env\n  - suggested_output: true\n",
        )
        .unwrap();
        assert_eq!(c.rules_files, ["/etc/falco/falco_rules.yaml"]);
        assert_eq!((c.priority, c.rule_matching), (Priority::Warning, RuleMatching::All));
        assert!(c.json_output && !c.stdout_output);
        assert_eq!(c.file_output.as_deref(), Some("/tmp/a.json"));
        assert_eq!(c.http_output.as_deref(), Some("http://127.0.0.1:2801/"));
        assert_eq!(c.metrics_addr.as_deref(), Some("0.0.0.0:8765"));
        assert_eq!(c.append_fields, ["proc.env"]);
        assert!(c.suggested_output);
        assert_eq!(c.append_output.len(), 2);
        assert_eq!(
            c.append_output[1].extra_output,
            "container_id=%container.id container_name=%container.name \
             container_image_repository=%container.image.repository \
             container_image_tag=%container.image.tag k8s_pod_name=%k8s.pod.name k8s_ns_name=%k8s.ns.name"
        );
        assert_eq!(c.warnings, ["falco.yaml:17:1: 'bogus' is not used by harrier"]);
    }

    #[test]
    fn the_packaged_config_loads_without_warnings() {
        let text = include_str!("../../../packaging/harrier.yaml.in")
            .replace("@RULESDIR@", "/usr/share/harrier/rules")
            .replace("@SYSCONFDIR@", "/etc");
        let c = RunConfig::parse("harrier.yaml", &text).unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert_eq!(c.metrics_addr.as_deref(), Some("127.0.0.1:9376"));
        assert_eq!(c.rules_files.len(), 2);
        assert!(c.json_output && c.stdout_output && c.file_output.is_none());
        assert_eq!(c.outputs_queue, Limits::default(), "the packaged file spells out the defaults");
        assert!(c.entry_copies);
    }

    #[test]
    fn bad_values_name_file_line_and_column() {
        let e = RunConfig::parse("c.yaml", "json_output: maybe\n").unwrap_err().to_string();
        assert_eq!(e, "c.yaml:1:14: json_output must be true or false, not 'maybe'");
        assert!(!RunConfig::parse("c.yaml", "entry_copies: false\n").unwrap().entry_copies);
        let e = RunConfig::parse("c.yaml", "entry_copies: no-thanks\n").unwrap_err().to_string();
        assert_eq!(e, "c.yaml:1:15: entry_copies must be true or false, not 'no-thanks'");
        let e = RunConfig::parse("c.yaml", "a: 1\npriority: loud\n").unwrap_err().to_string();
        assert_eq!(e, "c.yaml:2:11: unknown priority 'loud'");
        let e = RunConfig::parse("c.yaml", "outputs_queue:\n  max_bytes: lots\n").unwrap_err().to_string();
        assert_eq!(e, "c.yaml:2:14: outputs_queue.max_bytes must be a size such as 32M, not 'lots'");
        let e = RunConfig::parse("c.yaml", "outputs_queue:\n  capacity: -1\n").unwrap_err().to_string();
        assert_eq!(e, "c.yaml:2:13: outputs_queue.capacity must be a number of alerts, not '-1'");
    }

    #[test]
    fn outputs_queue_keeps_falcos_capacity_and_adds_a_byte_limit_and_a_kept_priority() {
        let d = RunConfig::default().outputs_queue;
        assert_eq!((d.capacity, d.max_bytes, d.keep_rank), (0, harrier_outputs::queue::DEFAULT_MAX_BYTES, 2));
        let c = RunConfig::parse(
            "f.yaml",
            "outputs_queue:\n  capacity: 0\n  max_bytes: 8M\n  keep_priority: error\n  recovery: 1\n",
        )
        .unwrap();
        assert_eq!(c.outputs_queue, Limits { capacity: 0, max_bytes: 8 << 20, keep_rank: 3 });
        assert_eq!(c.warnings, ["f.yaml:5:3: 'outputs_queue.recovery' is not used by harrier"]);
        let c = RunConfig::parse("f.yaml", "outputs_queue:\n  capacity: 5000\n").unwrap();
        assert_eq!((c.outputs_queue.capacity, c.outputs_queue.max_bytes), (5000, d.max_bytes));
    }

    #[test]
    fn http_output_webserver_and_metrics_options_are_read_with_falcos_defaults() {
        let c = RunConfig::parse(
            "f.yaml",
            "http_output:\n  enabled: true\n  url: https://sidekick:2801/\n  user_agent: ua/1\n  insecure: true\n  \
             ca_cert: \"\"\n  ca_bundle: /b.pem\n  ca_path: /etc/ssl/certs\n  mtls: true\n  client_cert: /c.crt\n  \
             client_key: /c.key\n  echo: true\n  compress_uploads: true\n  keep_alive: true\n  max_consecutive_timeouts: 7\n\
             webserver:\n  enabled: true\n  k8s_healthz_endpoint: /health\n  ssl_enabled: true\n  ssl_certificate: /f.pem\n\
             metrics:\n  enabled: true\n  interval: 15m\n  output_rule: true\n  output_file: /tmp/m.jsonl\n  \
             rules_counters_enabled: false\n  convert_memory_to_mb: false\n",
        )
        .unwrap();
        let h = &c.http_options;
        assert_eq!(h.user_agent, "ua/1");
        assert!(h.tls.insecure && h.echo && h.compress_uploads && h.keep_alive);
        assert_eq!((h.tls.ca_cert.as_deref(), h.tls.ca_bundle.as_deref()), (None, Some("/b.pem")));
        assert_eq!(h.tls.ca_path.as_deref(), Some("/etc/ssl/certs"));
        assert_eq!(h.tls.client_cert, Some(("/c.crt".to_string(), "/c.key".to_string())));
        assert_eq!(h.max_consecutive_timeouts, 7);
        assert_eq!((c.healthz.as_str(), c.webserver_ssl.as_deref()), ("/health", Some("/f.pem")));
        let m = c.metrics.unwrap();
        assert_eq!(m.interval, std::time::Duration::from_secs(900));
        assert!(m.output_rule && !m.rules_counters && !m.convert_memory_to_mb && m.resource_utilization);
        assert_eq!(m.output_file.as_deref(), Some("/tmp/m.jsonl"));

        // Falco's defaults: falcosecurity/falco, a connection per alert, 5 timeouts, no TLS
        // options; ssl off; metrics without output_rule or output_file take no snapshots.
        let c = RunConfig::parse(
            "f.yaml",
            "http_output:\n  enabled: true\n  url: http://x/\nwebserver:\n  enabled: true\n\
             metrics:\n  enabled: true\n  output_file: \"\"\n",
        )
        .unwrap();
        let h = &c.http_options;
        assert_eq!(
            (h.user_agent.as_str(), h.keep_alive, h.max_consecutive_timeouts),
            ("falcosecurity/falco", false, 5)
        );
        assert_eq!(h.tls, Default::default());
        assert!(c.webserver_ssl.is_none() && c.metrics.is_none());
        assert!(RunConfig::default().http_options.keep_alive, "--http-output keeps connections alive");
        let c = RunConfig::parse("f.yaml", "webserver:\n  enabled: true\n  ssl_enabled: true\n").unwrap();
        assert_eq!(c.webserver_ssl.as_deref(), Some("/etc/falco/falco.pem"));

        let e = RunConfig::parse("c.yaml", "metrics:\n  enabled: true\n  interval: soon\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "c.yaml:3:13: metrics.interval: 'soon' is not a duration such as 15m, 1h, 500ms or 5000 (ms)"
        );
        let e = RunConfig::parse(
            "c.yaml",
            "http_output:\n  enabled: true\n  url: http://x/\n  max_consecutive_timeouts: 300\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "c.yaml:4:29: http_output.max_consecutive_timeouts must be 0-255, not '300'");
        let e = RunConfig::parse("c.yaml", "webserver:\n  enabled: true\n  ssl_enabled: sometimes\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "c.yaml:3:16: webserver.ssl_enabled must be true or false, not 'sometimes'");
    }
}
