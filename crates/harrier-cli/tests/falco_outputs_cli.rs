//! falco.yaml's http_output (https, mTLS, user_agent, gzip, echo), webserver (ssl) and
//! metrics (snapshots as alerts and JSON lines) through `harrier falco` with
//! engine.kind=nodriver: no root, no BPF. Bad files end the run with one line naming the key
//! and the file.

#[allow(dead_code)] // harrier_run: the live helpers are not used here
mod common;

use common::HARRIER;
use harrier_outputs::tls::rustls;
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A scratch folder with a CA, a server certificate for 127.0.0.1 (also as one PEM with its
/// key, Falco's ssl_certificate) and a client certificate; removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("harrier-falco-outputs-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = p.self_signed(&ca_key).unwrap();
        let leaf = |names: Vec<String>, usage| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(names).unwrap();
            p.extended_key_usages = vec![usage];
            (p.signed_by(&key, &ca, &ca_key).unwrap(), key)
        };
        let (srv, srv_key) = leaf(vec!["127.0.0.1".into()], ExtendedKeyUsagePurpose::ServerAuth);
        let (cli, cli_key) = leaf(vec!["client".into()], ExtendedKeyUsagePurpose::ClientAuth);
        let w = |f: &str, t: String| std::fs::write(d.join(f), t).unwrap();
        w("ca.pem", ca.pem());
        w("server.pem", format!("{}{}", srv.pem(), srv_key.serialize_pem()));
        w("client.crt", cli.pem());
        w("client.key", cli_key.serialize_pem());
        Scratch(d)
    }
    fn path(&self, f: &str) -> String {
        self.0.join(f).display().to_string()
    }
    fn write(&self, f: &str, text: &str) -> String {
        std::fs::write(self.0.join(f), text).unwrap();
        self.path(f)
    }
    /// A receiver requiring a client certificate of the CA (mTLS) when `mtls`.
    fn server_tls(&self, mtls: bool) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<_> =
            CertificateDer::pem_file_iter(self.path("server.pem")).unwrap().map(|c| c.unwrap()).collect();
        let key = PrivateKeyDer::from_pem_file(self.path("server.pem")).unwrap();
        let b = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let b = if mtls {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(CertificateDer::from_pem_file(self.path("ca.pem")).unwrap()).unwrap();
            b.with_client_cert_verifier(
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .unwrap(),
            )
        } else {
            b.with_no_client_auth()
        };
        Arc::new(b.with_single_cert(chain, key).unwrap())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn data(f: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/falco").join(f).display().to_string()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `harrier falco -c CFG -r single_rule.yaml -o engine.kind=nodriver -M SECS ARGS`.
fn nodriver(cfg: &str, secs: &str, args: &[&str]) -> Output {
    Command::new(HARRIER)
        .args(["falco", "-c", cfg, "-r", &data("single_rule.yaml"), "-o", "engine.kind=nodriver", "-M", secs])
        .args(args)
        .output()
        .unwrap()
}

/// The same run without a duration, until `done` holds for its stdout so far (checked as
/// lines come and every 50 ms; 60 s at most); then SIGINT ends it. Its stdout and stderr.
/// Snapshot counts do not hang on how fast an emulated guest starts or how long it stalls.
fn nodriver_until(cfg: &str, args: &[&str], done: impl Fn(&str) -> bool) -> (String, String) {
    let rules = data("single_rule.yaml");
    let all: Vec<&str> = ["-c", cfg, "-r", &rules, "-o", "engine.kind=nodriver"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let (mut child, out, err) = common::harrier_falco(&all);
    let (give_up, mut stdout) = (Instant::now() + Duration::from_secs(60), String::new());
    while !done(&stdout) {
        assert!(
            Instant::now() < give_up,
            "not done after 60 s: {}",
            err.try_iter().collect::<Vec<_>>().join("\n")
        );
        match out.recv_timeout(Duration::from_millis(50)) {
            Ok(l) => stdout += &(l + "\n"),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                panic!("ended early: {}", err.iter().collect::<Vec<_>>().join("\n"))
            }
        }
    }
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    let status = child.0.wait().unwrap();
    stdout.extend(out.iter().map(|l| l + "\n"));
    let stderr = err.iter().map(|l| l + "\n").collect::<String>();
    assert!(status.success(), "{status}: {stderr}");
    (stdout, stderr)
}

/// Lines in file `f` (0 while it does not exist).
fn lines_in(f: &str) -> usize {
    std::fs::read_to_string(f).map_or(0, |t| t.lines().count())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One request as an https receiver saw it: its headers (names in lower case) and body.
type Seen = (std::collections::HashMap<String, String>, Vec<u8>);

/// An https receiver on loopback: one request per connection, answered 200 with `answer`.
fn receiver(tls: Arc<rustls::ServerConfig>, answer: &'static str) -> (String, Receiver<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/alerts", l.local_addr().unwrap());
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let (tls, tx) = (tls.clone(), tx.clone());
            std::thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let conn = rustls::ServerConnection::new(tls).unwrap();
                let mut r = BufReader::new(rustls::StreamOwned::new(conn, c));
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let mut headers = std::collections::HashMap::new();
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) == 0 {
                        return;
                    }
                    match h.trim_end().split_once(':') {
                        Some((k, v)) => headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string()),
                        None => break,
                    };
                }
                let len = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
                let mut body = vec![0; len];
                if r.read_exact(&mut body).is_err() {
                    return;
                }
                let _ = tx.send((headers, body));
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let s = r.get_mut();
                let _ = s.write_all(resp.as_bytes());
                s.conn.send_close_notify();
                let _ = s.flush();
            });
        }
    });
    (url, rx)
}

