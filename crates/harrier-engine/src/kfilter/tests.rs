use super::*;
use harrier_rules::ruleset::LoadOptions;

fn rules(conditions: &[(&str, &str)]) -> RuleSet {
    let mut y = String::new();
    for (name, cond) in conditions {
        y += &format!("- rule: {name}\n  desc: t\n  condition: {cond}\n  output: o\n  priority: WARNING\n");
    }
    RuleSet::load(&[("t.yaml", y)], &LoadOptions::default()).unwrap()
}

fn sc(name: &str) -> &'static SyscallInfo {
    syscall_by_name(name).unwrap()
}

fn filter_of(rs: &RuleSet, names: &[&str]) -> KernelFilter {
    derive(rs, &names.iter().map(|n| sc(n)).collect::<Vec<_>>(), &[])
}

fn prefix(p: &str) -> PathMatch {
    PathMatch::Prefix(p.as_bytes().to_vec())
}

fn exact(p: &str) -> PathMatch {
    PathMatch::Exact(p.as_bytes().to_vec())
}

#[test]
fn write_opens_below_a_prefix_reduce_to_one_clause() {
    let rs = rules(&[(
        "w",
        "evt.type in (open, openat) and evt.is_open_write=true and fd.num>=0 and fd.name startswith /etc/",
    )]);
    let f = filter_of(&rs, &["openat", "execve"]);
    assert_eq!(f.syscalls.len(), 1, "execve is the state's: never filtered ({f:?})");
    let want = Clause {
        need_success: true,
        flags_any: 3,
        paths: Some(vec![prefix("/etc/")]),
        raw_dotdot: false,
        ..Clause::default()
    };
    assert_eq!(f.syscalls[0].clauses, vec![want]);
}

#[test]
fn rules_on_the_same_tests_merge_their_paths() {
    let rs = rules(&[
        ("a", "evt.type=openat and fd.name in (/etc/shadow, /etc/sudoers)"),
        ("b", "evt.type=openat and fd.directory = /root/.ssh"),
        ("c", "evt.type=execve and proc.name=sh"),
    ]);
    let f = filter_of(&rs, &["openat"]);
    let c = &f.syscalls[0].clauses;
    assert_eq!(c.len(), 1, "{c:?}");
    assert!(c[0].need_success && c[0].flags_any == 0);
    let mut got = c[0].paths.clone().unwrap();
    got.sort();
    assert_eq!(got, vec![prefix("/root/.ssh/"), exact("/etc/shadow"), exact("/etc/sudoers")]);
}

#[test]
fn anything_a_rule_cannot_bound_keeps_every_event() {
    for cond in [
        "evt.type=openat and not fd.name startswith /tmp",
        "evt.type=openat and proc.name=cat",
        "evt.type=openat and (fd.name startswith /etc or proc.name=cat)",
    ] {
        let rs = rules(&[("r", cond), ("w", "evt.type=openat and fd.name startswith /etc")]);
        assert!(filter_of(&rs, &["openat"]).is_empty(), "{cond}");
    }
}

#[test]
fn contains_bounds_success_only() {
    let rs = rules(&[("r", "evt.type=openat and fd.typechar=f and fd.name contains id_rsa")]);
    let f = filter_of(&rs, &["openat"]);
    assert_eq!(f.syscalls[0].clauses, vec![Clause { need_success: true, ..Clause::default() }]);
}

#[test]
fn other_event_types_of_a_rule_do_not_widen_an_open() {
    let rs = rules(&[(
        "r",
        "(evt.type=openat and fd.name startswith /etc/) or (evt.type=execve and proc.name=sh)",
    )]);
    let f = filter_of(&rs, &["openat"]);
    assert_eq!(f.syscalls[0].clauses[0].paths, Some(vec![prefix("/etc/")]));
}

