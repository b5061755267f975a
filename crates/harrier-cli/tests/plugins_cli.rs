//! Falco's plugins through the `falco` command line, with the project's own plugin
//! (plugins/testsource.c, built with harrier-plugin): a plugin source's rules and fields,
//! Falco's list semantics and output shapes, and the plugin's misbehaviours (init fails,
//! malformed fields, next_batch hangs while the syscall source keeps running).

mod common;

use common::{harrier_falco, wait_for, HARRIER};
use harrier_capture::testing::bpf_available;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The project's test plugin, next to the harrier binary (harrier-plugin's build script).
fn plugin() -> String {
    let p = Path::new(HARRIER).parent().unwrap().join("libharrier-testsource.so");
    assert!(p.exists(), "{} was not built", p.display());
    p.display().to_string()
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("harrier-plugins-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn write(&self, f: &str, text: &str) -> String {
        std::fs::write(self.0.join(f), text).unwrap();
        self.0.join(f).display().to_string()
    }
    /// A falco.yaml loading the test plugin with these init_config and open_params.
    fn config(&self, init: &str, open: &str) -> String {
        let cfg = format!(
            "json_output: true\nstdout_output:\n  enabled: true\nplugins:\n  - name: testsource\n    \
             library_path: {}\n    init_config: \"{init}\"\n    open_params: \"{open}\"\nload_plugins: [testsource]\n",
            plugin()
        );
        self.write("falco.yaml", &cfg)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const RULES: &str = r#"
- required_plugin_versions:
  - name: testsource
    version: 0.1.0
- rule: Big odd test event
  desc: a list field intersects a set when any value is in it
  condition: test.big = true and test.parity intersects (odd)
  output: "n=%test.n msg=%test.msg parity=%test.parity key=%test.arg[k] info=%evt.plugininfo plugin=%evt.pluginname num=%evt.num"
  priority: WARNING
  source: harrier_test
- rule: Even test event
  desc: a list field is in a set when every value is
  condition: test.parity in (even, all) and not test.parity in (odd, all)
  output: "even %test.n"
  priority: NOTICE
  source: harrier_test
- rule: A syscall rule
  desc: stays the syscall source's
  condition: evt.type = openat and proc.name = nothing-runs-this
  output: "never %proc.name"
  priority: DEBUG
"#;

fn falco(args: &[&str]) -> Output {
    Command::new(HARRIER).arg("falco").args(args).env("FALCO_HOSTNAME", "test-host").output().unwrap()
}

fn alerts(out: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_plugin_source_raises_falcos_alerts_with_the_plugins_fields() {
    let s = Scratch::new("fields");
    let (cfg, rules) = (s.config("", "count=12"), s.write("rules.yaml", RULES));
    let out = falco(&["-c", &cfg, "-r", &rules, "--disable-source", "syscall"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let got = alerts(&out);
    let count = |r: &str| got.iter().filter(|a| a["rule"] == r).count();
    // Odd and over 5: 7, 9, 11. Even: 2..12, whose values are all in (even, all), and
    // not all in (odd, all).
    assert_eq!((count("Big odd test event"), count("Even test event"), got.len()), (3, 6, 9), "{got:#?}");
    let a = got.iter().find(|a| a["rule"] == "Big odd test event").unwrap();
    assert!(
        a["output"]
            .as_str()
            .unwrap()
            .ends_with("Warning n=7 msg=event 7 parity=(odd,all) key=k info=n=7 plugin=testsource num=7"),
        "{a}"
    );
    assert_eq!(a["source"], "harrier_test");
    assert_eq!(a["output_fields"]["test.parity"], serde_json::json!(["odd", "all"]));
    assert_eq!(a["output_fields"]["test.n"], 7);
    assert_eq!(a["output_fields"]["evt.time"], 1_700_000_000_000_007_000u64);
    assert!(
        stderr(&out).contains("source harrier_test: 12 events, 9 alerts, 0 extraction errors"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_plugin_lists_itself_as_falco_lists_plugins() {
    let s = Scratch::new("lists");
    let cfg = s.config("", "count=1");
    let out = falco(&["-c", &cfg, "--list-plugins"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("1 Plugins Loaded:\n\nName: testsource\n"), "{text}");
    assert!(
        text.contains("  - Event Sourcing (ID=999, source='harrier_test')\n  - Field Extraction\n"),
        "{text}"
    );
    let out = falco(&["-c", &cfg, "--list=harrier_test", "-N"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "test.n\ntest.msg\ntest.parity\ntest.arg\ntest.big\n");
    let out = falco(&["-c", &cfg, "--plugin-info", "testsource"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Suggested open params:\n[{\"value\":\"count=10\""));
}

#[test]
fn dash_big_l_describes_the_rules_with_their_plugin_as_falco_does() {
    let s = Scratch::new("describe");
    let (cfg, rules) = (s.config("", "count=1"), s.write("rules.yaml", RULES));
    let out = falco(&["-c", &cfg, "-r", &rules, "-L"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = |v: &Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
    };
    assert_eq!(d["required_engine_version"], "0.0.0");
    let req = &d["required_plugin_versions"][0];
    assert_eq!((&req["name"], &req["version"]), (&"testsource".into(), &"0.1.0".into()));
    assert_eq!(req["alternatives"], serde_json::json!([]));
    assert_eq!((d["lists"].as_array().unwrap().len(), d["macros"].as_array().unwrap().len()), (0, 0));
    let r = &d["rules"][0];
    let info = &r["info"];
    assert_eq!((&info["name"], &info["source"]), (&"Big odd test event".into(), &"harrier_test".into()));
    assert_eq!(info["priority"], "Warning");
    let det = &r["details"];
    assert_eq!(names(&det["plugins"]), ["testsource"]);
    assert_eq!(det["condition_compiled"], "(test.big = true and test.parity intersects (odd))");
    assert_eq!(names(&det["condition_fields"]), ["test.big", "test.parity"]);
    assert_eq!(names(&det["condition_operators"]), ["=", "intersects"]);
    assert_eq!(names(&det["events"]), ["pluginevent", "asyncevent"]);
    assert!(names(&det["output_fields"]).contains(&"test.arg[k]".to_string()), "{det}");
    assert_eq!(det["output_compiled"], r["info"]["output"]);
    for k in ["exception_fields", "exception_names", "exception_operators", "lists", "macros"] {
        assert_eq!(det[k], serde_json::json!([]), "{k}");
    }
    let sys = &d["rules"][2]["details"];
    assert!(sys["plugins"].as_array().unwrap().is_empty());
    assert_eq!(names(&sys["events"]), ["openat", "asyncevent"]);
    // -l RULE: that rule alone; an unknown one is an error.
    let out = falco(&["-c", &cfg, "-r", &rules, "-l", "Even test event"]);
    let one: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(one.as_object().unwrap().len(), 1);
    let compiled = &one["rules"][0]["details"]["condition_compiled"];
    assert_eq!(compiled, "(test.parity in (even, all) and not test.parity in (odd, all))");
    fails_with(&falco(&["-c", &cfg, "-r", &rules, "-l", "nope"]), "Rule \"nope\" is not loaded");
}

/// Exit 1 and Falco's "Error: " line with `what` in it.
fn fails_with(out: &Output, what: &str) {
    let err = stderr(out);
    let last = err.lines().last().unwrap_or("");
    assert!(!out.status.success() && last.starts_with("Error: ") && last.contains(what), "{err}");
}

#[test]
fn a_plugin_that_fails_or_is_missing_is_named_in_one_line() {
    let s = Scratch::new("errors");
    let rules = s.write("rules.yaml", RULES);
    let cfg = s.config("fail_init", "count=3");
    fails_with(
        &falco(&["-c", &cfg, "-r", &rules, "--disable-source", "syscall"]),
        "plugin testsource: init failed",
    );
    let cfg = s.write(
        "missing.yaml",
        "plugins:\n  - name: x\n    library_path: /nonexistent/libx.so\nload_plugins: [x]\n",
    );
    fails_with(
        &falco(&["-c", &cfg, "-r", &rules]),
        "Could not load plugin 'x': cannot load plugin /nonexistent/libx.so",
    );
    let cfg = s.write("unnamed.yaml", "load_plugins: [y]\n");
    fails_with(
        &falco(&["-c", &cfg, "-r", &rules]),
        "Cannot load plugin 'y': plugin config not found for given name",
    );
    let cfg = s.config("", "count=3");
    let newer = s.write("newer.yaml", &RULES.replace("version: 0.1.0", "version: 0.2.0"));
    fails_with(&falco(&["-c", &cfg, "-r", &newer, "--disable-source", "syscall"]), "testsource (>= 0.2.0)");
    fails_with(&falco(&["-c", &cfg, "-r", &rules, "--enable-source", "nope"]), "unknown event source: nope");
    let bad = s.write("bad.yaml", &RULES.replace("test.big = true", "test.nope = true"));
    fails_with(&falco(&["-c", &cfg, "-r", &bad, "--disable-source", "syscall"]), "test.nope");
    let v = falco(&["-c", &cfg, "-V", &bad]);
    let said = String::from_utf8_lossy(&v.stdout);
    assert!(
        !v.status.success() && said.contains("filter_check called with nonexistent field test.nope"),
        "{said}"
    );
}

#[test]
fn malformed_fields_are_counted_and_the_rules_go_on() {
    let s = Scratch::new("malformed");
    let rules = s.write(
        "rules.yaml",
        "- rule: Any test event\n  desc: t\n  condition: test.parity intersects (all)\n  \
         output: \"n=%test.n\"\n  priority: INFO\n  source: harrier_test\n",
    );
    let out = falco(&["-c", &s.config("", "count=3 malformed"), "-r", &rules, "--disable-source", "syscall"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let got = alerts(&out);
    assert_eq!(got.len(), 3);
    assert!(got[0]["output"].as_str().unwrap().ends_with("n=<NA>"), "{}", got[0]);
    assert!(stderr(&out).contains("3 events, 3 alerts, 3 extraction errors"), "{}", stderr(&out));
}

#[test]
fn a_hung_plugin_is_reported_and_the_syscall_source_keeps_running() {
    if !bpf_available() {
        return;
    }
    let s = Scratch::new("hang");
    let marker = s.write("marker", "x");
    let rules = s.write(
        "rules.yaml",
        &format!(
            "{RULES}\n- rule: Marker opened\n  desc: t\n  condition: evt.type = openat and fd.name = {marker}\n  \
             output: \"opened %fd.name\"\n  priority: WARNING\n"
        ),
    );
    std::env::set_var("HARRIER_PLUGIN_HANG_MS", "300");
    let (_child, out, err) = harrier_falco(&["-c", &s.config("", "hang"), "-r", &rules]);
    wait_for(&err, "next_batch has not returned for 0.3 s");
    // The sensor is attached once it has said how many rules it loaded.
    std::fs::read(&marker).unwrap();
    let line = wait_for(&out, "Marker opened");
    assert!(line.contains(&format!("opened {marker}")), "{line}");
}

/// GET `path` on 127.0.0.1:`port` (None until it answers).
fn get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

#[test]
fn a_plugin_sources_counters_are_prometheus_metrics() {
    let s = Scratch::new("metrics");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = s.config("", "stream");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text += &format!("webserver:\n  enabled: true\n  listen_address: 127.0.0.1\n  listen_port: {port}\n");
    std::fs::write(&cfg, text).unwrap();
    let rules = s.write("rules.yaml", RULES);
    let (_child, _out, err) = harrier_falco(&["-c", &cfg, "-r", &rules, "--disable-source", "syscall"]);
    wait_for(&err, "source harrier_test (plugin testsource)");
    // The stream gives an event each 10 ms; the counters are sampled each second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let m = get(port, "/metrics").unwrap_or_default();
        let line = m.lines().find(|l| l.starts_with("harrier_plugin_events_total{source=\"harrier_test\"}"));
        if line.is_some_and(|l| l.rsplit(' ').next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0) > 10) {
            assert!(m.contains("harrier_plugin_alerts_total{source=\"harrier_test\"}"), "{m}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no plugin events in the metrics:\n{m}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
