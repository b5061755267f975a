//! The host against the project's own plugin (plugins/testsource.c): load, init, source,
//! extract, and the misbehaviours it can be asked for.

use harrier_plugin::{abi, Batch, Library, Plugin};
use harrier_rules::fields::{resolve_in, FieldArg, SourceFields};
use harrier_rules::Value;
use std::ffi::CString;
use std::sync::Arc;

fn lib() -> Arc<Library> {
    Arc::new(Library::open(env!("HARRIER_TEST_PLUGIN")).expect("the test plugin loads"))
}

fn scope(l: &Library) -> SourceFields {
    let fields = harrier_plugin::fields::parse(0, l.fields_json.as_deref().unwrap()).unwrap();
    SourceFields { source: "harrier_test".into(), fields }
}

/// Every value of `name` on `ev`, as text.
fn values(
    p: &Plugin,
    sc: &SourceFields,
    ev: *const abi::Event,
    num: u64,
    name: &str,
    arg: Option<&str>,
) -> Vec<String> {
    let (_, a) = resolve_in(Some(sc), name, arg).unwrap();
    let FieldArg::Plugin(sel) = a else { panic!("{name} is not a plugin field") };
    let src = CString::new("harrier_test").unwrap();
    let input = abi::EventInput { evt: ev, evtnum: num, evtsrc: src.as_ptr() };
    let mut out = Vec::new();
    p.extract(&input, &sel, &mut |v| {
        out.push(match v {
            Value::Str(s) => String::from_utf8_lossy(s).into_owned(),
            Value::U64(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => format!("{other:?}"),
        });
        false
    });
    out
}

#[test]
fn a_source_plugin_loads_sources_its_events_and_extracts_its_fields() {
    let l = lib();
    assert_eq!((l.name.as_str(), l.version.as_str(), l.id), ("testsource", "0.1.0", 999));
    assert_eq!(l.source.as_deref(), Some("harrier_test"));
    assert!(
        l.caps.sourcing
            && l.caps.extraction
            && l.extracts_from("harrier_test")
            && !l.extracts_from("syscall")
    );
    let sc = scope(&l);
    let mut p = Plugin::init(l.clone(), "").unwrap();
    let mut inst = p.open("count=70").unwrap();
    let mut seen = Vec::new();
    loop {
        let (e, status) = p.next_batch(&mut inst).unwrap();
        let evs = e.to_vec();
        if status == Batch::Eof {
            assert!(evs.is_empty(), "this plugin ends with an empty batch");
            break;
        }
        for ev in evs {
            let num = seen.len() as u64 + 1;
            assert_eq!(unsafe { harrier_plugin::payload(ev) }, format!("event {num}").as_bytes());
            let n = values(&p, &sc, ev, num, "test.n", None);
            let par = values(&p, &sc, ev, num, "test.parity", None);
            let arg = values(&p, &sc, ev, num, "test.arg", Some("k1"));
            seen.push((n.join(","), par.join(","), arg.join(",")));
        }
    }
    assert_eq!(seen.len(), 70, "two batches of the plugin's 64 at most, then EOF");
    assert_eq!(seen[2], ("3".into(), "odd,all".into(), "k1".into()));
    assert_eq!(p.metrics(), [("events_sent".to_string(), 70.0)]);
    assert_eq!((p.malformed.get(), p.failed.get()), (0, 0));
    p.close(inst);
}

#[test]
fn a_failed_init_says_which_plugin_and_why() {
    let err = Plugin::init(lib(), "fail_init").err().expect("init fails").to_string();
    assert_eq!(err, "plugin testsource: init failed: no state returned");
}

#[test]
fn malformed_values_are_counted_and_give_nothing() {
    let l = lib();
    let sc = scope(&l);
    let mut p = Plugin::init(l, "").unwrap();
    let mut inst = p.open("count=1 malformed").unwrap();
    let (e, _) = p.next_batch(&mut inst).unwrap();
    let ev = e[0];
    assert!(values(&p, &sc, ev, 1, "test.n", None).is_empty(), "2^40 values is no answer");
    assert!(values(&p, &sc, ev, 1, "test.msg", None).is_empty(), "a null array is no answer");
    assert_eq!(p.malformed.get(), 2);
    p.close(inst);
}

#[test]
fn a_missing_or_foreign_file_is_a_one_line_error() {
    let e = Library::open("/nonexistent/libx.so").err().unwrap().to_string();
    assert!(e.starts_with("cannot load plugin /nonexistent/libx.so:"), "{e}");
    let libc = "/lib/x86_64-linux-gnu/libc.so.6";
    let e = Library::open(libc).err().unwrap().to_string();
    assert_eq!(e, format!("{libc}: not a Falco plugin (no plugin_get_required_api_version)"));
    assert!(harrier_plugin::api_supported("3.0.0") && harrier_plugin::api_supported("3.12.0"));
    assert!(!harrier_plugin::api_supported("3.13.0") && !harrier_plugin::api_supported("2.0.0"));
}