#[test]
fn the_state_keeps_every_successful_open_when_rules_read_file_fds() {
    let files = rules(&[
        ("w", "evt.type=openat and fd.name startswith /etc/"),
        ("r", "evt.type=read and fd.name startswith /var/"),
    ]);
    assert!(fd_table_needs_files(&files));
    let c = &filter_of(&files, &["openat"]).syscalls[0].clauses;
    let mut paths = c[0].paths.clone().unwrap();
    paths.sort();
    assert_eq!(
        (c.len(), paths),
        (1, vec![prefix("/etc/"), prefix("/var/")]),
        "the state keeps opens below /var/"
    );
    let unbounded =
        rules(&[("w", "evt.type=openat and fd.name startswith /etc/"), ("r", "evt.type=read and fd.num=3")]);
    let c = &filter_of(&unbounded, &["openat"]).syscalls[0].clauses;
    assert_eq!(c, &vec![Clause { need_success: true, ..Clause::default() }], "every successful open");
    let sockets = rules(&[
        ("w", "evt.type=openat and fd.name startswith /etc/"),
        ("d", "evt.type=dup and fd.type in (ipv4, ipv6)"),
    ]);
    assert!(!fd_table_needs_files(&sockets));
    assert_eq!(filter_of(&sockets, &["openat"]).syscalls[0].clauses.len(), 1);
}

#[test]
fn kernel_drop_takes_names_and_syscalls() {
    let d = parse_kernel_drop("proc.name = redis-server and evt.type in (read, write)").unwrap();
    assert_eq!(d.comms, vec![b"redis-server".to_vec()]);
    assert_eq!(d.syscalls, Some(vec![0, 1]));
    let rs = rules(&[("w", "evt.type=read and proc.name=x")]);
    let f = derive(&rs, &[sc("read"), sc("openat")], &[d]);
    assert_eq!(f.syscalls.len(), 1, "openat is not in the drop's syscalls");
    assert_eq!(f.syscalls[0].drop_comms, vec![b"redis-server".to_vec()]);
    let all = parse_kernel_drop("proc.name in (a, b)").unwrap();
    let f = derive(&rs, &[sc("read"), sc("openat")], &[all]);
    assert_eq!(f.syscalls.iter().map(|s| s.nr).collect::<Vec<_>>(), vec![0], "openat is the state's");
}

