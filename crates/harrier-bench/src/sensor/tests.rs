use super::*;

#[test]
fn pids_format_without_allocation() {
    let mut b = [0u8; 12];
    assert_eq!(itoa(0, &mut b), b"0");
    assert_eq!(itoa(4194304, &mut b), b"4194304");
    assert_eq!(itoa(u32::MAX, &mut b), b"4294967295");
}

/// Stands in for Falco in tests (CI has none): takes the file names from
/// the `-o` overrides the spec passes, writes an alert and metrics lines,
/// and on SIGINT prints the exit counters Falco 0.44 prints with -v.
const FAKE_FALCO: &str = r#"#!/bin/sh
while [ $# -gt 0 ]; do
  case "$2" in
    metrics.output_file=*) m=${2#*=} ;;
    file_output.filename=*) f=${2#*=} ;;
  esac
  shift
done
trap 'echo "SIGINT received, exiting..." >&2; echo "Driver Events:42" >&2; echo "Driver Drops:3" >&2; echo "Events detected: 1"; exit 0' INT
echo '{"rule":"Fake rule","priority":"Warning","output":"x","output_fields":{"proc.name":"sh"}}' > "$f"
n=0
while :; do
  n=$((n+1))
  echo "{\"sample\":$n,\"output_fields\":{\"scap.n_evts\":$((n*10)),\"scap.n_drops\":0}}" >> "$m"
  sleep 0.05
done
"#;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harrier-sensor-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn falco_gets_its_config_overrides_and_the_rules() {
    let mut spec = Spec::new(Kind::Falco, "/x/falco", "/w", "f1");
    assert!(spec.command_args().unwrap_err().to_string().contains("config"), "Falco needs its config");
    spec.config = Some("/etc/falco.yaml".into());
    spec.rules = vec!["a.yaml".into(), "b.yaml".into()];
    spec.http_url = Some("http://127.0.0.1:1/".into());
    let a = spec.command_args().unwrap();
    let has = |pair: [&str; 2]| a.windows(2).any(|w| w[0] == pair[0] && w[1] == pair[1]);
    assert!(has(["-c", "/etc/falco.yaml"]) && has(["-r", "a.yaml"]) && has(["-r", "b.yaml"]), "{a:?}");
    assert!(has(["-o", "file_output.filename=/w/f1-alerts.json"]), "{a:?}");
    assert!(
        has(["-o", "metrics.output_file=/w/f1-stats.jsonl"]) && has(["-o", "metrics.interval=1000ms"]),
        "{a:?}"
    );
    assert!(has(["-o", "http_output.url=http://127.0.0.1:1/"]) && a.contains(&"-v".to_string()), "{a:?}");
}

#[test]
fn harrier_gets_file_output_and_stats() {
    let dir = scratch("hargs");
    let mut spec = Spec::new(Kind::Harrier, "/x/harrier", &dir, "h1");
    spec.rules = vec!["r.yaml".into()];
    spec.args = vec!["--empty-programs".into()];
    let a = spec.command_args().unwrap();
    assert_eq!(a[0], "run");
    let has = |pair: [&str; 2]| a.windows(2).any(|w| w[0] == pair[0] && w[1] == pair[1]);
    let alerts = spec.alerts_path().display().to_string();
    assert!(
        has(["-r", "r.yaml"]) && has(["--file-output", &alerts]) && a.contains(&"--json".into()),
        "{a:?}"
    );
    assert_eq!(a.last().unwrap(), "--empty-programs", "extra arguments come last");
    let config = std::fs::read_to_string(dir.join("h1.yaml")).unwrap();
    assert!(config.contains("stdout_output:\n  enabled: false"), "{config}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_falco_like_sensor_starts_counts_alerts_and_stops_timed() {
    let dir = scratch("fake");
    let fake = dir.join("fake-falco");
    std::fs::write(&fake, FAKE_FALCO).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut spec = Spec::new(Kind::Falco, &fake, &dir, "fake");
    spec.config = Some(dir.join("falco.yaml"));
    spec.stats_interval = Duration::from_millis(100);
    spec.ready_timeout = Duration::from_secs(20);
    spec.ready_needs_bpf = false;
    let mut s = Sensor::start(&spec).unwrap();
    assert!(s.counters().events >= 10, "ready means a metrics line was read");
    // Polled: a sample walks /proc, far slower under emulation (the guests).
    let t0 = Instant::now();
    while s.rss(t0, Instant::now()).samples == 0 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(s.rss(t0, Instant::now()).samples >= 1);
    let alerts = s.alerts().unwrap();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0]["rule"], "Fake rule");
    let st = s.stop().unwrap();
    assert!(st.status.success() && !st.killed, "{st:?}");
    assert_eq!(st.counters, Counters { syscalls: 42, events: 42, drops: 3 }, "from the exit summary");
    let fin = st.final_stats.expect("the final stats line is seen");
    assert!(fin <= st.gone + Duration::from_secs(1), "{st:?}");
    assert_eq!((st.left_progs, st.left_links, st.left_maps), (0, 0, 0));
    assert!(s.output().iter().any(|l| l == "Events detected: 1"), "stdout is kept too");
    assert!(s.stop().is_err(), "stopped once");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sensor_that_exits_at_start_is_an_error_with_its_output() {
    let dir = scratch("dies");
    let mut spec = Spec::new(Kind::Falco, "/bin/sh", &dir, "dies");
    spec.config = Some(dir.join("falco.yaml"));
    // sh -c <config path>: not a script; sh fails at once and says why.
    let err = Sensor::start(&spec).err().expect("it exits").to_string();
    assert!(err.contains("exited"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
