use super::*;

const RULES: &str = r#"
- required_engine_version: 0.11.0
- required_plugin_versions:
  - name: some_plugin
    version: 0.2.0
    alternatives:
      - name: other_plugin
        version: 1.0.0
- list: base_bins
  items: [cat]
- list: cat_bins
  items: [base_bins, "tac"]
- list: lonely
  items: []
- macro: is_cat
  condition: proc.name in (cat_bins)
- macro: opened
  condition: evt.type in (open, openat)
- macro: idle
  condition: fd.name startswith /etc and not proc.name=cat
- rule: open_from_cat
  desc: A process named cat does an open
  condition: opened and is_cat
  output: "An open was seen (command=%proc.cmdline)"
  priority: WARNING
  tags: [files]
  exceptions:
    - name: tmp_files
      fields: [fd.name, proc.pname]
      comps: [startswith, in]
      values:
        - [/tmp, [bash, "my sh"]]
    - name: by_parent
      fields: proc.pname
      comps: in
      values: [sshd, base_bins]
- rule: Unrestricted
  desc: anything but a close
  condition: evt.type != close and proc.name = val(proc.pname) or tolower(proc.name) = "a b"
  output: x
  priority: INFO
  enabled: false
"#;

fn describe(only: Option<&str>) -> Value {
    let files = vec![("r.yaml".to_string(), RULES.to_string())];
    let text = json(&files, &LoadOptions::default(), &[], only).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect()
}