fn snapshots(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|j| j["rule"] == "Falco internal: metrics snapshot")
        .collect()
}

#[test]
fn metrics_snapshots_are_alerts_and_json_lines() {
    let s = Scratch::new("metrics");
    let file = s.path("stats.jsonl");
    let cfg = s.write(
        "m.yaml",
        &format!(
            "json_output: true\nmetrics:\n  enabled: true\n  interval: 300ms\n  output_rule: true\n  \
             output_file: {file}\n  include_empty_values: true\n"
        ),
    );
    let (stdout, _) = nodriver_until(&cfg, &[], |o| snapshots(o).len() >= 3);
    let alerts = snapshots(&stdout);
    // Never more often than the interval (the clock of each snapshot, 300 ms less a tick).
    let times: Vec<u64> = alerts.iter().map(|a| a["output_fields"]["evt.time"].as_u64().unwrap()).collect();
    for w in times.windows(2) {
        assert!(w[1] - w[0] >= 250_000_000, "a snapshot each 300 ms, not more often: {times:?}");
    }
    let a = &alerts[0];
    assert_eq!((&a["priority"], &a["source"]), (&"Informational".into(), &"internal".into()));
    assert!(a["output"].as_str().unwrap().ends_with("Informational Falco metrics snapshot"), "{a}");
    let f = &a["output_fields"];
    assert!(f["falco.version"].as_str().unwrap().starts_with("0.44.1+harrier."), "{f}");
    for k in [
        "scap.n_evts",
        "scap.n_drops",
        "falco.num_evts",
        "falco.cpu_usage_perc",
        "falco.memory_rss_mb",
        "falco.rules.matches_total",
        "falco.host_num_cpus",
        "falco.start_ts",
    ] {
        assert!(f.get(k).is_some(), "{k} missing: {f}");
    }
    assert_eq!(f["falco.rules.open_from_cat"], 0, "include_empty_values lists the rule that never matched");
    let lines: Vec<Value> =
        std::fs::read_to_string(&file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), alerts.len(), "one line per snapshot");
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["sample"].as_u64(), Some(i as u64 + 1));
        assert!(l["output_fields"]["scap.n_evts"].is_u64());
    }

    // output_rule off: the file only. A priority above informational: no alert, said once.
    std::fs::remove_file(&file).unwrap();
    let (stdout, _) = nodriver_until(&cfg, &["-o", "metrics.output_rule=false"], |_| lines_in(&file) >= 2);
    assert!(snapshots(&stdout).is_empty());
    let out = nodriver(&cfg, "1", &["-o", "priority=warning"]);
    assert!(snapshots(&text(&out.stdout)).is_empty());
    assert!(
        text(&out.stderr).contains("metrics.output_rule needs priority informational or debug"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn snapshots_reach_an_https_receiver_over_mtls_with_falcos_http_options() {
    let s = Scratch::new("https");
    let (url, rx) = receiver(s.server_tls(true), "{\"received\":true}");
    let cfg = s.write(
        "h.yaml",
        &format!(
            "json_output: true\nstdout_output:\n  enabled: false\n\
             metrics:\n  enabled: true\n  interval: 400ms\n  output_rule: true\n\
             http_output:\n  enabled: true\n  url: {url}\n  user_agent: harrier-cli-test\n  ca_cert: {}\n  \
             mtls: true\n  client_cert: {}\n  client_key: {}\n  compress_uploads: true\n  echo: true\n",
            s.path("ca.pem"),
            s.path("client.crt"),
            s.path("client.key")
        ),
    );
    // Until the receiver's answer is echoed: under emulation (the test guests) the first
    // snapshot and its mTLS handshake took over 2 s (2026-12-02, 6.12 guest).
    let (stdout, stderr) = nodriver_until(&cfg, &[], |o| o.contains("{\"received\":true}"));
    let (headers, body) = rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("no request reached the receiver ({e}); harrier's stderr:\n{stderr}"));
    assert_eq!(headers["user-agent"], "harrier-cli-test");
    assert_eq!(headers["content-encoding"], "gzip");
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut json).expect("a gzip body");
    let j: Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(j["rule"], "Falco internal: metrics snapshot");
    assert!(stdout.contains("{\"received\":true}"), "echo: {stdout}");

    // Without the client certificate the receiver takes nothing.
    let (url, rx) = receiver(s.server_tls(true), "");
    // Two snapshots in the metrics file: at least one was sent to the receiver.
    let (file, url) = (s.path("sent.jsonl"), format!("http_output.url={url}"));
    let args = ["-o", &url, "-o", "http_output.mtls=false", "-o", &format!("metrics.output_file={file}")];
    let (_, stderr) = nodriver_until(&cfg, &args, |_| lines_in(&file) >= 2);
    assert!(rx.try_recv().is_err(), "a receiver requiring mTLS got a request without a client certificate");
    assert!(stderr.contains("output http:"), "the losses are told: {stderr}");
}

