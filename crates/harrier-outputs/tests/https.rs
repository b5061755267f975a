//! http_output's options against receivers on loopback: https with a CA file, with the wrong
//! CA, insecure, mTLS (a receiver that requires a client certificate), gzip bodies, the
//! User-Agent, kept-alive connections or one per alert, timeouts in a row, echo, and the
//! errors for missing or bad files. Certificates are made at test time (rcgen).

use harrier_outputs::sinks::{Http, HttpOptions};
use harrier_outputs::tls::ClientTls;
use harrier_outputs::{Alert, JsonShape, Limits, Outputs};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

fn alert(i: usize) -> Arc<Alert> {
    let mut f = Map::new();
    f.insert("proc.name".into(), "cat".into());
    f.insert("seq".into(), i.into());
    Arc::new(Alert {
        time_ns: 1_795_392_538_000_000_000,
        rule: "Write below binary dir".into(),
        priority: "Error",
        output: format!("File below a known binary directory opened for writing ({i})"),
        output_fields: f,
        tags: vec!["filesystem".into()],
        source: "syscall".into(),
        hostname: "h".into(),
        uuid: harrier_outputs::new_uuid(),
    })
}

/// A folder of PEM files: a CA, a server certificate for 127.0.0.1 signed by it, a client
/// certificate signed by it, and a second CA that signed nothing here.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("harrier-https-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ca = |cn: &str| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.distinguished_name.push(DnType::CommonName, cn);
            let cert = p.self_signed(&key).unwrap();
            (cert, key)
        };
        let (ca_cert, ca_key) = ca("harrier test CA");
        let (other, _) = ca("another CA");
        let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(names).unwrap();
            p.extended_key_usages = vec![usage];
            (p.signed_by(&key, &ca_cert, &ca_key).unwrap(), key)
        };
        let (srv, srv_key) =
            leaf(vec!["127.0.0.1".into(), "localhost".into()], ExtendedKeyUsagePurpose::ServerAuth);
        let (cli, cli_key) = leaf(vec!["client".into()], ExtendedKeyUsagePurpose::ClientAuth);
        let w = |f: &str, t: String| std::fs::write(dir.join(f), t).unwrap();
        w("ca.pem", ca_cert.pem());
        w("other-ca.pem", other.pem());
        w("server.crt", srv.pem());
        w("server.key", srv_key.serialize_pem());
        w("client.crt", cli.pem());
        w("client.key", cli_key.serialize_pem());
        Pki { dir }
    }
    fn path(&self, f: &str) -> String {
        self.dir.join(f).display().to_string()
    }
    fn server_config(&self, client_auth: bool) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<_> =
            CertificateDer::pem_file_iter(self.path("server.crt")).unwrap().map(|c| c.unwrap()).collect();
        let key = PrivateKeyDer::from_pem_file(self.path("server.key")).unwrap();
        let b = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let b = if client_auth {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(self.path("ca.pem")).unwrap() {
                roots.add(c.unwrap()).unwrap();
            }
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            b.with_client_cert_verifier(v)
        } else {
            b.with_no_client_auth()
        };
        Arc::new(b.with_single_cert(chain, key).unwrap())
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One request as the receiver saw it.
#[derive(Debug)]
struct Seen {
    headers: HashMap<String, String>,
    body: Vec<u8>,
    /// The client's port: one per connection.
    peer_port: u16,
}

/// Serves HTTP/1.1 on one connection (TLS or not): every request is recorded and answered
/// 200 with `answer`, until the client closes or asks to.
fn serve_conn<S: Read + Write>(s: S, peer_port: u16, answer: &str, tx: &Sender<Seen>) {
    let mut r = BufReader::new(s);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let len: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let close = headers.get("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"));
        let _ = tx.send(Seen { headers, body, peer_port });
        let resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}", answer.len());
        let s = r.get_mut();
        if s.write_all(resp.as_bytes()).and_then(|_| s.flush()).is_err() || close {
            return;
        }
    }
}

/// A receiver on loopback, https with `tls` or plain http; each connection on a thread.
fn receiver(tls: Option<Arc<rustls::ServerConfig>>, answer: &'static str) -> (String, Receiver<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { continue };
            let (tls, tx) = (tls.clone(), tx.clone());
            std::thread::spawn(move || {
                let peer = c.peer_addr().unwrap().port();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                match tls {
                    Some(cfg) => {
                        let conn = rustls::ServerConnection::new(cfg).unwrap();
                        serve_conn(rustls::StreamOwned::new(conn, c), peer, answer, &tx);
                    }
                    None => serve_conn(c, peer, answer, &tx),
                }
            });
        }
    });
    (format!("{scheme}://127.0.0.1:{port}/falco"), rx)
}

fn limits() -> Limits {
    Limits { capacity: 64, max_bytes: 0, ..Limits::default() }
}

/// `n` alerts through one lane of an http output with `opts`; its figures after a close
/// of `deadline`.
fn deliver(url: &str, opts: HttpOptions, n: usize, deadline: Duration) -> harrier_outputs::OutputStats {
    let mut outs = Outputs::new(limits());
    outs.add("http", Box::new(Http::with_options(url, JsonShape::default(), opts).unwrap()));
    for i in 0..n {
        outs.emit(alert(i));
    }
    outs.close(deadline).remove(0)
}