#[test]
fn requirements_and_lists_are_described_as_falco_does() {
    let d = describe(None);
    assert_eq!(d["required_engine_version"], "0.11.0");
    let req = &d["required_plugin_versions"];
    assert_eq!(req.as_array().unwrap().len(), 1);
    assert_eq!((req[0]["name"].as_str(), req[0]["version"].as_str()), (Some("some_plugin"), Some("0.2.0")));
    assert_eq!(req[0]["alternatives"][0]["name"], "other_plugin");

    let lists = d["lists"].as_array().unwrap();
    let names: Vec<_> = lists.iter().map(|l| l["info"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["base_bins", "cat_bins", "lonely"]);
    // info.items leaves out the lists it names; details has them, and everything expanded.
    assert_eq!(strs(&lists[1]["info"]["items"]), ["tac"]);
    assert_eq!(strs(&lists[1]["details"]["lists"]), ["base_bins"]);
    assert_eq!(strs(&lists[1]["details"]["items_compiled"]), ["cat", "tac"]);
    assert_eq!(strs(&lists[1]["details"]["plugins"]), Vec::<&str>::new());
    let used: Vec<_> = lists.iter().map(|l| l["details"]["used"].as_bool().unwrap()).collect();
    assert_eq!(used, [true, true, false]);
}

#[test]
fn macros_are_compiled_with_their_lists_expanded() {
    let d = describe(None);
    let m = &d["macros"][0];
    assert_eq!(m["info"]["name"], "is_cat");
    assert_eq!(m["info"]["condition"], "proc.name in (cat_bins)");
    let det = &m["details"];
    assert_eq!(det["condition_compiled"], "proc.name in (cat, tac)");
    assert_eq!(strs(&det["condition_fields"]), ["proc.name"]);
    assert_eq!(strs(&det["condition_operators"]), ["in"]);
    assert_eq!(strs(&det["lists"]), ["cat_bins"]);
    assert!(det["macros"].as_array().unwrap().is_empty() && det["used"] == true);
    // No evt.type test: every event type.
    assert!(det["events"].as_array().unwrap().len() > 100);
    assert_eq!(strs(&d["macros"][1]["details"]["events"]), ["open", "openat", "asyncevent"]);
    assert_eq!(d["macros"][2]["details"]["used"], false);
    assert_eq!(
        d["macros"][2]["details"]["condition_compiled"],
        "(fd.name startswith /etc and not proc.name = cat)"
    );
}

#[test]
fn rules_have_info_as_written_and_details_as_compiled() {
    let d = describe(None);
    let r = &d["rules"][0];
    let info = &r["info"];
    assert_eq!(info["name"], "open_from_cat");
    assert_eq!(info["condition"], "opened and is_cat");
    assert_eq!((info["priority"].as_str(), info["source"].as_str()), (Some("Warning"), Some("syscall")));
    assert_eq!((info["enabled"].as_bool(), info["capture"].as_bool()), (Some(true), Some(false)));
    assert_eq!(strs(&info["tags"]), ["files"]);
    let det = &r["details"];
    assert_eq!(
        det["condition_compiled"],
        "((evt.type in (open, openat) and proc.name in (cat, tac)) and not (fd.name startswith /tmp and \
         proc.pname in (bash, \"my sh\")) and not proc.pname in (sshd, cat))"
    );
    assert_eq!(strs(&det["macros"]), ["opened", "is_cat"]);
    assert!(det["lists"].as_array().unwrap().is_empty(), "only through its macros");
    assert_eq!(strs(&det["condition_fields"]), ["evt.type", "proc.name", "fd.name", "proc.pname"]);
    assert_eq!(strs(&det["condition_operators"]), ["in", "startswith"]);
    assert_eq!(strs(&det["events"]), ["open", "openat", "asyncevent"]);
    assert_eq!(strs(&det["exception_names"]), ["tmp_files", "by_parent"]);
    assert_eq!(strs(&det["exception_fields"]), ["fd.name", "proc.pname"]);
    assert_eq!(strs(&det["exception_operators"]), ["startswith", "in"]);
    assert_eq!(det["output_compiled"], "An open was seen (command=%proc.cmdline)");
    assert_eq!(strs(&det["output_fields"]), ["proc.cmdline"]);
    assert!(det["plugins"].as_array().unwrap().is_empty());

    let det = &d["rules"][1]["details"];
    assert_eq!(d["rules"][1]["info"]["enabled"], false);
    assert_eq!(
        det["condition_compiled"],
        "((evt.type != close and proc.name = val(proc.pname)) or tolower(proc.name) = \"a b\")"
    );
    assert_eq!(strs(&det["condition_fields"]), ["evt.type", "proc.name", "proc.pname"]);
    assert!(strs(&det["events"]).len() > 100);
}

#[test]
fn one_rule_alone_and_an_unknown_one_is_an_error() {
    let d = describe(Some("Unrestricted"));
    assert_eq!(d.as_object().unwrap().keys().collect::<Vec<_>>(), ["rules"]);
    assert_eq!(d["rules"][0]["info"]["name"], "Unrestricted");
    let files = vec![("r.yaml".to_string(), RULES.to_string())];
    let e = json(&files, &LoadOptions::default(), &[], Some("nope")).unwrap_err();
    assert_eq!(e.to_string(), "Rule \"nope\" is not loaded");
}

#[test]
fn event_types_follow_libsinsp_under_negation() {
    let ev = |c: &str| {
        let e = events(&parser::parse(c).unwrap());
        if e.len() > 100 {
            return vec!["ALL"];
        }
        e
    };
    assert_eq!(ev("evt.type=open and not evt.type=open"), ["asyncevent"]);
    assert_eq!(ev("not (evt.type=open and proc.name=cat)"), ["ALL"]);
    assert_eq!(ev("not (evt.type=open or evt.type!=close)"), ["close", "asyncevent"]);
    assert_eq!(ev("evt.type in (openat, open) and evt.type contains open"), ["open", "openat", "asyncevent"]);
    let all = events(&parser::parse("proc.name=cat").unwrap()).len();
    assert_eq!(events(&parser::parse("not evt.type in (open, close)").unwrap()).len(), all - 2);
}

#[test]
fn values_print_quoted_only_when_libsinsp_quotes_them() {
    assert_eq!(escape(""), "");
    assert_eq!(escape("/a*,(x)"), "/a*,(x)");
    assert_eq!(escape("a b"), "\"a b\"");
    assert_eq!(escape("q\"x\\y\tz"), "\"q\\\"x\\\\y\\tz\"");
    let c = "b64(tolower(fd.name)) exists and not proc.aname[2] icontains X";
    assert_eq!(
        print(&parser::parse(c).unwrap()),
        "(b64(tolower(fd.name)) exists and not proc.aname[2] icontains X)"
    );
}
