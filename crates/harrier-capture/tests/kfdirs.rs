//! The kernel filter's directory verdicts (bpf/include/kfdirs.h): an open
//! kept or not by its path alone, below a directory no filter path can
//! reach, is kept back where its walk meets that directory in the path
//! cache; everything else is judged as before, and a new filter's verdicts
//! replace the old one's.

mod common;

use common::{bpf_available, gettid, use_mode, Captured};
use harrier_capture::kfilter::{Clause, KernelFilter, PathMatch, SyscallFilter};
use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use harrier_capture::{parse_syscalls, Config, Session};
use std::cell::RefCell;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use test_case::test_case;

/// Opens per file and phase: enough that the cache is met, whatever
/// renames elsewhere on the machine pause it for a moment.
const N: usize = 100;
/// Top directories: one under the first filter, one sharing its first
/// bytes, one the second filter adds.
const TOPS: [&str; 3] = ["keep", "keeper", "other"];

/// Successful opens sent only below these directories.
fn below(dirs: &[PathBuf]) -> KernelFilter {
    let paths = dirs.iter().map(|d| PathMatch::Prefix(format!("{}/", d.display()).into_bytes())).collect();
    let clause = Clause { need_success: true, paths: Some(paths), ..Default::default() };
    let nr = harrier_schema::syscall_by_name("openat").unwrap().nr;
    KernelFilter { syscalls: vec![SyscallFilter { nr, clauses: vec![clause], ..Default::default() }] }
}

fn open_close(p: &Path) {
    let c = CString::new(p.to_str().unwrap()).unwrap();
    let fd = unsafe { libc::openat(libc::AT_FDCWD, c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    assert!(fd >= 0, "open {}", p.display());
    unsafe { libc::close(fd) };
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn opens_below_directories_no_filter_path_reaches_are_kept_back(mode: AttachMode) {
    if !bpf_available() {
        return;
    }
    use_mode(mode);
    let root = std::env::temp_dir().join(format!("harrier-kfdirs-{}-{mode}", std::process::id()));
    let deep = |top: &str| root.join(top).join("a/b/c/d");
    for top in TOPS {
        std::fs::create_dir_all(deep(top)).unwrap();
        std::fs::write(deep(top).join("f1"), "x").unwrap();
        std::fs::write(deep(top).join("f2"), "x").unwrap();
    }
    let mut cfg = Config::new(parse_syscalls("openat").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.attach = mode;
    cfg.kernel_filter = Some(below(&[root.join("keep")]));
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = events.clone();
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec()))).unwrap();
    let tid = gettid();
    // Each directory's opens in a row, so the per-CPU memo of the last clear
    // directory is met; the second phase starts where the first ended, in
    // `other`, which the new filter reaches: a verdict of the old filter
    // must not be reused.
    let phase = |name: &str, order: &[&str]| {
        for top in order {
            (0..N).for_each(|_| open_close(&deep(top).join(name)));
        }
    };
    phase("f1", &TOPS);
    s.drain().unwrap();
    s.replace_kernel_filter(&below(&[root.join("keep"), root.join("other")])).unwrap();
    phase("f2", &["other", "keeper", "keep"]);
    s.drain().unwrap();
    // A directory met clear, then moved below `keep/`: the same directory
    // (the memo's key), a new path (a rename moves the cache's generation).
    let away = root.join("away");
    std::fs::create_dir_all(away.join("a/b")).unwrap();
    std::fs::write(away.join("a/b/f3"), "x").unwrap();
    (0..N).for_each(|_| open_close(&away.join("a/b/f3")));
    let moved = root.join("keep/away");
    std::fs::rename(&away, &moved).unwrap();
    (0..N).for_each(|_| open_close(&moved.join("a/b/f3")));
    s.drain().unwrap();
    let stats = s.stop().unwrap();
    let c = Captured { events: Rc::try_unwrap(events).unwrap().into_inner(), stats };
    std::fs::remove_dir_all(&root).unwrap();

    let opens = c.named(tid, "openat");
    let count = |top: &str, name: &str| {
        let want = deep(top).join(name);
        opens
            .iter()
            .filter(|e| e.param("fullpath").unwrap().as_bytes() == Some(want.as_os_str().as_encoded_bytes()))
            .count()
    };
    let got: Vec<usize> = ["f1", "f2"].iter().flat_map(|n| TOPS.map(|t| count(t, n))).collect();
    assert_eq!(got, [N, 0, 0, N, 0, N], "opens sent of keep, keeper, other: f1 (first filter), f2 (second)");
    let sent = |p: PathBuf| {
        let want = p.into_os_string().into_encoded_bytes();
        opens.iter().filter(|e| e.param("fullpath").unwrap().as_bytes() == Some(&want[..])).count()
    };
    let moved_opens = [sent(away.join("a/b/f3")), sent(moved.join("a/b/f3"))];
    assert_eq!(moved_opens, [0, N], "opens sent of a directory before and after its move below keep/");
    let k = c.stats.kernel_total();
    assert!(k.filtered >= 3 * N as u64, "filtered {}", k.filtered);
    // The cache keeps only paths whose every directory is on a local file
    // system (the guests' root is the host's, over 9p): where it kept these
    // (keep/'s opens hit it), the verdicts must have ended the others' walks.
    if k.dir_hits > 0 {
        assert!(k.dir_clear >= N as u64, "kept back at a directory: {} ({})", k.dir_clear, c.stats.dir_cache);
    } else {
        assert_eq!(k.dir_clear, 0, "no cache entries, no verdicts: {}", c.stats.dir_cache);
    }
}
