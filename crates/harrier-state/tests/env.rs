//! proc.env in the state tables: kept only when asked (`keep_env`), from
//! exec events and /proc, shared by forked children, replaced by an exec,
//! unknown (empty) after an older schema's exec that carried none.

use harrier_schema::decode::decode;
use harrier_state::testing::{exec, fork, syscall, P};
use harrier_state::{Snapshot, State};

const CHILD: u32 = 4_000_101;
const GRANDCHILD: u32 = 4_000_102;

fn apply(s: &mut State, b: &[u8]) {
    s.apply(&decode(b).expect("test events decode"));
}

fn execve(ts: u64, tid: u32, env: Option<&[u8]>, env_size: usize) -> Vec<u8> {
    let mut p = vec![("args", P::B(b"/bin/true\0")), ("exe", P::B(b"/usr/bin/true")), ("uid", P::I(0))];
    if let Some(e) = env {
        p.push(("env", P::B(e)));
        p.push(("env_size", P::I(env_size as i64)));
    }
    syscall(ts, tid, "execve", 0, &p)
}

fn env_of(s: &State, tid: u32) -> Vec<String> {
    let p = s.process(tid).unwrap_or_else(|| panic!("{tid} is known"));
    p.env().map(|v| String::from_utf8_lossy(v).into_owned()).collect()
}

/// This process seeded from /proc, a child forked and exec'd with `env`.
fn run(keep: bool, env: &[u8]) -> State {
    let me = std::process::id();
    let mut s = State::new();
    s.keep_env = keep;
    s.scan_proc(Some(me));
    apply(&mut s, &fork(1, me, CHILD, CHILD, "sh"));
    apply(&mut s, &exec(2, CHILD, CHILD, "true", ""));
    apply(&mut s, &execve(3, CHILD, Some(env), env.len()));
    s
}

#[test]
fn the_environment_comes_from_the_exec_event_and_is_inherited_on_fork() {
    let mut s = run(true, b"HARRIER_TEST_MARK=xyz\0HOME=/root\0");
    assert_eq!(env_of(&s, CHILD), ["HARRIER_TEST_MARK=xyz", "HOME=/root"]);
    apply(&mut s, &syscall(4, CHILD, "chdir", 0, &[("path", P::B(b"/tmp")), ("cwd", P::B(b"/tmp"))]));
    assert_eq!(env_of(&s, CHILD), ["HARRIER_TEST_MARK=xyz", "HOME=/root"], "a chdir keeps it");
    apply(&mut s, &fork(4, CHILD, GRANDCHILD, GRANDCHILD, "true"));
    assert_eq!(env_of(&s, GRANDCHILD), ["HARRIER_TEST_MARK=xyz", "HOME=/root"], "inherited on fork");
    let (a, b) = (&s.process(CHILD).unwrap().env, &s.process(GRANDCHILD).unwrap().env);
    assert!(std::sync::Arc::ptr_eq(a, b), "a forked child shares its parent's block");
    // Its own exec replaces it; an exec of an older schema (no env) leaves it unknown.
    apply(&mut s, &execve(5, GRANDCHILD, Some(b"ONLY=me\0"), 8));
    assert_eq!(env_of(&s, GRANDCHILD), ["ONLY=me"]);
    apply(&mut s, &execve(6, GRANDCHILD, None, 0));
    assert!(env_of(&s, GRANDCHILD).is_empty(), "no env in the event: none kept");
    assert_eq!(env_of(&s, CHILD), ["HARRIER_TEST_MARK=xyz", "HOME=/root"], "the parent keeps its own");
}

#[test]
fn nothing_is_kept_unless_asked() {
    let s = run(false, b"HARRIER_TEST_MARK=xyz\0");
    assert!(env_of(&s, CHILD).is_empty());
    assert!(s.process(std::process::id()).unwrap().env.is_empty(), "not read from /proc either");
}

#[test]
fn a_cut_block_drops_its_partial_last_variable() {
    let me = std::process::id();
    let mut s = State::new();
    s.keep_env = true;
    s.scan_proc(Some(me));
    apply(&mut s, &fork(1, me, CHILD, CHILD, "sh"));
    apply(&mut s, &execve(2, CHILD, Some(b"A=1\0BIG=vvvv"), 9000));
    assert_eq!(env_of(&s, CHILD), ["A=1"]);
}

#[test]
fn seeding_reads_proc_environ() {
    // This test's own environment, as /proc shows it (whoever started the
    // test: cargo, or the 6.1 guest's runner, which sets no CARGO_* variable).
    let raw = std::fs::read("/proc/self/environ").unwrap();
    let want: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert!(!want.is_empty(), "this process has an environment");
    let mut s = State::new();
    s.keep_env = true;
    s.scan_proc(Some(std::process::id()));
    let env = env_of(&s, std::process::id());
    assert!(s.process(std::process::id()).unwrap().env.len() <= harrier_state::process::ENV_MAX);
    if raw.len() <= harrier_state::process::ENV_MAX {
        assert_eq!(env, want);
    } else {
        // Cut: whole variables only, in order.
        assert!(!env.is_empty() && want.starts_with(&env), "{env:?}");
    }
}

#[test]
fn a_snapshot_carries_the_environment() {
    let s = run(true, b"HARRIER_TEST_MARK=xyz\0");
    let mut s = s;
    let snap: Snapshot = s.snapshot();
    let json = serde_json::to_string(&snap).unwrap();
    let back: Snapshot = serde_json::from_str(&json).unwrap();
    let r = State::from_snapshot(&back);
    assert_eq!(env_of(&r, CHILD), ["HARRIER_TEST_MARK=xyz"]);
}
