//! An open's `fullpath`: the kernel's own name for what was opened, walked
//! up its dentry tree (dpath.h), whatever the path argument said.
//!
//! Work closures make raw syscalls only (common::sys); set-up and checks run
//! outside the capture.

mod common;

use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use test_case::test_case;

use common::*;
use std::ffi::CString;

/// Each file opened (a raw read-only openat) and closed, under capture.
fn capture_opens(files: &[String]) -> Captured {
    let paths: Vec<CString> = files.iter().map(|f| cstr(f)).collect();
    capture("openat", || {
        for p in &paths {
            let fd = sys(libc::SYS_openat, &[AT_FDCWD64, cptr(p), 0, 0]);
            assert!(fd >= 0, "open {p:?}: {fd}");
            unsafe { libc::close(fd as i32) };
        }
    })
}

/// Names of every length the walk copies differently: short names kept in
/// the dentry itself, long ones kept apart (40 bytes and more), those the
/// kernel's plain loads copy (up to 16, 32 and 64 in two, four and eight
/// words) and those a helper copies (past 64, up to NAME_MAX), nested so
/// each sits below the others.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn every_name_length_is_walked_whole(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("names");
    let mut dir = d.0.clone();
    let mut files = Vec::new();
    for (i, len) in
        [1usize, 7, 8, 15, 16, 17, 31, 32, 33, 39, 40, 41, 63, 64, 65, 200, 255].into_iter().enumerate()
    {
        let name: String = (0..len).map(|k| (b'a' + ((i + k) % 26) as u8) as char).collect();
        dir.push(&name);
        std::fs::create_dir(&dir).unwrap();
        let f = dir.join(&name[..len.min(9)]);
        std::fs::write(&f, "x").unwrap();
        files.push(f.to_str().unwrap().to_string());
    }
    let c = capture_opens(&files);
    let e = exactly(&c, "openat", files.len());
    for (ev, f) in e.iter().zip(&files) {
        assert_eq!(text(ev, "fullpath"), *f, "{} bytes deep", f.len());
    }
}

/// Whole paths of every length where a copy changes hands: the entry copy's
/// stack buffer (47 bytes and a NUL), the record's plain-store copies of the
/// walked path (64) and of the entry copy (128), the small stash's brim
/// (247). Both the path as passed and the kernel's must arrive whole.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn every_path_length_is_copied_whole(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::under(std::path::Path::new("/tmp"), "plen");
    let base = d.0.to_str().unwrap().to_string();
    let lens = [46usize, 47, 48, 49, 63, 64, 65, 127, 128, 129, 246, 247, 248];
    assert!(base.len() + 2 <= lens[0], "the temporary folder {base} is too deep for this test");
    let files: Vec<String> = lens
        .iter()
        .map(|&len| {
            let f = format!("{base}/{}", "n".repeat(len - base.len() - 1));
            std::fs::write(&f, "x").unwrap();
            f
        })
        .collect();
    let c = capture_opens(&files);
    let e = exactly(&c, "openat", files.len());
    for (ev, f) in e.iter().zip(&files) {
        assert_eq!(text(ev, "path"), *f, "the path as passed, {} bytes", f.len());
        assert_eq!(text(ev, "fullpath"), *f, "the kernel's path, {} bytes", f.len());
    }
}

/// An open's `fullpath` is the file as the opening task sees it, as
/// /proc/PID/fd shows it: a chrooted thread's file is named from its own
/// root, the same file opened from outside by its whole path.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn a_chrooted_thread_opens_from_its_own_root(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("chroot");
    std::fs::create_dir(d.path("etc")).unwrap();
    std::fs::write(d.path("etc/f"), "x").unwrap();
    let (outer, jail) = (cstr(&d.path("etc/f")), cstr(d.0.to_str().unwrap()));
    let inner = cstr("/etc/f");
    let seen_inside = std::sync::Mutex::new(None);
    let c = capture("openat", || {
        sys(libc::SYS_openat, &[AT_FDCWD64, cptr(&outer), 0, 0]);
        std::thread::scope(|s| {
            s.spawn(|| unsafe {
                // This thread only: its own root (the process keeps "/").
                assert_eq!(libc::unshare(libc::CLONE_FS), 0, "unshare(CLONE_FS)");
                assert_eq!(libc::chroot(jail.as_ptr()), 0, "chroot");
                assert_eq!(libc::chdir(c"/".as_ptr()), 0, "chdir");
                let fd = sys(libc::SYS_openat, &[AT_FDCWD64, cptr(&inner), 0, 0]);
                *seen_inside.lock().unwrap() = Some((gettid(), fd));
            });
        });
    });
    let (tid, fd) = seen_inside.into_inner().unwrap().expect("the chrooted thread ran");
    assert!(fd >= 0, "the chrooted open failed: {fd}");
    let outside = exactly(&c, "openat", 1);
    assert_eq!(text(&outside[0], "fullpath"), d.path("etc/f"));
    // A new thread's first malloc may make a glibc arena, which opens
    // /sys/devices/system/cpu/online (when the other arenas are busy): not
    // the thread's doing.
    let mut inside = named_in_order(&c, tid, "openat");
    inside.retain(|e| text(e, "path") != "/sys/devices/system/cpu/online");
    assert_eq!(inside.len(), 1, "one open from the chrooted thread: {inside:?}");
    assert_eq!(text(&inside[0], "fullpath"), "/etc/f", "named from the thread's root");
}

/// A pipe reopened through /proc/self/fd (make's and cargo's jobservers do
/// this): its `fullpath` is what /proc names it, "pipe:[inode]", not "/".
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn a_pipe_reopened_through_proc_is_named_as_proc_names_it(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut p = [0i32; 2];
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    let via = cstr(&format!("/proc/self/fd/{}", p[0]));
    let c = capture("openat", || {
        let fd = sys(
            libc::SYS_openat,
            &[AT_FDCWD64, cptr(&via), libc::O_RDONLY as i64 | libc::O_NONBLOCK as i64, 0],
        );
        assert!(fd >= 0, "reopening the pipe: {fd}");
        unsafe { libc::close(fd as i32) };
    });
    let proc_name = std::fs::read_link(format!("/proc/self/fd/{}", p[0])).unwrap();
    unsafe { (libc::close(p[0]), libc::close(p[1])) };
    let e = exactly(&c, "openat", 1);
    assert!(proc_name.to_str().unwrap().starts_with("pipe:["), "{proc_name:?}");
    assert_eq!(text(&e[0], "fullpath"), proc_name.to_str().unwrap());
}
