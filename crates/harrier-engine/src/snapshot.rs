//! Falco's `metrics` key: every `interval`, a snapshot of the sensor's figures under Falco's
//! metric names (`falco.*`, `scap.*`) where Harrier has the same figure, as an alert
//! ("Falco internal: metrics snapshot", Informational, source `internal`; `output_rule`)
//! and/or one JSON line `{"sample": n, "output_fields": {...}}` appended to `output_file`.

use anyhow::{anyhow, Result};
use harrier_outputs::Alert;
use serde_json::{Map, Value};
use std::io::Write;
use std::time::{Duration, Instant};

pub const RULE: &str = "Falco internal: metrics snapshot";
pub const OUTPUT: &str = "Falco metrics snapshot";

/// What the `metrics` key asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsPolicy {
    pub interval: Duration,
    pub output_rule: bool,
    pub output_file: Option<String>,
    /// falco.rules.matches_total and falco.rules.<rule> (rules_counters_enabled).
    pub rules_counters: bool,
    /// CPU and memory of the sensor (resource_utilization_enabled).
    pub resource_utilization: bool,
    /// scap.* events and drops (kernel_event_counters_enabled).
    pub kernel_event_counters: bool,
    /// falco.memory_*_mb instead of _kb.
    pub convert_memory_to_mb: bool,
    /// Rules that never matched are listed too.
    pub include_empty_values: bool,
}

impl Default for MetricsPolicy {
    fn default() -> MetricsPolicy {
        MetricsPolicy {
            interval: Duration::from_secs(5),
            output_rule: false,
            output_file: None,
            rules_counters: true,
            resource_utilization: true,
            kernel_event_counters: true,
            convert_memory_to_mb: true,
            include_empty_values: false,
        }
    }
}

/// The shortest interval Falco accepts; shorter ones are raised to it.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Falco's interval: Prometheus durations (`15m`, `1h30m`, `500ms`; units ms s m h d w y)
/// or a bare number of milliseconds.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let bad = || format!("'{s}' is not a duration such as 15m, 1h, 500ms or 5000 (ms)");
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map(Duration::from_millis).map_err(|_| bad());
    }
    let (mut rest, mut ms) = (s, 0u128);
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u128 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let per = match &rest[..unit] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            "y" => 365 * 86_400_000,
            _ => return Err(bad()),
        };
        ms += n * per;
        rest = &rest[unit..];
    }
    Ok(Duration::from_millis(ms.min(u64::MAX as u128) as u64))
}

/// Falco's metric name of a rule: characters other than letters, digits, `_` and `:` become
/// `_`, runs of `_` one, and a trailing `_` goes.
pub fn rule_metric_name(rule: &str) -> String {
    let mut s = String::from("falco.rules.");
    for c in rule.chars() {
        let c = if c.is_ascii_alphanumeric() || c == ':' { c } else { '_' };
        if !(c == '_' && s.ends_with('_')) {
            s.push(c);
        }
    }
    if s.ends_with('_') {
        s.pop();
    }
    s
}

/// What a snapshot reads, cumulative since the start.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Events the rules engine saw.
    pub num_evts: u64,
    /// Events the kernel produced (sent or lost) and lost.
    pub scap_n_evts: u64,
    pub scap_n_drops: u64,
    /// Alerts lost by every output together.
    pub outputs_drops: u64,
    /// Per rule evaluated: name and matches.
    pub rules: Vec<(String, u64)>,
}

/// Takes the snapshots on time; the caller emits the alerts it returns.
pub struct Snapshotter {
    policy: MetricsPolicy,
    file: Option<std::fs::File>,
    version: String,
    host: String,
    kernel_release: String,
    start_ns: u64,
    started: Instant,
    next: Instant,
    sample: u64,
    last: Option<(Instant, Figures)>,
}

/// One decimal.
fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

