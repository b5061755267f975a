//! The current task read from its per-CPU slot (bpf/include/current.h): on
//! every CPU each event names the thread that made the syscall, the slot's
//! reads are checked against the helper's first, and a slot the helper
//! disagrees with turns itself off while events stay right.

mod common;

use common::{bpf_available, bytes, Captured};
use harrier_capture::current::{CurrentReads, CurrentState};
use harrier_capture::{parse_syscalls, AttachMode, Config, Session};
use harrier_schema::decode::Event;
use std::cell::RefCell;
use std::rc::Rc;
use test_case::test_case;

/// One test at a time: each reads the programs' shared check counters.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Reads per CPU checked before the slot is used (current.h's cur_check_limit).
const CHECKS_PER_CPU: u64 = 16;

/// Opens per thread: past every CPU's checks, whatever else runs there.
const OPENS: usize = 200;

fn ncpus() -> usize {
    std::thread::available_parallelism().unwrap().get()
}

/// A thread pinned to each CPU opens paths naming it; the events, the
/// choice, the state after the work, and each thread's (tid, path prefix).
fn capture_on_every_cpu(
    mode: AttachMode,
    skew: u64,
) -> (Captured, CurrentReads, CurrentState, Vec<(u32, String)>) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut cfg = Config::new(parse_syscalls("openat").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.attach = mode;
    cfg.current_check_skew = skew;
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = events.clone();
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec()))).unwrap();
    let threads: Vec<_> = (0..ncpus())
        .map(|cpu| {
            std::thread::spawn(move || {
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                unsafe { libc::CPU_SET(cpu, &mut set) };
                let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
                assert_eq!(rc, 0, "pinned to CPU {cpu}");
                let prefix = format!("/harrier-current-test/cpu{cpu}-");
                for i in 0..OPENS {
                    let _ = std::fs::File::open(format!("{prefix}{i}"));
                }
                (common::gettid(), prefix)
            })
        })
        .collect();
    let threads: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let (reads, state) = (s.current_reads().clone(), s.current_state());
    s.drain().unwrap();
    let stats = s.stop().unwrap();
    (Captured { events: Rc::try_unwrap(events).unwrap().into_inner(), stats }, reads, state, threads)
}

/// Every open of every thread was sent, under that thread's id.
fn assert_each_event_names_its_thread(c: &Captured, threads: &[(u32, String)]) {
    let opens: Vec<(u32, String)> = c
        .all()
        .into_iter()
        .filter_map(|e| match e {
            Event::Syscall(e) if e.syscall.name == "openat" => {
                Some((e.header.tid, String::from_utf8_lossy(bytes(&e, "path")).into_owned()))
            }
            _ => None,
        })
        .collect();
    for (tid, prefix) in threads {
        let mine: Vec<&(u32, String)> =
            opens.iter().filter(|(_, p)| p.starts_with(prefix.as_str())).collect();
        assert_eq!(mine.len(), OPENS, "every open of {prefix} sent");
        for (t, p) in mine {
            assert_eq!(t, tid, "{p} was opened by thread {tid}");
        }
    }
}

/// Where the slot must be found (a kernel with plain loads and the
/// inlined CPU number: 6.10+), it is; 6.1 says why not.
fn assert_slot_is_used(reads: &CurrentReads) {
    let cast = harrier_capture::kernel::RDONLY_CAST.present();
    match reads {
        CurrentReads::Slot(a) => assert!(*a >= 0xffff_8000_0000_0000 || *a < 1 << 32, "{a:#x}"),
        CurrentReads::Helper(why) => {
            assert!(cast == Some(false) && why.contains("bpf_rdonly_cast"), "no slot on this kernel: {why}")
        }
    }
}

#[test_case(AttachMode::PerSyscall ; "per_syscall")]
#[test_case(AttachMode::Dispatcher ; "dispatcher")]
fn on_every_cpu_the_slot_reads_the_thread_that_made_the_syscall(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    let (c, reads, state, threads) = capture_on_every_cpu(mode, 0);
    assert_slot_is_used(&reads);
    assert_each_event_names_its_thread(&c, &threads);
    if let CurrentReads::Slot(_) = reads {
        // Each CPU checks its first reads, then uses the slot: no more checks.
        let most = CHECKS_PER_CPU * ncpus() as u64;
        assert!(
            matches!(state, CurrentState::On { checked } if (CHECKS_PER_CPU..=most).contains(&checked)),
            "{state:?}"
        );
        assert!(c.stats.current_task.contains(": on, "), "{}", c.stats.current_task);
    }
}

#[test]
fn a_slot_the_helper_disagrees_with_turns_itself_off_and_events_stay_right() {
    if !bpf_available() {
        return;
    }
    let (c, reads, state, threads) = capture_on_every_cpu(AttachMode::PerSyscall, 8);
    assert_slot_is_used(&reads);
    assert_each_event_names_its_thread(&c, &threads);
    if let CurrentReads::Slot(_) = reads {
        // The first check fails; a CPU that read the state before it was
        // written may make one more.
        assert!(
            matches!(state, CurrentState::Off { checked } if (1..=ncpus() as u64).contains(&checked)),
            "{state:?}"
        );
    }
}
