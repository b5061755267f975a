//! Prometheus metrics (`--metrics-addr`): Falco's names for what Falco has,
//! plus per-rule evaluation counts and CPU time, which Falco lacks.

use anyhow::{Context, Result};
use harrier_outputs::{OutputStats, PRIORITIES};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    pub rule_name: String,
    pub priority: String,
    pub source: String,
    pub tags: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleName {
    pub rule_name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutputName {
    pub output: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutputPriority {
    pub output: String,
    pub priority: String,
}

/// Cumulative figures, sampled by the main loop.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub events: u64,
    pub drops: u64,
    /// Events the kernel-side filter did not send (counted in `events`).
    pub filtered: u64,
    /// Rule reloads done in place (SIGHUP or a watched file's change).
    pub reloads: u64,
    /// Per rule: (labels, matches, evaluations, cpu seconds).
    pub rules: Vec<(RuleLabels, u64, u64, f64)>,
    /// Per output: alerts sent, shed and failed per priority, queue fill.
    pub outputs: Vec<OutputStats>,
    pub cpu_ratio: f64,
    pub rss_bytes: u64,
    /// Per enforced rule: its name, its actions' counts ([`ENFORCE_ACTIONS`]
    /// order), then its late kernel verdicts.
    pub enforce: Vec<(String, [u64; 6])>,
    /// Per plugin source: its name and (events, alerts, extraction errors).
    pub plugin_sources: Vec<(String, [u64; 3])>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceName {
    source: String,
}

/// The `action` label of harrier_enforce_actions, in `Sample::enforce` order.
pub const ENFORCE_ACTIONS: [&str; 5] = ["killed", "would_kill", "not_killed", "failed", "resumed"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EnforceLabels {
    rule_name: String,
    action: String,
}

pub struct Metrics {
    registry: Registry,
    events: Counter,
    drops: Counter,
    filtered: Counter,
    reloads: Counter,
    matches: Family<RuleLabels, Counter>,
    evaluations: Family<RuleName, Counter>,
    rule_cpu: Family<RuleName, Counter<f64, AtomicU64>>,
    output_drops: Family<OutputName, Counter>,
    output_sent: Family<OutputName, Counter>,
    output_shed: Family<OutputPriority, Counter>,
    output_failed: Family<OutputPriority, Counter>,
    output_errors: Family<OutputName, Counter>,
    queue_alerts: Family<OutputName, Gauge>,
    queue_bytes: Family<OutputName, Gauge>,
    cpu: Gauge<f64, AtomicU64>,
    rss: Gauge,
    enforce: Family<EnforceLabels, Counter>,
    enforce_late: Family<RuleName, Counter>,
    /// Plugin sources: events, alerts, extraction errors.
    plugin: [Family<SourceName, Counter>; 3],
    last: Sample,
}

/// Counters only go up: add what grew since the last sample.
fn grow(c: &Counter, now: u64, before: u64) {
    c.inc_by(now.saturating_sub(before));
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let events = Counter::default();
        let drops = Counter::default();
        let filtered = Counter::default();
        let reloads = Counter::default();
        let matches = Family::<RuleLabels, Counter>::default();
        let evaluations = Family::<RuleName, Counter>::default();
        let rule_cpu = Family::<RuleName, Counter<f64, AtomicU64>>::default();
        let output_drops = Family::<OutputName, Counter>::default();
        let output_sent = Family::<OutputName, Counter>::default();
        let output_shed = Family::<OutputPriority, Counter>::default();
        let output_failed = Family::<OutputPriority, Counter>::default();
        let output_errors = Family::<OutputName, Counter>::default();
        let queue_alerts = Family::<OutputName, Gauge>::default();
        let queue_bytes = Family::<OutputName, Gauge>::default();
        let cpu = Gauge::<f64, AtomicU64>::default();
        let rss = Gauge::default();
        let enforce = Family::<EnforceLabels, Counter>::default();
        let enforce_late = Family::<RuleName, Counter>::default();
        let plugin: [Family<SourceName, Counter>; 3] = Default::default();
        for (f, (name, help)) in plugin.iter().zip([
            ("harrier_plugin_events", "Events a plugin source delivered"),
            ("harrier_plugin_alerts", "Alerts raised on a plugin source's events"),
            (
                "harrier_plugin_extract_errors",
                "Field extractions a plugin failed or answered with malformed values",
            ),
        ]) {
            registry.register(name, help, f.clone());
        }
        registry.register(
            "harrier_enforce_actions",
            "Alerts of enforced rules per action: killed, would_kill (dry-run), not_killed (exempt, protected, over the rate), failed, resumed (held, then let go)",
            enforce.clone(),
        );
        registry.register(
            "harrier_enforce_kernel_late",
            "Alerts of enforced rules the kernel decides whose verdict was not logged within 50 ms: user space acted (also counted in harrier_enforce_actions)",
            enforce_late.clone(),
        );
        registry.register("falcosecurity_scap_n_evts", "Events received from the kernel", events.clone());
        registry.register(
            "falcosecurity_scap_n_drops",
            "Events lost in the kernel (full rings)",
            drops.clone(),
        );
        registry.register(
            "harrier_kernel_filtered",
            "Events the kernel-side filter did not send (included in falcosecurity_scap_n_evts)",
            filtered.clone(),
        );
        registry.register(
            "harrier_rules_reloads",
            "Rule reloads done in place (SIGHUP, or a watched config or rules file changed)",
            reloads.clone(),
        );
        registry.register("falcosecurity_falco_rules_matches", "Alerts per rule", matches.clone());
        registry.register("harrier_rule_evaluations", "Condition evaluations per rule", evaluations.clone());
        registry.register(
            "harrier_rule_cpu_seconds",
            "CPU time evaluating each rule's condition",
            rule_cpu.clone(),
        );
        registry.register(
            "falcosecurity_falco_outputs_queue_num_drops",
            "Alerts lost per output (shed from a full queue or failed)",
            output_drops.clone(),
        );
        registry.register("harrier_outputs_sent", "Alerts delivered per output", output_sent.clone());
        registry.register(
            "harrier_outputs_shed",
            "Alerts shed from a full output queue, per output and priority (the least severe first)",
            output_shed.clone(),
        );
        registry.register(
            "harrier_outputs_failed",
            "Alerts an output gave up on (refused by the receiver, or still queued at the exit deadline)",
            output_failed.clone(),
        );
        registry.register(
            "harrier_outputs_errors",
            "Failed delivery attempts per output, each retry counted (a full disk, a receiver down or refusing)",
            output_errors.clone(),
        );
        registry.register("harrier_outputs_queue_alerts", "Alerts queued per output", queue_alerts.clone());
        registry.register(
            "harrier_outputs_queue_bytes",
            "Memory of the alerts queued per output",
            queue_bytes.clone(),
        );
        registry.register(
            "falcosecurity_falco_cpu_usage_ratio",
            "CPU used by the sensor (cores)",
            cpu.clone(),
        );
        registry.register(
            "falcosecurity_falco_memory_rss_bytes",
            "Resident memory of the sensor",
            rss.clone(),
        );
        Metrics {
            registry,
            events,
            drops,
            filtered,
            reloads,
            matches,
            evaluations,
            rule_cpu,
            output_drops,
            output_sent,
            output_shed,
            output_failed,
            output_errors,
            queue_alerts,
            queue_bytes,
            cpu,
            rss,
            enforce,
            enforce_late,
            plugin,
            last: Sample::default(),
        }
    }

    pub fn update(&mut self, s: Sample) {
        for (i, (source, counts)) in s.plugin_sources.iter().enumerate() {
            let before = self.last.plugin_sources.get(i).filter(|b| &b.0 == source).map_or([0; 3], |b| b.1);
            let l = SourceName { source: source.clone() };
            for k in 0..3 {
                grow(&self.plugin[k].get_or_create(&l), counts[k], before[k]);
            }
        }
        grow(&self.events, s.events, self.last.events);
        grow(&self.drops, s.drops, self.last.drops);
        grow(&self.filtered, s.filtered, self.last.filtered);
        grow(&self.reloads, s.reloads, self.last.reloads);
        for (i, (rule, counts)) in s.enforce.iter().enumerate() {
            let before = self.last.enforce.get(i).filter(|b| &b.0 == rule).map_or([0; 6], |b| b.1);
            for (k, action) in ENFORCE_ACTIONS.iter().enumerate() {
                let l = EnforceLabels { rule_name: rule.clone(), action: action.to_string() };
                grow(&self.enforce.get_or_create(&l), counts[k], before[k]);
            }
            let late = RuleName { rule_name: rule.clone() };
            grow(&self.enforce_late.get_or_create(&late), counts[5], before[5]);
        }
        for (i, (labels, m, e, cpu)) in s.rules.iter().enumerate() {
            let (m0, e0, c0) = self.last.rules.get(i).map_or((0, 0, 0.0), |r| (r.1, r.2, r.3));
            grow(&self.matches.get_or_create(labels), *m, m0);
            let name = RuleName { rule_name: labels.rule_name.clone() };
            grow(&self.evaluations.get_or_create(&name), *e, e0);
            self.rule_cpu.get_or_create(&name).inc_by((cpu - c0).max(0.0));
        }
        for (i, o) in s.outputs.iter().enumerate() {
            let before = self.last.outputs.get(i).filter(|b| b.name == o.name);
            let name = OutputName { output: o.name.clone() };
            grow(&self.output_drops.get_or_create(&name), o.lost(), before.map_or(0, |b| b.lost()));
            grow(
                &self.output_sent.get_or_create(&name),
                o.sent.total(),
                before.map_or(0, |b| b.sent.total()),
            );
            grow(&self.output_errors.get_or_create(&name), o.errors, before.map_or(0, |b| b.errors));
            for (r, p) in PRIORITIES.iter().enumerate() {
                let labels = || OutputPriority { output: o.name.clone(), priority: p.to_string() };
                // Families are created on the first loss, so a quiet output lists none.
                if o.shed.0[r] > 0 {
                    grow(
                        &self.output_shed.get_or_create(&labels()),
                        o.shed.0[r],
                        before.map_or(0, |b| b.shed.0[r]),
                    );
                }
                if o.failed.0[r] > 0 {
                    let b = before.map_or(0, |b| b.failed.0[r]);
                    grow(&self.output_failed.get_or_create(&labels()), o.failed.0[r], b);
                }
            }
            self.queue_alerts.get_or_create(&name).set(o.queued as i64);
            self.queue_bytes.get_or_create(&name).set(o.queued_bytes as i64);
        }
        self.cpu.set(s.cpu_ratio);
        self.rss.set(s.rss_bytes as i64);
        self.last = s;
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// The webserver: where it listens, its health endpoint, and TLS (Falco's ssl_enabled and
/// ssl_certificate, read by [`harrier_outputs::tls::server_config`]).
#[derive(Clone)]
pub struct WebServer {
    pub addr: String,
    /// Falco's k8s_healthz_endpoint: answers `{"status": "ok"}`; any other path the metrics.
    pub healthz: String,
    pub tls: Option<Arc<harrier_outputs::tls::rustls::ServerConfig>>,
}

impl WebServer {
    pub fn plain(addr: &str) -> WebServer {
        WebServer { addr: addr.to_string(), healthz: "/healthz".into(), tls: None }
    }
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The answer to a GET of `path`: (content type, body).
fn answer(path: &str, healthz: &str, metrics: &std::sync::Mutex<Metrics>) -> (&'static str, String) {
    let path = path.split('?').next().unwrap_or(path);
    if path == healthz {
        return ("application/json", "{\"status\": \"ok\"}".to_string());
    }
    (OPENMETRICS, metrics.lock().map(|m| m.text()).unwrap_or_default())
}

/// Serves the metrics on `addr` (any path; /healthz its health) from a thread of its own.
pub fn serve(addr: &str, metrics: Arc<std::sync::Mutex<Metrics>>) -> Result<std::net::SocketAddr> {
    serve_with(&WebServer::plain(addr), metrics)
}

/// Serves as `web` says (http, or https with its TLS); the address it listens on.
pub fn serve_with(web: &WebServer, metrics: Arc<std::sync::Mutex<Metrics>>) -> Result<std::net::SocketAddr> {
    let addr = web.addr.as_str();
    let healthz = web.healthz.clone();
    if let Some(tls) = web.tls.clone() {
        let l = std::net::TcpListener::bind(addr).with_context(|| format!("listening on {addr}"))?;
        let local = l.local_addr()?;
        std::thread::Builder::new().name("metrics".into()).spawn(move || {
            for c in l.incoming().flatten() {
                https_exchange(c, tls.clone(), &healthz, &metrics);
            }
        })?;
        return Ok(local);
    }
    let server = tiny_http::Server::http(addr)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("listening on {addr}"))?;
    let local = server.server_addr().to_ip().ok_or_else(|| anyhow::anyhow!("{addr} is not an IP address"))?;
    std::thread::Builder::new().name("metrics".into()).spawn(move || {
        for req in server.incoming_requests() {
            let (ctype, body) = answer(req.url(), &healthz, &metrics);
            let header = tiny_http::Header::from_bytes("Content-Type", ctype).unwrap();
            let _ = req.respond(tiny_http::Response::from_string(body).with_header(header));
        }
    })?;
    Ok(local)
}

/// One request over TLS, answered and closed (a client that stalls is cut after 5 s; a
/// failed handshake ends the connection only).
fn https_exchange(
    c: std::net::TcpStream,
    tls: Arc<harrier_outputs::tls::rustls::ServerConfig>,
    healthz: &str,
    metrics: &std::sync::Mutex<Metrics>,
) {
    use std::io::{Read, Write};
    let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let _ = c.set_write_timeout(Some(std::time::Duration::from_secs(5)));
    let Ok(conn) = harrier_outputs::tls::rustls::ServerConnection::new(tls) else { return };
    let mut s = harrier_outputs::tls::rustls::StreamOwned::new(conn, c);
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 16 << 10 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut first = text.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or("/"));
    let (status, ctype, body) = match method {
        "GET" | "HEAD" => {
            let (ctype, body) = answer(path, healthz, metrics);
            ("200 OK", ctype, if method == "HEAD" { String::new() } else { body })
        }
        _ => ("405 Method Not Allowed", "text/plain", String::new()),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(resp.as_bytes());
    s.conn.send_close_notify();
    let _ = s.flush();
}

/// This process's CPU time (user + system) and RSS, from /proc/self.
pub fn self_usage() -> (f64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cpu = f.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    let rss = f.get(21).and_then(|r| r.parse::<u64>().ok()).unwrap_or(0) * page;
    (cpu / tick, rss)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sent` alerts, `shed` Warnings and `failed` Criticals, 12 queued.
    fn output(name: &str, sent: u64, shed: u64, failed: u64) -> OutputStats {
        let by = |r: usize, n: u64| {
            let mut b = harrier_outputs::ByPriority::default();
            b.0[r] = n;
            b
        };
        OutputStats {
            name: name.into(),
            sent: by(4, sent),
            shed: by(4, shed),
            failed: by(2, failed),
            notices: 0,
            errors: 3 * sent,
            queued: 12,
            queued_bytes: 4096,
            peak_bytes: 4096,
        }
    }

    #[test]
    fn falcos_names_and_per_rule_cost_are_exposed() {
        let mut m = Metrics::new();
        let labels = RuleLabels {
            rule_name: "Write below binary dir".into(),
            priority: "Error".into(),
            source: "syscall".into(),
            tags: "filesystem".into(),
        };
        m.update(Sample {
            events: 10,
            drops: 1,
            rules: vec![(labels.clone(), 2, 7, 0.5)],
            outputs: vec![output("http", 5, 2, 1)],
            ..Default::default()
        });
        m.update(Sample {
            events: 15,
            drops: 1,
            filtered: 4,
            reloads: 1,
            rules: vec![(labels, 3, 9, 0.75)],
            outputs: vec![output("http", 7, 4, 1)],
            ..Default::default()
        });
        let t = m.text();
        for want in [
            "falcosecurity_scap_n_evts_total 15",
            "falcosecurity_scap_n_drops_total 1",
            "harrier_kernel_filtered_total 4",
            "harrier_rules_reloads_total 1",
            "falcosecurity_falco_rules_matches_total{rule_name=\"Write below binary dir\",priority=\"Error\",source=\"syscall\",tags=\"filesystem\"} 3",
            "harrier_rule_evaluations_total{rule_name=\"Write below binary dir\"} 9",
            "harrier_rule_cpu_seconds_total{rule_name=\"Write below binary dir\"} 0.75",
            "falcosecurity_falco_outputs_queue_num_drops_total{output=\"http\"} 5",
            "harrier_outputs_sent_total{output=\"http\"} 7",
            "harrier_outputs_shed_total{output=\"http\",priority=\"Warning\"} 4",
            "harrier_outputs_failed_total{output=\"http\",priority=\"Critical\"} 1",
            "harrier_outputs_errors_total{output=\"http\"} 21",
            "harrier_outputs_queue_alerts{output=\"http\"} 12",
        ] {
            assert!(t.contains(want), "{want} missing from:\n{t}");
        }
    }

    /// A certificate for 127.0.0.1 signed by a CA made here; the server's PEM (key and
    /// certificate in one file, as Falco's ssl_certificate) and the CA's, in `dir`.
    fn pki(dir: &std::path::Path) -> (String, String) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        std::fs::create_dir_all(dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = p.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert =
            CertificateParams::new(vec!["127.0.0.1".into()]).unwrap().signed_by(&key, &ca, &ca_key).unwrap();
        let (pem, ca_pem) = (dir.join("falco.pem"), dir.join("ca.pem"));
        std::fs::write(&pem, format!("{}{}", key.serialize_pem(), cert.pem())).unwrap();
        std::fs::write(&ca_pem, ca.pem()).unwrap();
        (pem.display().to_string(), ca_pem.display().to_string())
    }

    #[test]
    fn the_webserver_answers_healthz_and_metrics_over_https() {
        let dir = std::env::temp_dir().join(format!("harrier-webserver-{}", std::process::id()));
        let (pem, ca) = pki(&dir);
        let tls = harrier_outputs::tls::server_config(&pem, "webserver.ssl_certificate").unwrap();
        let mut m = Metrics::new();
        m.update(Sample { events: 42, ..Default::default() });
        let web = WebServer { addr: "127.0.0.1:0".into(), healthz: "/healthz".into(), tls: Some(tls) };
        let at = serve_with(&web, Arc::new(std::sync::Mutex::new(m))).unwrap();
        let client = harrier_outputs::tls::ClientTls { ca_cert: Some(ca.clone()), ..Default::default() };
        let agent = ureq::AgentBuilder::new().tls_config(client.config().unwrap()).build();
        let health = agent.get(&format!("https://{at}/healthz")).call().unwrap();
        assert_eq!(health.content_type(), "application/json");
        assert_eq!(health.into_string().unwrap(), "{\"status\": \"ok\"}");
        let metrics = agent.get(&format!("https://{at}/metrics")).call().unwrap().into_string().unwrap();
        assert!(metrics.contains("falcosecurity_scap_n_evts_total 42"), "{metrics}");
        // Plain http to the TLS port gets no answer.
        let plain = ureq::AgentBuilder::new().timeout(std::time::Duration::from_secs(2)).build();
        assert!(plain.get(&format!("http://{at}/healthz")).call().is_err());
        // A missing or keyless file: one line naming the key and the file.
        let e = harrier_outputs::tls::server_config("/nonexistent/falco.pem", "webserver.ssl_certificate")
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "webserver.ssl_certificate: cannot read /nonexistent/falco.pem: No such file or directory (os error 2)");
        let e = harrier_outputs::tls::server_config(&ca, "webserver.ssl_certificate").err().unwrap();
        assert_eq!(e.to_string(), format!("webserver.ssl_certificate: no private key in {ca}"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn plain_http_answers_healthz_with_its_status() {
        let at = serve("127.0.0.1:0", Arc::new(std::sync::Mutex::new(Metrics::new()))).unwrap();
        let body = ureq::get(&format!("http://{at}/healthz")).call().unwrap().into_string().unwrap();
        assert_eq!(body, "{\"status\": \"ok\"}");
        let body = ureq::get(&format!("http://{at}/metrics")).call().unwrap().into_string().unwrap();
        assert!(body.contains("falcosecurity_scap_n_evts_total"), "{body}");
    }
}
