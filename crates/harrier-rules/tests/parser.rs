//! The condition grammar: every construct parses to the expected tree, and errors point at
//! the right byte.

use harrier_rules::ast::{Ast, Op, Rhs, Transformer};
use harrier_rules::parser::parse;

fn check(src: &str) -> (String, Op, Rhs) {
    match parse(src).unwrap_or_else(|e| panic!("{src}: {e:?}")) {
        Ast::Check { lhs, op, rhs, .. } => (lhs.name, op, rhs),
        other => panic!("{src}: not a check: {other:?}"),
    }
}

#[test]
fn every_operator_parses() {
    for (src, want) in [
        ("proc.name = bash", Op::Eq),
        ("proc.name == bash", Op::Eq),
        ("proc.name != bash", Op::Ne),
        ("proc.pid < 5", Op::Lt),
        ("proc.pid <= 5", Op::Le),
        ("proc.pid > 5", Op::Gt),
        ("proc.pid >= 5", Op::Ge),
        ("proc.name contains ba", Op::Contains),
        ("proc.name icontains BA", Op::IContains),
        ("evt.buffer bcontains CAFE", Op::BContains),
        ("fd.name startswith /etc", Op::StartsWith),
        ("evt.buffer bstartswith 7F454C46", Op::BStartsWith),
        ("fd.name endswith .conf", Op::EndsWith),
        ("fd.name glob '/etc/*'", Op::Glob),
        ("fd.name iglob '/ETC/*'", Op::IGlob),
        ("proc.cmdline regex 'a.*b'", Op::Regex),
        ("proc.name in (a, b)", Op::In),
        ("fd.types intersects (ipv4, ipv6)", Op::Intersects),
        ("fd.name pmatch (/etc, /usr)", Op::PMatch),
        ("proc.name exists", Op::Exists),
    ] {
        assert_eq!(check(src).1, want, "{src}");
    }
}

#[test]
fn precedence_and_grouping() {
    // and binds tighter than or; not tighter than and.
    let a = parse("a or b and not c").unwrap();
    let Ast::Or(v) = a else { panic!("{a:?}") };
    assert!(matches!(&v[0], Ast::Macro(m, _) if m == "a"));
    let Ast::And(w) = &v[1] else { panic!() };
    assert!(matches!(&w[1], Ast::Not(..)));
    let b = parse("(a or b) and c").unwrap();
    assert!(matches!(b, Ast::And(ref v) if matches!(v[0], Ast::Or(_))));
    assert!(matches!(parse("not not a").unwrap(), Ast::Not(ref i, _) if matches!(**i, Ast::Not(..))));
}

#[test]
fn arguments_lists_values() {
    let (name, _, _) = check("proc.aname[2] = bash");
    assert_eq!(name, "proc.aname");
    let Ast::Check { lhs, .. } = parse("proc.aname[2] = bash").unwrap() else { panic!() };
    assert_eq!(lhs.arg.as_deref(), Some("2"));
    let Ast::Check { lhs, .. } = parse("container.mount.dest[/var/run/docker.sock] exists").unwrap() else {
        panic!()
    };
    assert_eq!(lhs.arg.as_deref(), Some("/var/run/docker.sock"));
    assert_eq!(check("evt.arg.flags contains O_TRUNC").0, "evt.arg.flags");
    let (_, _, rhs) = check("proc.name in (a, 'b c', \"d\", shell_binaries)");
    let Rhs::List(items, _) = rhs else { panic!() };
    let t: Vec<_> = items.iter().map(|i| (i.text.as_str(), i.quoted)).collect();
    assert_eq!(t, [("a", false), ("b c", true), ("d", true), ("shell_binaries", false)]);
    let (_, _, rhs) = check("proc.name in ()");
    assert!(matches!(rhs, Rhs::List(ref v, _) if v.is_empty()));
    let (_, _, rhs) = check("proc.name in shell_binaries");
    assert!(matches!(rhs, Rhs::ListName(ref l) if l.text == "shell_binaries"));
    let (_, _, rhs) = check("proc.pname = val(proc.name)");
    assert!(matches!(rhs, Rhs::Field(ref f) if f.name == "proc.name"));
    let (_, _, rhs) = check(r#"proc.cmdline contains "a \"quoted\" word""#);
    assert!(matches!(rhs, Rhs::Value(ref l) if l.text == "a \"quoted\" word"));
    let (_, _, rhs) = check("fd.sip = 10.0.0.1");
    assert!(matches!(rhs, Rhs::Value(ref l) if l.text == "10.0.0.1"));
    let (_, _, rhs) = check("user.loginuid = -1");
    assert!(matches!(rhs, Rhs::Value(ref l) if l.text == "-1"));
}

#[test]
fn transformers() {
    let Ast::Check { lhs, .. } = parse("toupper(basename(fd.name)) = PASSWD").unwrap() else { panic!() };
    assert_eq!(lhs.name, "fd.name");
    assert_eq!(lhs.transformers, vec![Transformer::Basename, Transformer::ToUpper]);
    for t in ["tolower", "toupper", "b64", "basename", "len"] {
        let src = format!("{t}(proc.name) exists");
        assert!(parse(&src).is_ok(), "{src}");
    }
    let (_, _, rhs) = check("proc.name = tolower(proc.pname)");
    assert!(matches!(rhs, Rhs::Field(ref f) if f.transformers == [Transformer::ToLower]));
}

#[test]
fn spans_cover_the_source() {
    let src = "evt.type = open and proc.name in (a, b)";
    let Ast::And(v) = parse(src).unwrap() else { panic!() };
    assert_eq!(&src[v[0].span()], "evt.type = open");
    assert_eq!(&src[v[1].span()], "proc.name in (a, b)");
}

#[test]
fn errors_point_at_the_offending_byte() {
    for (src, at, words) in [
        ("proc.name =", 11, "expected a value"),
        ("proc.name bash", 10, "expected an operator"),
        ("(proc.name = a", 14, "expected ')'"),
        ("proc.name = a)", 13, "unexpected ')'"),
        ("proc.name = 'abc", 12, "unterminated string"),
        ("proc.name in (a b)", 16, "expected ',' or ')'"),
        ("proc.name in (a,)", 16, "expected a value in the list"),
        ("and x", 0, "expected a field"),
        ("proc.name = a and", 17, "expected a field"),
        ("", 0, "empty condition"),
        ("proc.name ! a", 10, "unexpected '!'"),
        ("proc.aname[2 = a", 10, "missing ']'"),
        ("tolower(proc.name = a", 18, "expected ')'"),
        ("proc.name = (a, b)", 12, "takes one value"),
        ("1abc = x", 0, "not a field"),
    ] {
        let e = parse(src).expect_err(src);
        assert_eq!(e.span.start, at, "{src:?}: {e:?}");
        assert!(e.msg.contains(words), "{src:?}: {e:?}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let src = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(parse(&src).unwrap_err().msg.contains("nested too deeply"));
    let src = format!("{}a", "not ".repeat(10_000));
    assert!(parse(&src).is_err());
}
