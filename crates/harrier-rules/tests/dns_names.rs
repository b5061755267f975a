//! fd.sip.name / fd.cip.name / fd.lip.name / fd.rip.name as Falco evaluates them: the
//! names of a condition resolve to addresses (off the hot path), and the comparison
//! asks whether the fd's address is one of them.

use harrier_rules::ruleset::{LoadOptions, RuleSet};
use harrier_rules::testing::{FakeEvent, Owned};
use std::net::IpAddr;

fn rule(cond: &str) -> Result<RuleSet, String> {
    let y = format!("- rule: r\n  desc: d\n  condition: '{cond}'\n  output: o\n  priority: WARNING\n");
    RuleSet::load(&[("t.yaml", y)], &LoadOptions::default())
        .map_err(|d| d.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))
}

fn connect(field: &str, ip: &str) -> FakeEvent {
    FakeEvent::new("connect").set(field, Owned::Ip(ip.parse::<IpAddr>().unwrap()))
}

#[test]
fn names_match_the_addresses_they_resolve_to() {
    // Literal addresses resolve to themselves: no resolver needed to know the answer.
    let cases = [
        ("fd.sip.name = 192.0.2.1", "fd.sip", "192.0.2.1", true),
        ("fd.sip.name = 192.0.2.1", "fd.sip", "192.0.2.2", false),
        ("fd.sip.name = 192.0.2.1", "fd.sip", "::ffff:192.0.2.1", true),
        ("fd.sip.name != 192.0.2.1", "fd.sip", "192.0.2.2", true),
        ("fd.sip.name != 192.0.2.1", "fd.sip", "192.0.2.1", false),
        ("fd.sip.name in (192.0.2.9, 192.0.2.1)", "fd.sip", "192.0.2.1", true),
        ("fd.cip.name = 198.51.100.3", "fd.cip", "198.51.100.3", true),
        ("fd.lip.name = 198.51.100.3", "fd.lip", "198.51.100.3", true),
        ("fd.rip.name = 198.51.100.3", "fd.rip", "198.51.100.3", true),
        ("fd.rip.name = 198.51.100.3", "fd.lip", "198.51.100.3", false),
        ("fd.sip.name = localhost", "fd.sip", "127.0.0.1", true),
        ("fd.sip.name = localhost", "fd.sip", "127.0.0.2", false),
    ];
    for (cond, field, ip, want) in cases {
        let rs = rule(cond).unwrap();
        assert_eq!(rs.evaluate(&connect(field, ip), |_| {}), 0, "{cond}: nothing resolved yet");
        rs.dns().refresh();
        assert_eq!(rs.evaluate(&connect(field, ip), |_| {}) == 1, want, "{cond} with {field} = {ip}");
    }
}

#[test]
fn an_fd_without_an_address_matches_neither_way() {
    let rs = rule("fd.sip.name = 192.0.2.1 or fd.sip.name != 192.0.2.1").unwrap();
    rs.dns().refresh();
    assert_eq!(rs.evaluate(&FakeEvent::new("connect"), |_| {}), 0);
}

#[test]
fn names_of_every_comparison_are_listed_once() {
    let rs = rule("fd.sip.name = localhost or fd.cip.name in (localhost, harrier-test.invalid)").unwrap();
    let names: Vec<String> = rs.dns().names().iter().map(|n| n.to_string()).collect();
    assert_eq!(names, ["localhost", "harrier-test.invalid"]);
    rs.dns().refresh();
    assert_eq!(rs.dns().stats().failures, 1, "the .invalid name is counted");
}

#[test]
fn other_operators_are_an_error_naming_the_field() {
    let e = rule("fd.sip.name contains kube").unwrap_err();
    assert!(e.starts_with("t.yaml:3:"), "{e}");
    assert!(e.contains("'fd.sip.name'") && e.contains("use =, != or in"), "{e}");
}
