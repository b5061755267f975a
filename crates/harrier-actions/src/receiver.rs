//! The receiving end of Harrier's (and Falco's) HTTP output: one JSON alert
//! per POST, to any path, answered 200. Alerts are counted per action by
//! event-generator's rule-name match.

use crate::normalise;
use anyhow::{Context, Result};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Fields `harrier run` is asked to append to every alert (append_output),
/// so an alert can be traced to the generator's process or its descendants.
pub const LINEAGE_FIELDS: [&str; 4] = ["proc.pid", "proc.ppid", "proc.apid[2]", "proc.apid[3]"];

/// A `harrier run --config` file: alerts as JSON by HTTP to `url` over kept-alive
/// connections, nothing on stdout, and the alert's process lineage appended so that
/// alerts can be attributed to the generator.
pub fn harrier_config(url: &str) -> String {
    let mut s = format!(
        "stdout_output:\n  enabled: false\njson_output: true\nhttp_output:\n  enabled: true\n  url: {url}\n  keep_alive: true\n\
         append_output:\n  - extra_fields:\n"
    );
    for f in LINEAGE_FIELDS {
        s += &format!("      - {f}\n");
    }
    s
}

/// Alerts received, per action and in total.
pub struct Tally {
    names: Vec<String>,
    actual: Vec<AtomicU64>,
    /// Only alerts from this process or its descendants count (0: any).
    generator: AtomicU32,
    /// Alerts whose rule no action has, or from another process.
    pub unmatched: AtomicU64,
    pub foreign: AtomicU64,
    pub bad_requests: AtomicU64,
    pub received: AtomicU64,
    /// Connections accepted (a sender that keeps them alive opens few).
    pub connections: AtomicU64,
    changed: (Mutex<()>, Condvar),
}

fn as_pid(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

impl Tally {
    /// `names`: the action names; `generator`: the pid whose alerts count.
    pub fn new(names: &[&str], generator: Option<u32>) -> Arc<Tally> {
        Arc::new(Tally {
            names: names.iter().map(|n| n.to_string()).collect(),
            actual: names.iter().map(|_| AtomicU64::new(0)).collect(),
            generator: AtomicU32::new(generator.unwrap_or(0)),
            unmatched: AtomicU64::new(0),
            foreign: AtomicU64::new(0),
            bad_requests: AtomicU64::new(0),
            received: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            changed: (Mutex::new(()), Condvar::new()),
        })
    }

    /// From now on only alerts of `pid` or its descendants count: a
    /// generator started after the receiver.
    pub fn set_generator(&self, pid: u32) {
        self.generator.store(pid, Ordering::Relaxed);
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Counts one alert (a JSON object in Falco's shape).
    pub fn record(&self, alert: &Value) {
        self.received.fetch_add(1, Ordering::Relaxed);
        let rule = alert.get("rule").and_then(Value::as_str).unwrap_or("");
        let mine = match self.generator.load(Ordering::Relaxed) {
            0 => true,
            pid => {
                let fields = alert.get("output_fields");
                LINEAGE_FIELDS
                    .iter()
                    .any(|f| fields.and_then(|o| o.get(*f)).and_then(as_pid) == Some(pid as u64))
            }
        };
        let rule = normalise(rule);
        // event-generator: the first action whose name matches counts it.
        match self.names.iter().position(|n| n.eq_ignore_ascii_case(&rule)) {
            Some(i) if mine => {
                self.actual[i].fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => {
                self.foreign.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                self.unmatched.fetch_add(1, Ordering::Relaxed);
            }
        }
        let _g = self.changed.0.lock();
        self.changed.1.notify_all();
    }

    /// Actual alerts per action, in `names` order.
    pub fn actual(&self) -> Vec<u64> {
        self.actual.iter().map(|a| a.load(Ordering::Relaxed)).collect()
    }

    /// Reads and zeroes the per-action counts (end of a round).
    pub fn take(&self) -> Vec<u64> {
        self.actual.iter().map(|a| a.swap(0, Ordering::Relaxed)).collect()
    }

    /// Waits until `done(actual)` holds or `timeout` passes; the final check's result.
    pub fn wait_until(&self, timeout: Duration, done: impl Fn(&[u64]) -> bool) -> bool {
        let end = Instant::now() + timeout;
        let mut g = self.changed.0.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if done(&self.actual()) {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            g = self.changed.1.wait_timeout(g, end - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// An HTTP/1.1 server on 127.0.0.1 feeding a [`Tally`]; stops on drop.
pub struct Receiver {
    pub url: String,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    pub fn start(tally: Arc<Tally>) -> Result<Receiver> {
        Receiver::start_at("127.0.0.1:0", tally)
    }

    /// On a given loopback address (e.g. where a receiver that was down comes back).
    pub fn start_at(addr: &str, tally: Arc<Tally>) -> Result<Receiver> {
        let listener =
            TcpListener::bind(addr).with_context(|| format!("binding the alert receiver to {addr}"))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let accept = std::thread::Builder::new().name("alert-receiver".into()).spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                tally.connections.fetch_add(1, Ordering::Relaxed);
                let t = tally.clone();
                // One thread per connection: the sensor keeps one alive.
                let _ = std::thread::Builder::new().name("alert-conn".into()).spawn(move || serve(conn, &t));
            }
        })?;
        Ok(Receiver { url: format!("http://{addr}/"), stop, addr, accept: Some(accept) })
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Requests on one connection, until the peer closes it.
fn serve(conn: TcpStream, tally: &Tally) {
    let Ok(w) = conn.try_clone() else { return };
    let mut w = w;
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.trim().is_empty() {
            continue; // stray CRLF between requests
        }
        let mut len = 0usize;
        let mut close = false;
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let h = line.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let (k, v) = (k.trim(), v.trim());
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.parse().unwrap_or(0);
                } else if k.eq_ignore_ascii_case("connection") && v.eq_ignore_ascii_case("close") {
                    close = true;
                }
            }
        }
        body.resize(len, 0);
        if r.read_exact(&mut body).is_err() {
            return;
        }
        match serde_json::from_slice::<Value>(&body) {
            Ok(v) if v.is_object() => tally.record(&v),
            _ => {
                tally.bad_requests.fetch_add(1, Ordering::Relaxed);
            }
        }
        // event-generator answers 200 to anything; so do we.
        if w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").is_err() || close {
            return;
        }
    }
}
