//! event-generator's round figures and the HTTP receiver, without a sensor.

use harrier_actions::generator::{next_sleep, tally_round};
use harrier_actions::{Receiver, Tally};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn lost_is_one_minus_the_mean_ratio_and_missing_actions_count_as_zero() {
    let (per, lost, dirty) = tally_round(&["A", "B", "C"], &[10, 4, 0], &[5, 4, 0]);
    assert_eq!(per.iter().map(|s| s.ratio).collect::<Vec<_>>(), [0.5, 1.0, 0.0]);
    assert!((lost - (1.0 - 1.5 / 3.0)).abs() < 1e-12, "{lost}");
    assert!(!dirty);
    let (_, lost, dirty) = tally_round(&["A", "B"], &[2, 2], &[3, 2]);
    assert!(dirty, "more alerts than actions");
    assert!((lost - -0.25).abs() < 1e-12, "a surplus lowers lost below 0, as in event-generator: {lost}");
}

#[test]
fn the_sleep_halves_only_after_clean_rounds_in_loop_mode() {
    let ms10 = Duration::from_millis(10);
    assert_eq!(next_sleep(ms10, true, false), Duration::from_millis(5));
    assert_eq!(next_sleep(ms10, true, true), ms10, "dirty round: kept");
    assert_eq!(next_sleep(ms10, false, false), ms10, "no --loop: kept");
    assert_eq!(next_sleep(Duration::from_nanos(1), true, false), Duration::ZERO);
    assert_eq!(next_sleep(Duration::ZERO, true, false), Duration::ZERO);
}

fn post(conn: &mut TcpStream, body: &str) -> String {
    write!(conn, "POST /any/path HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut buf = [0u8; 64];
    let n = conn.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn the_receiver_counts_alerts_by_normalised_rule_name_from_the_generator_only() {
    let me = std::process::id();
    let tally = Tally::new(&["ReadSensitiveFileUntrusted", "ExecutionFromDevShm"], Some(me));
    let rx = Receiver::start(tally.clone()).unwrap();
    let addr = rx.url.trim_start_matches("http://").trim_end_matches('/').to_string();
    let mut c = TcpStream::connect(&addr).unwrap();
    let alert = |rule: &str, field: &str, pid: serde_json::Value| {
        json!({"rule": rule, "priority": "Warning", "output_fields": {field: pid}}).to_string()
    };
    // Keep-alive: several requests on one connection.
    assert!(post(&mut c, &alert("Read sensitive file untrusted", "proc.pid", json!(me)))
        .starts_with("HTTP/1.1 200"));
    post(&mut c, &alert("Execution from /dev/shm", "proc.apid[2]", json!(me.to_string())));
    post(&mut c, &alert("Execution from /dev/shm", "proc.pid", json!(1)));
    post(&mut c, &alert("Some other rule", "proc.ppid", json!(me)));
    post(&mut c, "not json");
    assert!(tally.wait_until(Duration::from_secs(30), |_| tally
        .bad_requests
        .load(std::sync::atomic::Ordering::Relaxed)
        == 1));
    assert_eq!(tally.take(), [1, 1]);
    assert_eq!(tally.foreign.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(tally.unmatched.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(tally.actual(), [0, 0], "take zeroes");
}