fn with_tls(tls: ClientTls) -> HttpOptions {
    HttpOptions { tls, ..HttpOptions::default() }
}

fn recv(rx: &Receiver<Seen>) -> Seen {
    rx.recv_timeout(Duration::from_secs(5)).expect("the receiver saw no request")
}

#[test]
fn https_with_a_ca_file_delivers_with_the_user_agent() {
    let pki = Pki::new("ca");
    let (url, rx) = receiver(Some(pki.server_config(false)), "");
    let opts = HttpOptions {
        user_agent: "harrier-test/1.0".into(),
        ..with_tls(ClientTls { ca_cert: Some(pki.path("ca.pem")), ..Default::default() })
    };
    let st = deliver(&url, opts, 2, Duration::from_secs(5));
    assert_eq!((st.sent.total(), st.lost()), (2, 0));
    for i in 0..2 {
        let seen = recv(&rx);
        assert_eq!(seen.headers["user-agent"], "harrier-test/1.0");
        assert_eq!(seen.headers["content-type"], "application/json");
        let j: Value = serde_json::from_slice(&seen.body).unwrap();
        assert_eq!(j["output_fields"]["seq"], i);
    }
    // ca_bundle is read the same way; Falco's default user agent.
    let (url, rx) = receiver(Some(pki.server_config(false)), "");
    let st = deliver(
        &url,
        with_tls(ClientTls { ca_bundle: Some(pki.path("ca.pem")), ..Default::default() }),
        1,
        Duration::from_secs(5),
    );
    assert_eq!(st.sent.total(), 1);
    assert_eq!(recv(&rx).headers["user-agent"], "falcosecurity/falco");
    // ca_path: a folder of PEM files.
    let folder = pki.dir.join("anchors");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(pki.path("ca.pem"), folder.join("test-ca.pem")).unwrap();
    let (url, rx) = receiver(Some(pki.server_config(false)), "");
    let st = deliver(
        &url,
        with_tls(ClientTls { ca_path: Some(folder.display().to_string()), ..Default::default() }),
        1,
        Duration::from_secs(5),
    );
    assert_eq!(st.sent.total(), 1);
    recv(&rx);
}

#[test]
fn a_receiver_the_ca_did_not_sign_gets_nothing_unless_insecure() {
    let pki = Pki::new("insecure");
    let (url, rx) = receiver(Some(pki.server_config(false)), "");
    let wrong = with_tls(ClientTls { ca_cert: Some(pki.path("other-ca.pem")), ..Default::default() });
    let st = deliver(&url, wrong, 1, Duration::from_millis(400));
    assert_eq!((st.sent.total(), st.failed.total()), (0, 1), "{st:?}");
    assert!(rx.try_recv().is_err());
    let insecure =
        with_tls(ClientTls { insecure: true, ca_cert: Some(pki.path("other-ca.pem")), ..Default::default() });
    let st = deliver(&url, insecure, 1, Duration::from_secs(5));
    assert_eq!((st.sent.total(), st.lost()), (1, 0));
    recv(&rx);
}

#[test]
fn mtls_delivers_only_with_the_client_certificate() {
    let pki = Pki::new("mtls");
    let (url, rx) = receiver(Some(pki.server_config(true)), "");
    let ca = ClientTls { ca_cert: Some(pki.path("ca.pem")), ..Default::default() };
    let st = deliver(&url, with_tls(ca.clone()), 1, Duration::from_millis(400));
    assert_eq!((st.sent.total(), st.failed.total()), (0, 1), "without a client certificate: {st:?}");
    assert!(rx.try_recv().is_err());
    let mtls = ClientTls { client_cert: Some((pki.path("client.crt"), pki.path("client.key"))), ..ca };
    let st = deliver(&url, with_tls(mtls), 2, Duration::from_secs(5));
    assert_eq!((st.sent.total(), st.lost()), (2, 0));
    recv(&rx);
    recv(&rx);
}

#[test]
fn compressed_uploads_are_gzip_bodies_equal_to_the_plain_ones() {
    let (url, rx) = receiver(None, "");
    let plain = deliver(&url, HttpOptions::default(), 1, Duration::from_secs(5));
    assert_eq!(plain.sent.total(), 1);
    let plain = recv(&rx);
    assert!(!plain.headers.contains_key("content-encoding"));
    let gz = deliver(
        &url,
        HttpOptions { compress_uploads: true, ..HttpOptions::default() },
        1,
        Duration::from_secs(5),
    );
    assert_eq!(gz.sent.total(), 1);
    let gz = recv(&rx);
    assert_eq!(gz.headers["content-encoding"], "gzip");
    assert_eq!(&gz.body[..2], [0x1f, 0x8b], "a gzip member");
    let mut decoded = Vec::new();
    flate2::read::GzDecoder::new(&gz.body[..]).read_to_end(&mut decoded).unwrap();
    let (a, b): (Value, Value) =
        (serde_json::from_slice(&decoded).unwrap(), serde_json::from_slice(&plain.body).unwrap());
    // The same alert but for its uuid.
    assert_eq!(
        (&a["output"], &a["output_fields"], &a["time"]),
        (&b["output"], &b["output_fields"], &b["time"])
    );
    assert_eq!(a.as_object().unwrap().len(), b.as_object().unwrap().len());
}

