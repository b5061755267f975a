use harrier_eventgen::{generate_c, generate_rust, load};
use std::path::Path;

fn tables() -> harrier_eventgen::Tables {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema")).unwrap()
}

#[test]
fn committed_tables_parse_and_cover_the_issue_list() {
    let t = tables();
    assert!(t.syscalls.len() > 370, "x86_64 has more than 370 syscalls");
    for name in ["openat", "connect", "execve", "clone3", "setsockopt", "epoll_wait", "umount2"] {
        assert!(t.events.iter().any(|e| e.syscall.name == name), "{name} is not typed");
    }
    let enter: Vec<_> = t.events.iter().filter(|e| e.has_enter()).map(|e| e.syscall.name.as_str()).collect();
    assert_eq!(enter, ["open", "openat", "openat2", "creat", "execve", "execveat", "connect"]);
}

#[test]
fn generated_sides_name_the_same_events() {
    let t = tables();
    let c = generate_c(&t);
    let rs = generate_rust(&t);
    for e in &t.events {
        assert!(c.contains(&format!("int hr_exit_{}(", e.syscall.name)));
        assert!(rs.contains(&format!("PARAMS_{}", e.syscall.name.to_uppercase())));
    }
}

#[test]
fn bad_lines_are_reported_with_file_and_line() {
    let t = tables();
    let err =
        harrier_eventgen::table::parse_events("x.tbl", "schema_version 1\nopenat p=nope(1)\n", &t.syscalls)
            .err()
            .unwrap();
    assert_eq!(err.to_string(), "x.tbl:2: bad parameter 'p=nope(1)'");
    let err = harrier_eventgen::table::parse_events("x.tbl", "schema_version 1\nfrobnicate\n", &t.syscalls)
        .err()
        .unwrap();
    assert_eq!(err.to_string(), "x.tbl:2: unknown syscall 'frobnicate'");
}
