//! Outputs under pressure, made deterministic with a sink that delivers
//! nothing until the test opens its gate: what the default queue holds, which
//! alerts are shed when it is full, and the notice that follows.

use harrier_outputs::sinks::{FileSink, Http, Sink};
use harrier_outputs::{notice, Alert, JsonShape, Lane, Limits, LineFormat, Outputs, Queued};
use serde_json::Value;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

fn stable_alert(seq: u64, priority: &'static str) -> Arc<Alert> {
    harrier_outputs::testing::falco_sized(seq, priority)
}

/// The number [`stable_alert`] gave a delivered JSON line (u64::MAX: a notice).
fn seq(v: &Value) -> u64 {
    v["output_fields"]["proc.pid"].as_u64().unwrap_or(u64::MAX)
}

#[derive(Default)]
struct Gate {
    state: Mutex<(bool, bool)>, // (a batch is held at the gate, the gate is open)
    cv: Condvar,
}

impl Gate {
    fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_all();
    }
    /// Until the lane holds its first batch at the gate.
    fn wait_held(&self) {
        let g = self.state.lock().unwrap();
        let (g, _) = self.cv.wait_timeout_while(g, Duration::from_secs(30), |s| !s.0).unwrap();
        assert!(g.0, "the lane took the first alert");
    }
}

/// Delivers nothing until the gate opens, then keeps every alert (its JSON
/// line, as a file would get it) in order.
struct Gated(Arc<Gate>, Arc<Mutex<Vec<Value>>>);

impl Sink for Gated {
    fn lines(&self) -> Option<LineFormat> {
        Some(Some(JsonShape::default()))
    }
    fn send(&mut self, _: &Alert) -> anyhow::Result<()> {
        unreachable!("lanes send batches")
    }
    fn send_batch(&mut self, batch: &[Queued], _: &mut Lane) -> usize {
        let mut s = self.0.state.lock().unwrap();
        s.0 = true;
        self.0.cv.notify_all();
        while !s.1 {
            s = self.0.cv.wait(s).unwrap();
        }
        // Lines rendered at emit (a backlog), or alerts the lane renders.
        let lines = batch.iter().map(|q| match (q.line(), q.alert()) {
            (Some(line), _) => serde_json::from_slice::<Value>(line).unwrap(),
            (None, alert) => alert.unwrap().json(JsonShape::default()),
        });
        self.1.lock().unwrap().extend(lines);
        batch.len()
    }
}

/// Outputs with one gated output whose lane already holds alert 0 at the
/// gate, so everything emitted after it waits in the queue.
fn gated(limits: Limits) -> (Outputs, Arc<Gate>, Arc<Mutex<Vec<Value>>>) {
    let (gate, got) = (Arc::new(Gate::default()), Arc::new(Mutex::new(Vec::new())));
    let mut outs = Outputs::new(limits);
    outs.add("gated", Box::new(Gated(gate.clone(), got.clone())));
    outs.emit(stable_alert(0, "Warning"));
    gate.wait_held();
    (outs, gate, got)
}

#[test]
fn the_default_queue_holds_a_20000_alert_burst_while_its_output_delivers_nothing() {
    let (outs, gate, got) = gated(Limits::default());
    for i in 1..=20_000 {
        outs.emit(stable_alert(i, "Warning"));
    }
    let s = &outs.stats()[0];
    assert_eq!((s.queued, s.shed.total()), (20_000, 0), "nothing shed: {s:?}");
    assert!(s.queued_bytes <= Limits::default().max_bytes, "{s:?}");
    gate.open();
    // A deadline, not a timing: close returns once all is sent (a second
    // here; emulated 6.1 sent 13,313 in 30 s).
    let s = &outs.close(Duration::from_secs(120))[0];
    assert_eq!((s.sent.total(), s.lost(), s.notices), (20_001, 0, 0), "{s:?}");
    let seqs: Vec<u64> = got.lock().unwrap().iter().map(seq).collect();
    assert_eq!(seqs, (0..=20_000).collect::<Vec<_>>(), "in order");
}

