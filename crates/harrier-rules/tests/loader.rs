//! Rule files: lists, macros, rules, appends, overrides, exceptions, enabled, several files,
//! and errors that name file:line:column.

use harrier_rules::loader::Priority;
use harrier_rules::ruleset::{LoadOptions, RuleSet, RuleStatus};
use harrier_rules::testing::FakeEvent;

fn load(files: &[(&str, &str)]) -> RuleSet {
    RuleSet::load(files, &LoadOptions::default())
        .unwrap_or_else(|d| panic!("{}", d.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")))
}

fn errors(files: &[(&str, &str)]) -> Vec<String> {
    RuleSet::load(files, &LoadOptions::default())
        .expect_err("should fail")
        .iter()
        .map(|d| d.to_string())
        .collect()
}

fn fired(rs: &RuleSet, ev: &FakeEvent) -> Vec<String> {
    let mut v = Vec::new();
    rs.evaluate(ev, |r| v.push(r.name.clone()));
    v
}

const BASE: &str = r#"
- list: shells
  items: [bash, sh]
- list: more_shells
  items: [shells, zsh]
- macro: spawned
  condition: evt.type = execve
- rule: Shell
  desc: a shell ran
  condition: spawned and proc.name in (more_shells)
  output: "shell %proc.name"
  priority: WARNING
  tags: [shell]
"#;

fn exec(name: &str) -> FakeEvent {
    FakeEvent::new("execve").set("proc.name", name)
}

#[test]
fn lists_nest_and_macros_expand() {
    let rs = load(&[("base.yaml", BASE)]);
    assert_eq!(fired(&rs, &exec("zsh")), ["Shell"]);
    assert_eq!(fired(&rs, &exec("bash")), ["Shell"]);
    assert!(fired(&rs, &exec("fish")).is_empty());
    let r = &rs.rules()[0];
    assert_eq!(
        (r.priority, r.tags.as_slice(), r.line, r.col),
        (Priority::Warning, &["shell".to_string()][..], 8, 3)
    );
}

#[test]
fn append_and_override_in_a_later_file() {
    let local = r#"
- list: shells
  items: [fish]
  append: true
- macro: spawned
  condition: and proc.pid > 1
  override:
    condition: append
- rule: Shell
  condition: and not proc.pname = sshd
  append: true
- rule: Shell
  priority: ERROR
  output: "replaced %proc.name"
  override:
    priority: replace
    output: replace
"#;
    let rs = load(&[("base.yaml", BASE), ("local.yaml", local)]);
    let ev = exec("fish").set("proc.pid", 10u64).set("proc.pname", "init");
    assert_eq!(fired(&rs, &ev), ["Shell"]);
    assert!(fired(&rs, &exec("fish").set("proc.pid", 1u64).set("proc.pname", "init")).is_empty());
    assert!(fired(&rs, &ev.clone().set("proc.pname", "sshd")).is_empty());
    let r = &rs.rules()[0];
    assert_eq!(r.priority, Priority::Error);
    assert_eq!(r.format_output(&ev).0, "replaced fish");

    // Replacing a list and a condition.
    let repl = r#"
- list: more_shells
  items: [tcsh]
  override:
    items: replace
- rule: Shell
  condition: evt.type = execve and proc.name in (more_shells)
  override:
    condition: replace
"#;
    let rs = load(&[("base.yaml", BASE), ("r.yaml", repl)]);
    assert_eq!(fired(&rs, &exec("tcsh")), ["Shell"]);
    assert!(fired(&rs, &exec("bash")).is_empty());
}

#[test]
fn enabled_false_and_back() {
    let off = "- rule: Shell\n  enabled: false\n";
    let rs = load(&[("base.yaml", BASE), ("off.yaml", off)]);
    assert_eq!(rs.rules()[0].status, RuleStatus::Disabled);
    assert!(fired(&rs, &exec("bash")).is_empty());
    assert!(rs.event_types().is_empty());
    let on = "- rule: Shell\n  enabled: true\n  override:\n    enabled: replace\n";
    let rs = load(&[("base.yaml", BASE), ("off.yaml", off), ("on.yaml", on)]);
    assert_eq!(fired(&rs, &exec("bash")), ["Shell"]);
}

#[test]
fn exceptions_compile_into_the_condition() {
    let y = r#"
- list: trusted
  items: [vim, nano]
- rule: Write etc
  desc: d
  condition: evt.type = openat and fd.name startswith /etc
  output: o
  priority: ERROR
  exceptions:
    - name: by_proc_and_file
      fields: [proc.name, fd.name]
      comps: [=, startswith]
      values:
        - [apt, /etc/apt]
        - [dpkg, /etc/dpkg]
    - name: by_proc
      fields: proc.name
      values: [trusted, sed]
    - name: by_parent_in
      fields: [proc.pname, fd.filename]
      comps: [in, =]
      values:
        - [[make, cmake], hosts]
    - name: empty
      fields: [proc.name]
"#;
    let rs = load(&[("e.yaml", y)]);
    let ev = |p: &str, f: &str| {
        FakeEvent::new("openat")
            .set("proc.name", p)
            .set("fd.name", f)
            .set("proc.pname", "make")
            .set("fd.filename", "x")
    };
    assert_eq!(fired(&rs, &ev("cat", "/etc/shadow")), ["Write etc"]);
    assert!(fired(&rs, &ev("apt", "/etc/apt/sources.list")).is_empty());
    assert_eq!(fired(&rs, &ev("apt", "/etc/dpkg/x")), ["Write etc"]);
    assert!(fired(&rs, &ev("vim", "/etc/x")).is_empty(), "list name as an exception value");
    assert!(fired(&rs, &ev("sed", "/etc/x")).is_empty());
    assert!(fired(&rs, &ev("cat", "/etc/hosts").set("fd.filename", "hosts")).is_empty());

    // Appending values to an exception from another file.
    let more = r#"
- rule: Write etc
  exceptions:
    - name: by_proc
      values: [cat]
  override:
    exceptions: append
"#;
    let rs = load(&[("e.yaml", y), ("more.yaml", more)]);
    assert!(fired(&rs, &ev("cat", "/etc/shadow")).is_empty());
}

#[test]
fn errors_name_file_line_column() {
    let cases: &[(&str, &str)] = &[
        ("- rule: r\n  desc: d\n  condition: proc.name = \n  output: o\n  priority: INFO\n", "t.yaml:3:25: rule 'r': expected a value"),
        ("- rule: r\n  desc: d\n  output: o\n  priority: INFO\n", "t.yaml:1:3: rule 'r' misses condition"),
        ("- rule: r\n  desc: d\n  condition: evt.type=open\n  output: o\n  priority: LOUD\n", "t.yaml:5:13: unknown priority 'LOUD'"),
        ("- macro: m\n  condition: proc.name =\n", "t.yaml:2:25: macro 'm': expected a value"),
        ("- rule: r\n  condition: a\n  append: true\n", "t.yaml:1:3: rule 'r' has append but no rule by that name exists"),
        ("- list: l\n  items: [a]\n  override:\n    items: append\n", "t.yaml:1:3: list 'l' has append or override"),
        ("- rule: [\n", "t.yaml:2:1: invalid YAML"),
        ("- bogus: 1\n", "t.yaml:1:3: unknown item 'bogus'"),
        ("rule: x\n", "t.yaml:1:1: a rules file must be a list of items"),
        ("- rule: r\n  desc: d\n  condition: evt.type=open\n  output: o\n  priority: INFO\n  enabled: maybe\n", "t.yaml:6:12: enabled must be true or false"),
        ("- list: l\n  items: [a]\n  override:\n    items: append\n    extra: replace\n", "t.yaml:5:5: key 'extra' of a list cannot be replaced"),
    ];
    for (src, want) in cases {
        let e = errors(&[("t.yaml", src)]);
        assert!(e[0].starts_with(want), "{src:?}\n got: {e:?}\nwant: {want}");
    }
}

#[test]
fn positions_inside_folded_conditions_and_macros() {
    let y = "- macro: m\n  condition: >\n    evt.type = open and\n    bogus.field = 1\n- rule: r\n  desc: d\n  condition: (proc.name = a) and m\n  output: o\n  priority: INFO\n";
    let opts = LoadOptions { strict: true, ..Default::default() };
    let e = RuleSet::load(&[("f.yaml", y)], &opts).unwrap_err();
    assert_eq!(
        e[0].to_string(),
        "f.yaml:4:5: rule 'r': unknown field 'bogus.field' (in macro 'm' used at f.yaml:7:34)"
    );
    let y = "- rule: r\n  desc: d\n  condition: >\n    evt.type = open\n      and proc.name in (a,\n      b c)\n  output: o\n  priority: INFO\n";
    let e = errors(&[("g.yaml", y)]);
    assert!(e[0].starts_with("g.yaml:6:9: rule 'r': expected ',' or ')'"), "{e:?}");
}

#[test]
fn other_sources_and_plugins() {
    let y = "- required_engine_version: 0.50.0\n- required_plugin_versions:\n  - name: k8saudit\n    version: 0.1.0\n- rule: k\n  desc: d\n  condition: ka.verb = get\n  output: o\n  priority: INFO\n  source: k8s_audit\n";
    let rs = load(&[("p.yaml", y)]);
    assert_eq!(rs.rules()[0].status, RuleStatus::OtherSource("k8s_audit".into()));
    let w = rs.warnings()[0].to_string();
    assert!(w.starts_with("p.yaml:3:5: warning: required_plugin_versions: no plugin loaded"), "{w}");
    // With plugins loaded, a requirement they do not meet is an error; one they meet is quiet.
    let old = LoadOptions { plugins: vec![("k8saudit".into(), "0.0.9".into())], ..Default::default() };
    let e = RuleSet::load(&[("p.yaml", y)], &old).unwrap_err();
    assert!(e[0].to_string().contains("one of these plugins loaded: k8saudit (>= 0.1.0)"), "{}", e[0]);
    let ok = LoadOptions { plugins: vec![("k8saudit".into(), "0.18.0".into())], ..Default::default() };
    let rs = RuleSet::load(&[("p.yaml", y)], &ok).unwrap();
    assert!(!rs.warnings().iter().any(|w| w.to_string().contains("required_plugin")), "{:?}", rs.warnings());
}

#[test]
fn macro_cycles_are_errors() {
    let y = "- macro: a\n  condition: b\n- macro: b\n  condition: a\n- rule: r\n  desc: d\n  condition: a\n  output: o\n  priority: INFO\n";
    let e = errors(&[("c.yaml", y)]);
    assert!(e[0].contains("refers to itself"), "{e:?}");
}

#[test]
fn hostile_yaml_is_an_error_not_a_crash() {
    let deep = format!("- rule: {}x{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let e = errors(&[("deep.yaml", &deep)]);
    assert!(e[0].contains("nested deeper than") || e[0].contains("recursion limit exceeded"), "{e:?}");
    // The "billion laughs": aliases that expand exponentially.
    let mut bomb = String::from("- list: a0\n  items: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        bomb.push_str(&format!("- list: a{i}\n  items: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n", p = i - 1));
    }
    let e = errors(&[("bomb.yaml", &bomb)]);
    assert!(e[0].contains("aliases expand too much"), "{e:?}");
}

#[test]
fn positions_in_quoted_and_crlf_files() {
    let y = "- rule: r\n  desc: d\n  condition: \"evt.type = open and proc.name in (a b)\"\n  output: o\n  priority: INFO\n";
    let e = errors(&[("q.yaml", y)]);
    assert!(e[0].starts_with("q.yaml:3:51: rule 'r': expected ',' or ')'"), "{e:?}");
    let y = "- rule: r\r\n  desc: d\r\n  condition: evt.type = open and nope.field = 1\r\n  output: o\r\n  priority: INFO\r\n";
    let e = errors(&[("crlf.yaml", y)]);
    assert!(e[0].starts_with("crlf.yaml:3:34: rule 'r': unknown field 'nope.field'"), "{e:?}");
}