#[test]
fn keep_alive_reuses_one_connection_and_its_absence_opens_one_per_alert() {
    let ports = |keep_alive: bool| {
        let (url, rx) = receiver(None, "");
        let st =
            deliver(&url, HttpOptions { keep_alive, ..HttpOptions::default() }, 5, Duration::from_secs(5));
        assert_eq!(st.sent.total(), 5);
        let mut p: Vec<u16> = (0..5).map(|_| recv(&rx).peer_port).collect();
        p.sort();
        p.dedup();
        p.len()
    };
    assert_eq!(ports(true), 1, "one lane, one kept-alive connection");
    assert_eq!(ports(false), 5, "a new connection per alert");
}

#[test]
fn an_alert_fails_after_max_consecutive_timeouts() {
    // Takes connections and reads, never answers; counts the connections.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let (tx, rx) = channel::<()>();
    std::thread::spawn(move || {
        let mut held: Vec<TcpStream> = Vec::new();
        for c in l.incoming().flatten() {
            let _ = tx.send(());
            held.push(c);
        }
    });
    let opts = HttpOptions {
        max_consecutive_timeouts: 2,
        timeout: Duration::from_millis(200),
        keep_alive: false,
        ..HttpOptions::default()
    };
    let st = deliver(&url, opts, 1, Duration::from_secs(5));
    assert_eq!((st.sent.total(), st.failed.total()), (0, 1), "{st:?}");
    // The alert, then the loss notice telling of it: each tried once and again after 2
    // timeouts tolerated.
    let tries = rx.try_iter().count();
    assert_eq!(tries, 2 * 3);
}

/// The echo case, run in a child process of this test binary so that its stdout can be read.
#[test]
fn echo_prints_the_receivers_answers_on_stdout() {
    if std::env::var_os("HARRIER_ECHO_CHILD").is_some() {
        let (url, rx) = receiver(None, "{\"answer\":\"noted\"}");
        let st =
            deliver(&url, HttpOptions { echo: true, ..HttpOptions::default() }, 2, Duration::from_secs(5));
        assert_eq!(st.sent.total(), 2);
        recv(&rx);
        let (url, _rx) = receiver(None, "{\"answer\":\"quiet\"}");
        let st = deliver(&url, HttpOptions::default(), 1, Duration::from_secs(5));
        assert_eq!(st.sent.total(), 1);
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "echo_prints_the_receivers_answers_on_stdout", "--nocapture", "--test-threads=1"])
        .env("HARRIER_ECHO_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.matches("{\"answer\":\"noted\"}\n").count(), 2, "{stdout}");
    assert!(!stdout.contains("quiet"), "echo off prints nothing: {stdout}");
}

#[test]
fn missing_or_bad_tls_files_are_one_line_errors_naming_key_and_file() {
    let pki = Pki::new("bad");
    let err = |tls: ClientTls| {
        Http::with_options("https://127.0.0.1:1/", JsonShape::default(), with_tls(tls))
            .err()
            .unwrap()
            .to_string()
    };
    let e = err(ClientTls { ca_cert: Some("/nonexistent/ca.pem".into()), ..Default::default() });
    assert_eq!(
        e,
        "http_output.ca_cert: cannot read /nonexistent/ca.pem: No such file or directory (os error 2)"
    );
    let e = err(ClientTls { ca_bundle: Some(pki.path("server.key")), ..Default::default() });
    assert_eq!(e, format!("http_output.ca_bundle: no certificate in {}", pki.path("server.key")));
    let e = err(ClientTls { ca_path: Some("/nonexistent/certs".into()), ..Default::default() });
    assert!(e.starts_with("http_output.ca_path: cannot read /nonexistent/certs: "), "{e}");
    let garbage = pki.path("garbage.key");
    std::fs::write(&garbage, "not a key\n").unwrap();
    let e = err(ClientTls {
        ca_cert: Some(pki.path("ca.pem")),
        client_cert: Some((pki.path("client.crt"), garbage.clone())),
        ..Default::default()
    });
    assert_eq!(e, format!("http_output.client_key: no private key in {garbage}"));
    let e = err(ClientTls {
        ca_cert: Some(pki.path("ca.pem")),
        client_cert: Some(("/nonexistent/client.crt".into(), pki.path("client.key"))),
        ..Default::default()
    });
    assert!(e.starts_with("http_output.client_cert: cannot read /nonexistent/client.crt"), "{e}");
    assert!(!e.contains('\n'));
    let e = Http::new("ftp://x/", JsonShape::default()).err().unwrap().to_string();
    assert_eq!(e, "http_output.url 'ftp://x/' must start with http:// or https://");
}