#[test]
fn a_20000_alert_burst_reaches_a_file_and_an_http_receiver_whole() {
    let dir = std::env::temp_dir().join(format!("harrier-burst-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("alerts.json");
    let tally = harrier_actions::Tally::new(&[], None);
    let receiver = harrier_actions::Receiver::start(tally.clone()).unwrap();
    let mut outs = Outputs::new(Limits::default());
    outs.add("file", Box::new(FileSink::open(path.to_str().unwrap(), Some(JsonShape::default())).unwrap()));
    let http = Http::new(&receiver.url, JsonShape::default()).unwrap();
    outs.add_lanes("http", http.lanes(harrier_outputs::sinks::IN_FLIGHT));
    // Made first, then emitted back to back: faster than any engine raises them,
    // so the queues hold what the outputs have not delivered yet, whatever their pace.
    let burst: Vec<_> = (0..20_000).map(|i| stable_alert(i, "Warning")).collect();
    for a in burst {
        outs.emit(a);
    }
    for s in outs.close(Duration::from_secs(120)) {
        assert_eq!((s.sent.total(), s.lost()), (20_000, 0), "{s:?}");
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let seqs: Vec<u64> = text.lines().map(|l| seq(&serde_json::from_str(l).unwrap())).collect();
    assert_eq!(seqs, (0..20_000).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(tally.received.load(std::sync::atomic::Ordering::Relaxed), 20_000);
    let conns = tally.connections.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(conns, harrier_outputs::sinks::IN_FLIGHT as u64, "one connection per lane, kept alive");
}

#[test]
fn a_full_queue_sheds_the_least_severe_and_keeps_every_critical() {
    // Room for 100 alerts (Criticals may use a reserve of 25 more).
    let (outs, gate, got) = gated(Limits { capacity: 100, max_bytes: 0, keep_rank: 2 });
    let mut want_kept = Vec::new();
    for i in 1..=1000u64 {
        // Every 50th alert Critical, every 10th an Error, the rest Notice and Warning.
        let p = match i {
            i if i % 50 == 0 => "Critical",
            i if i % 10 == 0 => "Error",
            i if i % 2 == 0 => "Warning",
            _ => "Notice",
        };
        if p == "Critical" {
            want_kept.push(i);
        }
        outs.emit(stable_alert(i, p));
    }
    let s = &outs.stats()[0];
    assert_eq!(s.queued, 100);
    // 20 Criticals and 80 Errors: the Errors pushed out every Notice and Warning.
    assert_eq!(s.shed.get("Critical"), 0, "{s:?}");
    assert_eq!((s.shed.get("Notice"), s.shed.get("Warning")), (500, 400), "{s:?}");
    assert_eq!(s.shed.get("Error"), 0, "{s:?}");
    gate.open();
    let s = &outs.close(Duration::from_secs(10))[0];
    assert_eq!((s.sent.total(), s.shed.total(), s.failed.total()), (101, 900, 0), "{s:?}");
    let got = got.lock().unwrap();
    let kept: Vec<u64> = got.iter().filter(|a| a["priority"] == "Critical").map(seq).collect();
    assert_eq!(kept, want_kept, "every Critical, in order");
    let order: Vec<u64> = got.iter().map(seq).filter(|&s| s != u64::MAX).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "delivered in arrival order");
}

#[test]
fn criticals_have_a_reserve_and_are_shed_only_when_nothing_less_severe_is_left() {
    let (outs, gate, _got) = gated(Limits { capacity: 8, max_bytes: 0, keep_rank: 2 });
    for i in 1..=8 {
        outs.emit(stable_alert(i, "Warning"));
    }
    for i in 9..=20 {
        outs.emit(stable_alert(i, "Critical"));
    }
    outs.emit(stable_alert(21, "Warning"));
    let s = &outs.stats()[0];
    // 8 Warnings evicted by the first 8 Criticals; 2 more Criticals in the
    // reserve (8 + 8/4); the last 2 Criticals shed; a Warning finds no room.
    assert_eq!((s.queued, s.shed.get("Warning"), s.shed.get("Critical")), (10, 9, 2), "{s:?}");
    gate.open();
    outs.close(Duration::from_secs(10));
}

#[test]
fn once_the_pressure_ends_one_notice_says_what_was_lost_and_when() {
    let (outs, gate, got) = gated(Limits { capacity: 10, max_bytes: 0, keep_rank: 2 });
    for i in 1..=30 {
        outs.emit(stable_alert(i, if i % 3 == 0 { "Error" } else { "Informational" }));
    }
    gate.open();
    let s = &outs.close(Duration::from_secs(10))[0];
    assert_eq!((s.shed.get("Informational"), s.shed.get("Error"), s.notices), (20, 0, 1), "{s:?}");
    let got = got.lock().unwrap();
    let last = got.last().unwrap();
    assert_eq!(got.len(), 1 + 10 + 1, "alert 0, the 10 kept, the notice");
    assert_eq!((&last["rule"], &last["source"]), (&Value::from(notice::RULE), &Value::from("internal")));
    assert_eq!(last["priority"], "Informational", "the most severe priority lost");
    let f = &last["output_fields"];
    assert_eq!((f["n_drops"].as_u64(), f["n_drops_informational"].as_u64()), (Some(20), Some(20)));
    assert_eq!(f["n_drops_error"].as_u64(), Some(0));
    assert_eq!(f["output_name"], "gated");
    // Every Informational alert was lost (the Errors pushed the queued ones out).
    assert_eq!(f["first_drop_time"], stable_alert(1, "Informational").rfc3339().as_str());
    assert_eq!(f["last_drop_time"], stable_alert(29, "Informational").rfc3339().as_str());
    assert!(last["output"].as_str().unwrap().contains("20 alerts dropped by output gated"), "{last}");
}

#[test]
fn no_notice_without_losses() {
    let (outs, gate, got) = gated(Limits::default());
    outs.emit(stable_alert(1, "Warning"));
    gate.open();
    let s = &outs.close(Duration::from_secs(10))[0];
    assert_eq!((s.sent.total(), s.notices), (2, 0));
    assert!(got.lock().unwrap().iter().all(|a| a["rule"] != notice::RULE));
}
