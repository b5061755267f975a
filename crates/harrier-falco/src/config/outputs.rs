//! The output keys' values: outputs_queue, http_output's options, webserver flags and
//! metrics (falco.yaml's defaults where a key is absent).

use super::Reader;
use anyhow::{bail, Result};
use harrier_outputs::Limits;
use harrier_rules::loader::Priority;
use harrier_rules::yaml::Node;

impl Reader<'_> {
    /// outputs_queue: Falco's capacity (0 is Falco's unbounded: no count
    /// limit, the byte limit still bounds memory) and Harrier's max_bytes and
    /// keep_priority.
    pub(super) fn queue(&self, v: &Node, warnings: &mut Vec<String>) -> Result<Limits> {
        let mut l = Limits::default();
        let Node::Map { entries, .. } = v else {
            bail!(self.err(v, "outputs_queue must be a mapping"));
        };
        for (k, v) in entries {
            match self.str(k, "a key")? {
                "capacity" => {
                    let s = self.str(v, "outputs_queue.capacity")?;
                    l.capacity = s.parse().map_err(|_| {
                        self.err(v, format!("outputs_queue.capacity must be a number of alerts, not '{s}'"))
                    })?;
                }
                "max_bytes" => {
                    let s = self.str(v, "outputs_queue.max_bytes")?;
                    l.max_bytes = harrier_capture::parse_size(s).map_err(|_| {
                        self.err(v, format!("outputs_queue.max_bytes must be a size such as 32M, not '{s}'"))
                    })?;
                }
                "keep_priority" => {
                    let s = self.str(v, "outputs_queue.keep_priority")?;
                    let p =
                        Priority::parse(s).ok_or_else(|| self.err(v, format!("unknown priority '{s}'")))?;
                    l.keep_rank = harrier_outputs::rank(p.as_str());
                }
                other => {
                    let p = k.pos();
                    warnings.push(format!(
                        "{}:{}:{}: 'outputs_queue.{other}' is not used by harrier",
                        self.file, p.line, p.col
                    ));
                }
            }
        }
        Ok(l)
    }

    /// `parent.key` as a boolean, `default` when absent.
    pub(super) fn flag(&self, parent: &Node, name: &str, key: &str, default: bool) -> Result<bool> {
        match parent.get(key) {
            Some(n) => self.bool(n, &format!("{name}.{key}")),
            None => Ok(default),
        }
    }

    /// `parent.key` as text; None when absent or empty (Falco's "" is "not set").
    pub(super) fn text(&self, parent: &Node, name: &str, key: &str) -> Result<Option<String>> {
        match parent.get(key) {
            Some(n) if n.is_null() => Ok(None),
            Some(n) => Ok(Some(self.str(n, &format!("{name}.{key}"))?.to_string()).filter(|t| !t.is_empty())),
            None => Ok(None),
        }
    }

    /// http_output's options with falco.yaml's defaults. Files are read when the output
    /// starts (an https url only), where a missing one is an error naming key and file.
    pub(super) fn http_options(&self, v: &Node) -> Result<harrier_outputs::sinks::HttpOptions> {
        use harrier_outputs::sinks::HttpOptions;
        let h = "http_output";
        let mut o = HttpOptions { keep_alive: false, ..HttpOptions::default() };
        if let Some(ua) = v.get("user_agent") {
            o.user_agent = self.str(ua, "http_output.user_agent")?.to_string();
        }
        o.tls.insecure = self.flag(v, h, "insecure", false)?;
        o.tls.ca_cert = self.text(v, h, "ca_cert")?;
        o.tls.ca_bundle = self.text(v, h, "ca_bundle")?;
        o.tls.ca_path = self.text(v, h, "ca_path")?;
        if self.flag(v, h, "mtls", false)? {
            let cert = self.text(v, h, "client_cert")?.unwrap_or_else(|| "/etc/ssl/certs/client.crt".into());
            let key = self.text(v, h, "client_key")?.unwrap_or_else(|| "/etc/ssl/certs/client.key".into());
            o.tls.client_cert = Some((cert, key));
        }
        o.echo = self.flag(v, h, "echo", false)?;
        o.compress_uploads = self.flag(v, h, "compress_uploads", false)?;
        o.keep_alive = self.flag(v, h, "keep_alive", false)?;
        if let Some(n) = v.get("max_consecutive_timeouts") {
            let t = self.str(n, "http_output.max_consecutive_timeouts")?;
            o.max_consecutive_timeouts = t.parse::<u8>().map_err(|_| {
                self.err(n, format!("http_output.max_consecutive_timeouts must be 0-255, not '{t}'"))
            })? as u32;
        }
        Ok(o)
    }

    /// metrics: interval, output_rule, output_file and the switches Harrier has figures for.
    pub(super) fn metrics(&self, v: &Node) -> Result<harrier_engine::snapshot::MetricsPolicy> {
        use harrier_engine::snapshot::{parse_interval, MetricsPolicy};
        let m = "metrics";
        let mut p = MetricsPolicy::default();
        if let Some(i) = v.get("interval") {
            let t = self.str(i, "metrics.interval")?;
            p.interval = parse_interval(t).map_err(|e| self.err(i, format!("metrics.interval: {e}")))?;
        }
        p.output_rule = self.flag(v, m, "output_rule", false)?;
        p.output_file = self.text(v, m, "output_file")?;
        p.rules_counters = self.flag(v, m, "rules_counters_enabled", true)?;
        p.resource_utilization = self.flag(v, m, "resource_utilization_enabled", true)?;
        p.kernel_event_counters = self.flag(v, m, "kernel_event_counters_enabled", true)?
            || self.flag(v, m, "kernel_event_counters_per_cpu_enabled", false)?;
        p.convert_memory_to_mb = self.flag(v, m, "convert_memory_to_mb", true)?;
        p.include_empty_values = self.flag(v, m, "include_empty_values", false)?;
        Ok(p)
    }
}