#[test]
fn kernel_drop_errors_name_the_column() {
    for (text, want) in [
        ("proc.name = x and fd.name = /a", "column 19: fd.name cannot be evaluated in the kernel"),
        ("proc.name = x or proc.name = y", "'or' found"),
        ("evt.type = read", "needs a proc.name test"),
        ("proc.name = x and evt.type = nosuch", "column 19: unknown syscall 'nosuch'"),
        ("proc.name startswith x", "column 1: proc.name must be tested with = or in"),
        ("proc.name = (", "column"),
    ] {
        let e = parse_kernel_drop(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn a_traversal_test_on_the_raw_path_bounds_the_opens() {
    let rs = rules(&[(
        "t",
        "evt.type = openat and fd.num >= 0 and (fd.name startswith /etc/ or fd.name contains id_rsa) \
         and fd.nameraw contains '../'",
    )]);
    let f = filter_of(&rs, &["openat"]);
    assert_eq!(
        f.syscalls[0].clauses,
        vec![Clause { need_success: true, raw_dotdot: true, ..Clause::default() }]
    );
    assert!(summary(&f).contains("\"..\""), "{}", summary(&f));
}

#[test]
fn only_fds_the_engine_looks_up_make_the_state_keep_files() {
    // execveat's dirfd and a socket's own fd never name an opened file; a
    // dup's new fd names the old one's.
    for (ty, keeps) in [("execveat", false), ("socket", false), ("dup", true)] {
        let out = format!(
            "- rule: r\n  desc: t\n  condition: evt.type = {ty}\n  output: f=%fd.name\n  priority: WARNING\n"
        );
        let rs = RuleSet::load(&[("t.yaml", out)], &LoadOptions::default()).unwrap();
        assert_eq!(fd_table_needs_files(&rs), keeps, "{ty}");
    }
}

#[test]
fn closes_of_untold_fds_are_kept_back_unless_a_rule_reads_closes() {
    let untold = |rs: &RuleSet| {
        let f = filter_of(rs, &["openat", "close"]);
        f.syscalls.iter().find(|s| s.nr == sc("close").nr).is_some_and(|s| s.untold)
    };
    assert!(untold(&rules(&[("o", "evt.type=openat and fd.name=/etc/shadow")])));
    assert!(!untold(&rules(&[("c", "evt.type=close and proc.name=nc")])), "a rule on close");
    assert!(!untold(&rules(&[("any", "proc.name=nc")])), "a rule with no evt.type sees closes");
    let only_drops = derive_with(None, &[sc("openat"), sc("close")], &[]);
    assert!(only_drops.syscalls.iter().all(|s| !s.untold), "no rules, nothing known of their needs");
}

fn socket_clauses(conds: &[(&str, &str)]) -> Option<Vec<Clause>> {
    let rs = rules(conds);
    let f = filter_of(&rs, &["socket", "connect", "dup2", "sendto", "write"]);
    f.syscalls.iter().find(|s| s.nr == sc("socket").nr).map(|s| s.clauses.clone())
}

const PACKET: (&str, &str) =
    ("packet", "evt.type=socket and evt.arg.domain contains AF_PACKET and proc.name != x");

#[test]
fn socket_is_sent_only_for_what_its_rules_test_when_later_events_describe_it() {
    let packet = Clause { arg_eq: Some(("domain", libc::AF_PACKET as u32)), ..Clause::default() };
    // Falco's network rules: connect and dup2 describe their socket; the SSH
    // rule's sendto branch contradicts itself (l4proto != tcp, = tcp).
    let ssh = "((evt.type = connect or (evt.type in (sendto, sendmsg) and fd.l4proto != tcp and \
               fd.connected=false)) and fd.typechar = 4) and fd.l4proto=tcp and fd.sport in (80, 443)";
    let redirect = "evt.type in (dup, dup2, dup3) and evt.rawres in (0, 1, 2) and fd.type in (ipv4, ipv6)";
    let got = socket_clauses(&[PACKET, ("ssh", ssh), ("redirect", redirect)]);
    assert_eq!(got, Some(vec![packet]));
    // A rule reading files only, on writes, needs no socket.
    let files = ("w", "evt.type=write and fd.typechar=f and fd.name startswith /etc/");
    assert!(socket_clauses(&[PACKET, files]).is_some());
}

#[test]
fn socket_is_always_sent_when_a_rule_reads_its_fd_later() {
    for cond in [
        "evt.type=sendto and fd.sport=53",
        "evt.type=write and fd.type=ipv4",
        "evt.type=sendto and fd.l4proto in (tcp, udp) and fd.l4proto != udp",
    ] {
        assert_eq!(socket_clauses(&[PACKET, ("later", cond)]), None, "{cond}");
    }
    // The output reads the fd, on an event that does not describe its socket.
    let mut y = String::new();
    y += "- rule: o\n  desc: t\n  condition: evt.type=write and proc.name=x\n  output: \"f %fd.name\"\n  priority: WARNING\n";
    let rs = RuleSet::load(&[("t.yaml", y)], &LoadOptions::default()).unwrap();
    let f = filter_of(&rs, &["socket", "write"]);
    assert!(f.syscalls.iter().all(|s| s.nr != sc("socket").nr), "{f:?}");
    // A socket() rule the kernel cannot bound takes every socket().
    assert_eq!(socket_clauses(&[("any", "evt.type=socket and proc.name=x")]), None);
}

#[test]
fn connect_is_bounded_by_its_protocol_and_the_rules_names_when_sockets_are_kept_back() {
    let k8s = "evt.type=connect and (fd.typechar=4 or fd.typechar=6) and fd.sip.name=\"k8s.example\" \
               and not proc.name in (x)";
    let ssh = "((evt.type = connect or (evt.type in (sendto, sendmsg) and fd.l4proto != tcp)) and \
               (evt.rawres >= 0 or evt.res = EINPROGRESS)) and fd.l4proto=tcp and fd.sport in (80, 443)";
    let rs = rules(&[PACKET, ("k8s", k8s), ("ssh", ssh)]);
    let f = filter_of(&rs, &["socket", "connect", "sendto"]);
    let connect = f.syscalls.iter().find(|s| s.nr == sc("connect").nr).expect("connect is judged");
    let (tcp, named) =
        (Clause { l4: 6, ..Clause::default() }, Clause { peer_named: true, ..Clause::default() });
    let mut got = connect.clauses.clone();
    got.sort_by_key(|c| c.l4);
    assert_eq!(got, vec![named, tcp], "never success: a failed connect's fd has fields");
    // Sockets needed later: connect is not judged (its clauses would never see an untold fd).
    let rs = rules(&[PACKET, ("k8s", k8s), ("later", "evt.type=sendto and fd.sport=53")]);
    let f = filter_of(&rs, &["socket", "connect", "sendto"]);
    assert!(f.syscalls.iter().all(|s| s.nr != sc("connect").nr), "{f:?}");
}
