//! Outputs against a real HTTP receiver on loopback, a dead one, and files.

use harrier_outputs::sinks::{FileSink, Http};
use harrier_outputs::{Alert, JsonShape, Limits, Outputs};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
        hostname: harrier_outputs::hostname(),
        uuid: harrier_outputs::new_uuid(),
    })
}

/// A receiver that answers `status` to every POST and keeps the bodies.
fn receiver(status: u16) -> (String, std::sync::mpsc::Receiver<(String, String)>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/any/path", server.server_addr().to_ip().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let mut body = String::new();
            req.as_reader().read_to_string(&mut body).unwrap();
            let _ = tx.send((req.url().to_string(), body));
            let _ = req.respond(tiny_http::Response::empty(status));
        }
    });
    (url, rx)
}

fn alerts_only(n: usize) -> Limits {
    Limits { capacity: n, max_bytes: 0, ..Limits::default() }
}

#[test]
fn each_alert_is_one_json_post_in_falcos_shape() {
    let (url, rx) = receiver(200);
    let mut outs = Outputs::new(alerts_only(16));
    outs.add("http", Box::new(Http::new(&url, JsonShape::default()).unwrap()));
    for i in 0..3 {
        outs.emit(alert(i));
    }
    let stats = outs.close(Duration::from_secs(5));
    assert_eq!((stats[0].sent.total(), stats[0].lost()), (3, 0));
    for i in 0..3 {
        let (path, body) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(path, "/any/path");
        let j: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(j["rule"], "Write below binary dir");
        assert_eq!(j["priority"], "Error");
        assert_eq!(j["output_fields"]["seq"], i);
        assert!(j["time"].as_str().unwrap().ends_with('Z'));
    }
}

#[test]
fn a_dead_receiver_never_blocks_and_every_lost_alert_is_counted() {
    // A port nothing listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let http = Http::new(&format!("http://127.0.0.1:{port}/"), JsonShape::default()).unwrap();
    let mut outs = Outputs::new(alerts_only(4));
    outs.add_lanes("http", http.lanes(2));
    let t = Instant::now();
    for i in 0..1000 {
        outs.emit(alert(i));
    }
    assert!(t.elapsed() < Duration::from_secs(1), "emit must not wait for the output");
    let stats = outs.close(Duration::from_millis(300));
    assert_eq!(stats[0].sent.total(), 0);
    assert_eq!(stats[0].lost(), 1000, "{stats:?}");
    assert_eq!(stats[0].failed.get("Error"), stats[0].failed.total(), "counted by priority: {stats:?}");
    assert!(stats[0].shed.get("Error") >= 990, "the small queue overflowed: {stats:?}");
    assert_eq!(stats[0].notices, 0, "a dead receiver gets no notice");
    assert!(stats[0].errors >= 2, "each lane's failed attempts are counted: {stats:?}");
}

#[test]
fn a_rejected_alert_is_counted_and_not_retried() {
    let (url, rx) = receiver(400);
    let mut outs = Outputs::new(alerts_only(16));
    outs.add("http", Box::new(Http::new(&url, JsonShape::default()).unwrap()));
    outs.emit(alert(0));
    let stats = outs.close(Duration::from_secs(5));
    assert_eq!((stats[0].sent.total(), stats[0].failed.get("Error")), (0, 1));
    rx.recv_timeout(Duration::from_secs(5)).unwrap();
    // The loss notice follows it (and is refused too); the alert itself is not sent again.
    let (_, notice) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(notice.contains("Falco internal: outputs queue drop"), "{notice}");
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "a 400 is not retried");
    assert_eq!(stats[0].errors, 2, "two refusals, the alert's and the notice's: {stats:?}");
}

#[test]
fn files_get_one_line_per_alert_and_bad_paths_fail_at_open() {
    let dir = std::env::temp_dir().join(format!("harrier-outputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("alerts.json");
    let mut outs = Outputs::new(Limits::default());
    outs.add("file", Box::new(FileSink::open(path.to_str().unwrap(), Some(JsonShape::default())).unwrap()));
    outs.emit(alert(1));
    outs.emit(alert(2));
    assert_eq!(outs.close(Duration::from_secs(5))[0].sent.total(), 2);
    let text = std::fs::read_to_string(&path).unwrap();
    let seqs: Vec<i64> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["output_fields"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2]);
    std::fs::remove_dir_all(&dir).unwrap();
    let err = FileSink::open("/nonexistent-dir/alerts.json", None).err().unwrap();
    assert!(format!("{err:#}").contains("opening /nonexistent-dir/alerts.json"), "{err:#}");
    assert!(Http::new("ftp://x", JsonShape::default()).is_err());
    assert!(Http::new("https://x", JsonShape::default()).is_ok(), "https is built in");
}