impl Snapshotter {
    /// Opens `output_file` for appending (an error names the key and the file).
    /// `version` is what `falco.version` says.
    pub fn new(policy: MetricsPolicy, version: &str) -> Result<Snapshotter> {
        let file = match &policy.output_file {
            Some(p) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| anyhow!("metrics.output_file: cannot open {p}: {e}"))?,
            ),
            None => None,
        };
        let kernel_release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let started = Instant::now();
        Ok(Snapshotter {
            next: started + policy.interval.max(MIN_INTERVAL),
            policy,
            file,
            version: version.to_string(),
            host: harrier_outputs::hostname(),
            kernel_release: kernel_release.trim().to_string(),
            start_ns: crate::clock::realtime_now(),
            started,
            sample: 0,
            last: None,
        })
    }

    pub fn policy(&self) -> &MetricsPolicy {
        &self.policy
    }

    /// Whether a snapshot is due at `now`.
    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// A snapshot of `f`: its line appended to the file, and the alert if `output_rule`.
    pub fn take(&mut self, f: &Figures) -> Option<Alert> {
        let now = Instant::now();
        self.next = now + self.policy.interval.max(MIN_INTERVAL);
        self.sample += 1;
        let fields = self.fields(f, now);
        if let Some(file) = self.file.as_mut() {
            let line = serde_json::json!({"sample": self.sample, "output_fields": fields});
            // A failed write (full disk) loses this line only; the next is tried again.
            let _ = writeln!(file, "{line}");
        }
        self.last = Some((now, f.clone()));
        self.policy.output_rule.then(|| Alert {
            time_ns: crate::clock::realtime_now(),
            rule: RULE.into(),
            priority: "Informational",
            output: OUTPUT.into(),
            output_fields: fields,
            tags: Vec::new(),
            source: "internal".into(),
            hostname: self.host.clone(),
            uuid: harrier_outputs::new_uuid(),
        })
    }

    /// The output fields of a snapshot, Falco's names.
    pub fn fields(&self, f: &Figures, now: Instant) -> Map<String, Value> {
        let p = &self.policy;
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        put("evt.time", crate::clock::realtime_now().into());
        put("evt.source", "syscall".into());
        put("evt.hostname", self.host.clone().into());
        put("falco.version", self.version.clone().into());
        put("falco.start_ts", self.start_ns.into());
        put("falco.duration_sec", self.started.elapsed().as_secs().into());
        put("falco.kernel_release", self.kernel_release.clone().into());
        put("falco.host_num_cpus", std::thread::available_parallelism().map_or(1, |n| n.get()).into());
        put("falco.outputs_queue_num_drops", f.outputs_drops.into());
        let (prev, secs) = match &self.last {
            Some((t, last)) => (last.clone(), now.duration_since(*t).as_secs_f64()),
            None => (Figures::default(), now.duration_since(self.started).as_secs_f64()),
        };
        let rate = |now: u64, before: u64| {
            if secs > 0.0 {
                round1(now.saturating_sub(before) as f64 / secs)
            } else {
                0.0
            }
        };
        put("falco.num_evts", f.num_evts.into());
        put("falco.num_evts_prev", prev.num_evts.into());
        put("falco.evts_rate_sec", rate(f.num_evts, prev.num_evts).into());
        if p.rules_counters {
            put("falco.rules.matches_total", f.rules.iter().map(|r| r.1).sum::<u64>().into());
            for (name, n) in &f.rules {
                if *n > 0 || p.include_empty_values {
                    put(&rule_metric_name(name), (*n).into());
                }
            }
        }
        if p.resource_utilization {
            let (cpu, rss) = crate::metrics::self_usage();
            let up = self.started.elapsed().as_secs_f64().max(1e-3);
            put("falco.cpu_usage_perc", round1(100.0 * cpu / up).into());
            let vsz = vsize_bytes();
            if p.convert_memory_to_mb {
                put("falco.memory_rss_mb", round1(rss as f64 / 1048576.0).into());
                put("falco.memory_vsz_mb", round1(vsz as f64 / 1048576.0).into());
            } else {
                put("falco.memory_rss_kb", (rss / 1024).into());
                put("falco.memory_vsz_kb", (vsz / 1024).into());
            }
        }
        if p.kernel_event_counters {
            put("scap.n_evts", f.scap_n_evts.into());
            put("scap.n_evts_prev", prev.scap_n_evts.into());
            put("scap.evts_rate_sec", rate(f.scap_n_evts, prev.scap_n_evts).into());
            put("scap.n_drops", f.scap_n_drops.into());
            put("scap.n_drops_prev", prev.scap_n_drops.into());
            put("scap.n_drops_buffer_total", f.scap_n_drops.into());
            put("scap.evts_drop_rate_sec", rate(f.scap_n_drops, prev.scap_n_drops).into());
            let (de, dd) = (
                f.scap_n_evts.saturating_sub(prev.scap_n_evts),
                f.scap_n_drops.saturating_sub(prev.scap_n_drops),
            );
            put("scap.n_drops_perc", if de > 0 { round1(100.0 * dd as f64 / de as f64) } else { 0.0 }.into());
        }
        m
    }
}