#[test]
fn the_webserver_serves_healthz_over_https() {
    let s = Scratch::new("web");
    let port = free_port();
    let cfg = s.write(
        "w.yaml",
        &format!(
            "webserver:\n  enabled: true\n  listen_address: 127.0.0.1\n  listen_port: {port}\n  \
             ssl_enabled: true\n  ssl_certificate: {}\n",
            s.path("server.pem")
        ),
    );
    let mut child = Command::new(HARRIER)
        .args([
            "falco",
            "-c",
            &cfg,
            "-r",
            &data("single_rule.yaml"),
            "-o",
            "engine.kind=nodriver",
            "-M",
            "30",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let tls = harrier_outputs::tls::ClientTls { ca_cert: Some(s.path("ca.pem")), ..Default::default() };
    // Generous limits (the child is killed as soon as it answers): under
    // emulation a TLS handshake in a loaded guest took over 2 s (2026-12-03,
    // 6.12 guest, "timed out reading response").
    let agent =
        ureq::AgentBuilder::new().tls_config(tls.config().unwrap()).timeout(Duration::from_secs(8)).build();
    let t = Instant::now();
    let body = loop {
        match agent.get(&format!("https://127.0.0.1:{port}/healthz")).call() {
            Ok(r) => break r.into_string().unwrap(),
            Err(e) if t.elapsed() > Duration::from_secs(20) => {
                let _ = child.kill();
                panic!("no https answer: {e}");
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert_eq!(body, "{\"status\": \"ok\"}");
    let metrics =
        agent.get(&format!("https://127.0.0.1:{port}/metrics")).call().unwrap().into_string().unwrap();
    assert!(metrics.contains("falcosecurity_scap_n_evts_total"), "{metrics}");
    let _ = child.kill();
    let _ = child.wait();
}

/// `Error: <key>: ...<file>...` alone on stderr, exit 1, no panic.
fn one_line_error(out: &Output, key: &str, file: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("Error: ")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with(&format!("Error: {key}: ")) && lines[0].contains(file), "{err}");
}

#[test]
fn missing_or_bad_tls_files_end_the_run_with_one_line() {
    let s = Scratch::new("bad");
    let cfg = s.write("b.yaml", "stdout_output:\n  enabled: true\n");
    let port = free_port().to_string();
    let web = |pem: &str| {
        nodriver(
            &cfg,
            "1",
            &[
                "-o",
                "webserver.enabled=true",
                "-o",
                "webserver.listen_address=127.0.0.1",
                "-o",
                &format!("webserver.listen_port={port}"),
                "-o",
                "webserver.ssl_enabled=true",
                "-o",
                &format!("webserver.ssl_certificate={pem}"),
            ],
        )
    };
    one_line_error(&web("/nonexistent/falco.pem"), "webserver.ssl_certificate", "/nonexistent/falco.pem");
    one_line_error(&web(&s.path("ca.pem")), "webserver.ssl_certificate", &s.path("ca.pem"));
    let http = |extra: &[&str]| {
        let mut a = vec!["-o", "http_output.enabled=true", "-o", "http_output.url=https://127.0.0.1:9/"];
        a.extend_from_slice(extra);
        nodriver(&cfg, "1", &a)
    };
    one_line_error(
        &http(&["-o", "http_output.ca_cert=/nonexistent/ca.pem"]),
        "http_output.ca_cert",
        "/nonexistent/ca.pem",
    );
    let garbage = s.write("garbage.key", "not a key\n");
    let ca = format!("http_output.ca_cert={}", s.path("ca.pem"));
    let cert = format!("http_output.client_cert={}", s.path("client.crt"));
    let key = format!("http_output.client_key={garbage}");
    one_line_error(
        &http(&["-o", &ca, "-o", "http_output.mtls=true", "-o", &cert, "-o", &key]),
        "http_output.client_key",
        &garbage,
    );
    one_line_error(
        &http(&[
            "-o",
            &ca,
            "-o",
            "http_output.mtls=true",
            "-o",
            "http_output.client_cert=/nonexistent/c.crt",
        ]),
        "http_output.client_cert",
        "/nonexistent/c.crt",
    );
    let out = nodriver(
        &cfg,
        "1",
        &["-o", "metrics.enabled=true", "-o", "metrics.output_file=/nonexistent/dir/m.jsonl"],
    );
    one_line_error(&out, "metrics.output_file", "/nonexistent/dir/m.jsonl");
}
