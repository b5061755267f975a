//! The benchmarks' two baselines. `Config::empty_programs`: the attach
//! plan's floor links an empty program wherever the session would link one
//! of its own, and nothing else. `Config::entry_copies_only`: the entry
//! programs copy, the rest return at once.

use harrier_capture::testing::bpf_available;
use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use harrier_capture::{dircache, parse_syscalls, Config, Session};
use std::sync::Mutex;

/// One session at a time in this binary: the link census counts every link
/// this process holds, another test's session included.
static ONE_SESSION: Mutex<()> = Mutex::new(());

/// Names of the programs behind the BPF links this process holds.
fn linked_programs() -> Vec<String> {
    let mut names = Vec::new();
    for e in std::fs::read_dir("/proc/self/fdinfo").unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        if !text.contains("link_id:") {
            continue;
        }
        let Some(id) = text.lines().find_map(|l| l.strip_prefix("prog_id:")?.trim().parse::<u32>().ok())
        else {
            continue;
        };
        let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
        assert!(fd >= 0, "program {id} of a held link exists");
        let mut info = libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of_val(&info) as u32;
        assert_eq!(unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) }, 0);
        unsafe { libc::close(fd) };
        names.push(info.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8 as char).collect());
    }
    names.sort();
    names
}

/// Links and events of one session; execveat shares execve's exit
/// tracepoint, openat and connect have entry copies.
fn run(mode: AttachMode, empty: bool) -> (Vec<String>, u64) {
    let mut cfg = Config::new(parse_syscalls("openat,connect,execve,execveat,getpid").unwrap());
    cfg.attach = mode;
    cfg.empty_programs = empty;
    cfg.pid = Some(std::process::id());
    let mut s = Session::start_counting(&cfg).unwrap();
    let links = linked_programs();
    for _ in 0..100 {
        unsafe { libc::syscall(libc::SYS_getpid) };
        drop(std::fs::File::open("/proc/self/stat"));
    }
    s.drain().unwrap();
    let events = s.stop().unwrap().user.events;
    (links, events)
}

#[test]
fn empty_programs_take_every_link_of_the_plan_and_send_nothing() {
    if !bpf_available() {
        return;
    }
    let _one = ONE_SESSION.lock().unwrap_or_else(|e| e.into_inner());
    // One test, both modes in turn: the link census is of this process.
    for mode in [PerSyscall, Dispatcher] {
        let (mut real, real_events) = run(mode, false);
        // The path cache's hooks watch directories change, not the syscalls:
        // the floor has no cache (crate::dircache) and so none of them. (The
        // kernel keeps 15 bytes of a program's name: theirs all start so.)
        assert!(dircache::FENTRY_PROGS
            .iter()
            .chain(&dircache::CTIME_PROGS)
            .all(|n| n.starts_with("hr_tree_")));
        real.retain(|n| !n.starts_with("hr_tree_"));
        let (empty, empty_events) = run(mode, true);
        assert!(real_events >= 200, "{mode}: the real programs report ({real_events} events)");
        assert_eq!(empty_events, 0, "{mode}: empty programs send nothing");
        assert!(real.iter().all(|n| n.starts_with("hr_") && !n.starts_with("hr_empty")), "{mode}: {real:?}");
        assert!(empty.iter().all(|n| n.starts_with("hr_empty_")), "{mode}: only empty programs: {empty:?}");
        assert_eq!(
            empty.len(),
            real.len(),
            "{mode}: one empty link per link of the plan: {real:?} vs {empty:?}"
        );
        // tp_btf programs: the life-cycle ones and the dispatcher.
        let tp_btf = ["hr_fork", "hr_exec", "hr_exit_task", "hr_rename", "hr_dispatch"];
        let btf = real.iter().filter(|n| tp_btf.contains(&n.as_str())).count();
        let empty_btf = empty.iter().filter(|n| *n == "hr_empty_btf").count();
        assert_eq!(empty_btf, btf, "{mode}: tp_btf for tp_btf: {real:?} vs {empty:?}");
        assert!(linked_programs().is_empty(), "{mode}: all detached");
    }
}

/// Per openat of this process: (entry copies made, exits begun, events).
fn openat_steps(copies_only: bool) -> (u64, u64, u64) {
    let mut cfg = Config::new(parse_syscalls("openat").unwrap());
    cfg.entry_copies_only = copies_only;
    cfg.pid = Some(std::process::id());
    cfg.step_clock = Some(libc::SYS_openat as u32);
    let mut s = Session::start_counting(&cfg).unwrap();
    for _ in 0..100 {
        drop(std::fs::File::open("/proc/self/stat"));
    }
    let steps = s.step_sums().unwrap();
    s.drain().unwrap();
    let events = s.stop().unwrap().user.events;
    // steps.h: 9 the entry's copy, 0 the exit's beginning.
    (steps[9].1, steps[0].1, events)
}

#[test]
fn entry_copies_only_copies_at_entry_and_stops_every_exit() {
    if !bpf_available() {
        return;
    }
    let _one = ONE_SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let (copies, exits, events) = openat_steps(false);
    assert!(copies >= 100 && exits >= 100 && events >= 100, "the full handlers: {copies} {exits} {events}");
    let (copies, exits, events) = openat_steps(true);
    assert!(copies >= 100, "entry copies still made: {copies}");
    assert_eq!((exits, events), (0, 0), "exits return once they have the task, nothing sent");
}