/// This process's virtual size, from /proc/self/stat.
fn vsize_bytes() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    after.split_whitespace().nth(20).and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_as_falco_reads_them() {
        assert_eq!(parse_interval("5000"), Ok(Duration::from_millis(5000)));
        assert_eq!(parse_interval("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_interval("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("2d"), Ok(Duration::from_secs(2 * 86400)));
        assert!(parse_interval("soon").is_err());
        assert!(parse_interval("5x").is_err());
        assert!(parse_interval("").is_err());
    }

    #[test]
    fn rule_names_become_falcos_metric_names() {
        assert_eq!(rule_metric_name("Write below binary dir"), "falco.rules.Write_below_binary_dir");
        assert_eq!(
            rule_metric_name("Read sensitive file (untrusted) "),
            "falco.rules.Read_sensitive_file_untrusted"
        );
        assert_eq!(rule_metric_name("a::b--c"), "falco.rules.a::b_c");
    }

    #[test]
    fn a_snapshot_has_falcos_names_rates_and_the_alert_shape() {
        let dir = std::env::temp_dir().join(format!("harrier-snapshot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("m.jsonl");
        let policy = MetricsPolicy {
            output_rule: true,
            output_file: Some(file.display().to_string()),
            ..MetricsPolicy::default()
        };
        let mut s = Snapshotter::new(policy, "0.44.1+harrier.test").unwrap();
        let f = Figures {
            num_evts: 100,
            scap_n_evts: 120,
            scap_n_drops: 6,
            outputs_drops: 2,
            rules: vec![("Write below binary dir".into(), 3), ("Quiet rule".into(), 0)],
        };
        let a = s.take(&f).unwrap();
        assert_eq!(
            (a.rule.as_str(), a.priority, a.source.as_str(), a.output.as_str()),
            (RULE, "Informational", "internal", OUTPUT)
        );
        let o = &a.output_fields;
        assert_eq!(o["falco.version"], "0.44.1+harrier.test");
        assert_eq!((o["scap.n_evts"].as_u64(), o["scap.n_drops"].as_u64()), (Some(120), Some(6)));
        assert_eq!(o["scap.n_drops_perc"].as_f64(), Some(5.0));
        assert_eq!(
            (o["falco.num_evts"].as_u64(), o["falco.outputs_queue_num_drops"].as_u64()),
            (Some(100), Some(2))
        );
        assert_eq!(o["falco.rules.matches_total"].as_u64(), Some(3));
        assert_eq!(o["falco.rules.Write_below_binary_dir"].as_u64(), Some(3));
        assert!(o.get("falco.rules.Quiet_rule").is_none(), "include_empty_values is off");
        assert!(o["falco.memory_rss_mb"].as_f64().unwrap() > 0.0);
        assert!(o.contains_key("falco.cpu_usage_perc") && o.contains_key("evt.time"));
        let f2 = Figures { num_evts: 150, scap_n_evts: 220, ..f.clone() };
        let a2 = s.take(&f2).unwrap();
        assert_eq!(a2.output_fields["scap.n_evts_prev"].as_u64(), Some(120));
        assert_eq!(a2.output_fields["falco.num_evts_prev"].as_u64(), Some(100));
        assert_eq!(a2.output_fields["scap.n_drops_perc"].as_f64(), Some(0.0));
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0]["sample"].as_u64(), lines[1]["sample"].as_u64()), (Some(1), Some(2)));
        assert_eq!(lines[1]["output_fields"]["scap.n_evts"].as_u64(), Some(220));
        std::fs::remove_dir_all(&dir).unwrap();
        let off = MetricsPolicy {
            rules_counters: false,
            kernel_event_counters: false,
            resource_utilization: false,
            ..MetricsPolicy::default()
        };
        let mut s = Snapshotter::new(off, "v").unwrap();
        assert!(s.take(&f).is_none(), "output_rule off");
        let fields = s.fields(&f, Instant::now());
        assert!(
            fields.keys().all(|k| !k.starts_with("scap.")
                && !k.starts_with("falco.rules.")
                && !k.starts_with("falco.memory")),
            "{fields:?}"
        );
        let e = Snapshotter::new(
            MetricsPolicy { output_file: Some("/nonexistent/m.jsonl".into()), ..MetricsPolicy::default() },
            "v",
        )
        .err()
        .unwrap();
        assert_eq!(
            e.to_string(),
            "metrics.output_file: cannot open /nonexistent/m.jsonl: No such file or directory (os error 2)"
        );
    }
}
