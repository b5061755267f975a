//! Evaluation semantics, with a fake event source.

use harrier_rules::loader::Priority;
use harrier_rules::output::OutputValue;
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use harrier_rules::testing::{FakeEvent, Owned};

fn rules(yaml: &str) -> RuleSet {
    rules_with(yaml, &LoadOptions::default())
}

fn rules_with(yaml: &str, opts: &LoadOptions) -> RuleSet {
    RuleSet::load(&[("t.yaml", yaml)], opts)
        .unwrap_or_else(|d| panic!("{}", d.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")))
}

/// One rule with this condition, matching against `ev`.
fn holds(cond: &str, ev: &FakeEvent) -> bool {
    let y =
        format!("- rule: r\n  desc: d\n  condition: {}\n  output: o\n  priority: WARNING\n", yaml_str(cond));
    let rs = rules(&y);
    rs.evaluate(ev, |_| {}) == 1
}

fn yaml_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn open(path: &str) -> FakeEvent {
    FakeEvent::new("openat").set("fd.name", path).set("proc.name", "cat")
}

#[test]
fn comparisons_on_strings() {
    let ev = open("/etc/shadow");
    for (cond, want) in [
        ("fd.name = /etc/shadow", true),
        ("fd.name != /etc/shadow", false),
        ("fd.name startswith /etc/", true),
        ("fd.name endswith shadow", true),
        ("fd.name contains sha", true),
        ("fd.name icontains SHA", true),
        ("fd.name contains SHA", false),
        ("fd.name glob '/etc/*'", true),
        ("fd.name iglob '/ETC/SH*'", true),
        ("fd.name regex '^/etc/s.a'", true),
        ("fd.name regex 'passwd'", false),
        ("fd.name in (/etc/passwd, /etc/shadow)", true),
        ("fd.name pmatch (/etc)", true),
        ("fd.name pmatch (/et)", false),
        ("fd.name exists", true),
        ("fd.name > /etc/a", true),
        ("fd.name < /etc/a", false),
        ("fd.directory exists", false),
        ("not fd.directory exists", true),
    ] {
        assert_eq!(holds(cond, &ev), want, "{cond}");
    }
}

#[test]
fn a_field_without_a_value_compares_false() {
    let ev = open("/etc/shadow");
    // proc.pname is not set on this event: every comparison is false, including != and not in.
    for cond in [
        "proc.pname = x",
        "proc.pname != x",
        "proc.pname contains x",
        "proc.pname in (x)",
        "proc.pid > 1",
        "proc.pid != 1",
    ] {
        assert!(!holds(cond, &ev), "{cond}");
    }
    assert!(holds("not proc.pname = x", &ev));
}

#[test]
fn numbers_bools_and_addresses() {
    let ev = FakeEvent::new("connect")
        .set("proc.pid", 42u64)
        .set("user.loginuid", -1i64)
        .set("container.privileged", true)
        .set("fd.sip", Owned::Ip("10.1.2.3".parse().unwrap()))
        .set("fd.net", Owned::Ip("10.1.2.3".parse().unwrap()))
        .set("fd.sport", 443u64);
    for (cond, want) in [
        ("proc.pid = 42", true),
        ("proc.pid = 0x2a", true),
        ("proc.pid in (1, 42)", true),
        ("proc.pid > 41 and proc.pid < 43", true),
        ("proc.pid >= 43", false),
        ("user.loginuid = -1", true),
        ("user.loginuid < 0", true),
        ("container.privileged = true", true),
        ("container.privileged = false", false),
        ("fd.sip = 10.1.2.3", true),
        ("fd.sip = 10.1.2.4", false),
        ("fd.sip in (127.0.0.1, 10.1.2.3)", true),
        ("fd.net = 10.0.0.0/8", true),
        ("fd.net = 192.168.0.0/16", false),
        ("fd.net in (192.168.0.0/16, 10.1.0.0/16)", true),
        ("fd.sport in (80, 443)", true),
        ("fd.sport != 443", false),
    ] {
        assert_eq!(holds(cond, &ev), want, "{cond}");
    }
}

#[test]
fn type_errors_are_load_errors_with_positions() {
    for (cond, words) in [
        ("proc.pid = abc", "'abc' is not a valid u64 value"),
        ("proc.pid contains 1", "operator 'contains' cannot be used with u64 field"),
        ("fd.sip = notanip", "not a valid ipaddr"),
        ("container.privileged = maybe", "not a valid bool"),
        ("proc.name regex '('", "invalid regex"),
        ("evt.buffer bcontains XYZ", "not hex bytes"),
        ("proc.aname[x] = a", "needs a numeric index"),
        ("evt.arg = 1", "needs an argument"),
        ("proc.name[1] = a", "takes no argument"),
        ("undefined_macro", "undefined macro 'undefined_macro'"),
        ("proc.name in undefined_list", "undefined list"),
    ] {
        let y =
            format!("- rule: r\n  desc: d\n  condition: {}\n  output: o\n  priority: INFO\n", yaml_str(cond));
        let err = RuleSet::load(&[("t.yaml", y.as_str())], &LoadOptions::default()).expect_err(cond);
        let msg = err[0].to_string();
        assert!(msg.starts_with("t.yaml:3:"), "{cond}: {msg}");
        assert!(msg.contains(words), "{cond}: {msg}");
    }
}

#[test]
fn unknown_fields_fail_unsupported_ones_skip_the_rule() {
    let y = "- rule: r\n  desc: d\n  condition: evt.type = open and ka.verb = get\n  output: o\n  priority: INFO\n";
    let e = RuleSet::load(&[("t.yaml", y)], &LoadOptions::default()).unwrap_err();
    assert_eq!(e[0].to_string(), "t.yaml:3:34: rule 'r': unknown field 'ka.verb'");
    // A field the integration says it cannot extract: the rule is not evaluated...
    let supported = std::sync::Arc::new(|f| f != harrier_rules::Field::ProcEnv);
    let opts = LoadOptions { supported: supported.clone(), ..Default::default() };
    let y = "- rule: r\n  desc: d\n  condition: evt.type = execve and proc.env contains X\n  output: o\n  priority: INFO\n";
    let rs = rules_with(y, &opts);
    let rep = rs.check_report().to_string();
    assert!(rep.contains("r: not evaluable: unsupported field proc.env"), "{rep}");
    assert_eq!(
        rs.warnings()[0].to_string(),
        "t.yaml:3:36: warning: rule 'r': field 'proc.env' is not supported here"
    );
    assert!(rs.event_types().is_empty());
    // ... or, strict, the load fails.
    let strict = LoadOptions { supported, strict: true, ..Default::default() };
    let e = RuleSet::load(&[("t.yaml", y)], &strict).unwrap_err();
    assert_eq!(e[0].to_string(), "t.yaml:3:36: rule 'r': field 'proc.env' is not supported here");
}

#[test]
fn ancestors_match_any_without_index() {
    let ev = FakeEvent::new("execve")
        .set("proc.name", "sh")
        .set("proc.aname[1]", "nginx")
        .set("proc.aname[2]", "systemd")
        .set_all("proc.aname", vec!["nginx".into(), "systemd".into()]);
    assert!(holds("proc.aname = systemd", &ev));
    assert!(holds("proc.aname in (nginx)", &ev));
    assert!(holds("proc.aname[1] = nginx", &ev));
    assert!(!holds("proc.aname[1] = systemd", &ev));
    assert!(!holds("proc.aname[3] = systemd", &ev));
    assert!(!holds("proc.aname = bash", &ev));
}

#[test]
fn flags_match_by_name() {
    // O_WRONLY|O_CREAT|O_TRUNC = 0o1101
    let ev = FakeEvent::new("openat").set("evt.arg.flags", Owned::Flags(0o1101, "open_flags"));
    assert!(holds("evt.arg.flags contains O_TRUNC", &ev));
    assert!(holds("evt.arg.flags contains O_CREAT", &ev));
    assert!(!holds("evt.arg.flags contains O_APPEND", &ev));
    assert!(holds("evt.arg.flags = 577", &ev));
    let ev = FakeEvent::new("ptrace").set("evt.arg.request", Owned::Flags(16, "ptrace_request"));
    assert!(holds("evt.arg.request contains PTRACE_ATTACH", &ev));
    assert!(holds("evt.arg.request = PTRACE_ATTACH", &ev));
    let ev = FakeEvent::new("socket").set("evt.arg.domain", Owned::Flags(17, "socket_family"));
    assert!(holds("evt.arg.domain contains AF_PACKET", &ev));
}

#[test]
fn transformers_and_val() {
    let ev = FakeEvent::new("execve")
        .set("proc.name", "Bash")
        .set("proc.pname", "bash")
        .set("proc.exepath", "/usr/bin/bash")
        .set("proc.cmdline", "aGVsbG8=");
    assert!(holds("tolower(proc.name) = bash", &ev));
    assert!(holds("toupper(proc.name) = BASH", &ev));
    assert!(holds("basename(proc.exepath) = bash", &ev));
    assert!(holds("len(proc.exepath) = 13", &ev));
    assert!(holds("len(proc.exepath) > 12", &ev));
    assert!(holds("b64(proc.cmdline) = hello", &ev));
    assert!(holds("toupper(basename(proc.exepath)) = BASH", &ev));
    assert!(holds("proc.pname = tolower(proc.name)", &ev));
    assert!(!holds("proc.pname = val(proc.name)", &ev));
    assert!(holds("tolower(proc.name) = val(proc.pname)", &ev));
}

#[test]
fn evt_type_index_and_matching_modes() {
    let y = "
- rule: a
  desc: d
  condition: evt.type in (openat, open) and fd.name startswith /etc
  output: a %fd.name
  priority: ERROR
- rule: b
  desc: d
  condition: evt.type = openat
  output: b
  priority: NOTICE
- rule: c
  desc: d
  condition: evt.type != openat and proc.name = cat
  output: c
  priority: DEBUG
- rule: d
  desc: d
  condition: fd.name = /x
  output: d
  priority: DEBUG
";
    let rs = rules(y);
    let names = |rs: &RuleSet, ev: &FakeEvent| {
        let mut v = Vec::new();
        rs.evaluate(ev, |r| v.push(r.name.clone()));
        v
    };
    let ev = open("/etc/passwd");
    assert_eq!(names(&rs, &ev), ["a"]);
    let all = rules_with(y, &LoadOptions { rule_matching: RuleMatching::All, ..Default::default() });
    assert_eq!(names(&all, &ev), ["a", "b"]);
    assert_eq!(names(&all, &FakeEvent::new("execve").set("proc.name", "cat")), ["c"]);
    // The index: c can fire on anything but openat; d only where fd.name has a value.
    let c = &rs.rules()[2];
    assert!(!c.event_types.contains(harrier_rules::events::EventType::from_name("openat").unwrap()));
    assert!(c.event_types.contains(harrier_rules::events::EventType::from_name("execve").unwrap()));
    let d = &rs.rules()[3];
    assert!(d.event_types.contains(harrier_rules::events::EventType::from_name("read").unwrap()));
    assert!(!d.event_types.contains(harrier_rules::events::EventType::from_name("execve").unwrap()));
    assert_eq!(format!("{:?}", rs.rules()[1].event_types), "{\"openat\"}");
    // A minimum priority drops less severe rules.
    let min = rules_with(
        y,
        &LoadOptions {
            min_priority: Priority::Warning,
            rule_matching: RuleMatching::All,
            ..Default::default()
        },
    );
    assert_eq!(names(&min, &ev), ["a"]);
    assert!(min.check_report().to_string().contains("b: below the minimum priority"));
}

#[test]
fn outputs_render_like_falco() {
    let y = "
- rule: r
  desc: d
  condition: evt.type = openat
  output: >
    File opened (user=%user.name command=%proc.cmdline file=%fd.name flags=%evt.arg.flags
    parent=%proc.aname[2] pid=%proc.pid missing=%proc.pname %container.info)
  priority: WARNING
";
    let rs = rules(y);
    let ev = open("/etc/shadow")
        .set("user.name", "root")
        .set("proc.cmdline", "cat /etc/shadow")
        .set("evt.arg.flags", Owned::Flags(0o1101, "open_flags"))
        .set("proc.aname[2]", "bash")
        .set("proc.pid", 7u64)
        .set("container.id", "host")
        .set("container.name", "host");
    let (text, fields) = rs.rules()[0].format_output(&ev);
    assert_eq!(
        text,
        "File opened (user=root command=cat /etc/shadow file=/etc/shadow flags=O_WRONLY|O_CREAT|O_TRUNC parent=bash pid=7 missing=<NA> host (id=host))"
    );
    let get = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    assert_eq!(get("proc.pid"), Some(OutputValue::U64(7)));
    assert_eq!(get("proc.aname[2]"), Some(OutputValue::Str("bash".into())));
    assert_eq!(get("proc.pname"), Some(OutputValue::Null));
    assert_eq!(get("container.id"), Some(OutputValue::Str("host".into())));
    assert_eq!(fields.len(), 9);
}

#[test]
fn append_output_adds_text_and_fields() {
    use harrier_rules::ruleset::AppendOutput;
    let opts = LoadOptions {
        append_output: vec![AppendOutput {
            source: Some("syscall".into()),
            extra_output: "env=%proc.env".into(),
            extra_fields: vec![("proc.cwd".into(), None), ("site".into(), Some("lab".into()))],
            ..Default::default()
        }],
        ..Default::default()
    };
    let rs = rules_with(
        "- rule: r\n  desc: d\n  condition: evt.type = openat\n  output: hit %proc.name\n  priority: INFO\n",
        &opts,
    );
    let ev = open("/x").set("proc.env", "A=1 B=2").set("proc.cwd", "/root");
    let (text, fields) = rs.rules()[0].format_output(&ev);
    assert_eq!(text, "hit cat env=A=1 B=2");
    let names: Vec<_> = fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["proc.name", "proc.env", "proc.cwd", "site"]);
}

#[test]
fn rule_sets_can_be_shared_across_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    let rs = rules("- rule: r\n  desc: d\n  condition: evt.type = openat\n  output: o\n  priority: INFO\n");
    send_sync(&rs);
    let ev = open("/x");
    std::thread::scope(|s| {
        let h = s.spawn(|| rs.evaluate(&ev, |_| {}));
        assert_eq!(h.join().unwrap(), 1);
    });
}

#[test]
fn older_rules_compare_evt_dir_with_a_bare_direction() {
    let ev = open("/etc/shadow").set("evt.dir", "<");
    assert!(holds("evt.type = openat and evt.dir = <", &ev));
    assert!(!holds("evt.type = openat and evt.dir = >", &ev));
    assert!(holds("evt.dir=< and fd.name = /etc/shadow", &ev));
}
