//! Every typed file syscall: captured with the right parameters and return
//! value, on success and on failure.
//!
//! Work closures make raw syscalls only (common::sys), so glibc cannot swap in
//! another syscall and std cannot add events of its own; set-up and checks run
//! outside the capture.

mod common;

use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use test_case::test_case;

use common::*;
use libc::{EBADF, EEXIST, EINVAL, ENODEV, ENOENT, EXDEV};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;

/// Never an open descriptor: far above any fd table.
const BADFD: i64 = 1_000_000;
fn fd(f: &File) -> i64 {
    f.as_raw_fd() as i64
}

/// A directory with the file `f` (the given content) in it, and the
/// directory open for the *at() calls.
fn dir_with_file(tag: &str, content: &[u8]) -> (TempDir, File) {
    let d = TempDir::new(tag);
    std::fs::write(d.path("f"), content).unwrap();
    let dirfd = File::open(&d.0).unwrap();
    (d, dirfd)
}

fn open_rw(path: &str) -> File {
    File::options().read(true).write(true).open(path).unwrap()
}

/// 200 recognisable bytes: longer than the default snaplen (80).
fn payload() -> Vec<u8> {
    (0..200u32).map(|i| b'a' + (i % 26) as u8).collect()
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn open_openat_creat_close(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("open");
    let (f, g, missing) = (d.path("f"), d.path("g"), d.path("no/such"));
    let (fc, gc, mc, rel) = (cstr(&f), cstr(&g), cstr(&missing), cstr("f"));
    let wtrunc = (libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) as i64;
    let cloexec = (libc::O_RDONLY | libc::O_CLOEXEC) as i64;
    let mut fds = Vec::new();
    let c = capture("open,openat,creat,close", || {
        fds.push(sys(libc::SYS_open, &[cptr(&fc), wtrunc, 0o640]));
        sys(libc::SYS_open, &[cptr(&mc), 0, 0]);
        fds.push(sys(libc::SYS_openat, &[AT_FDCWD64, cptr(&fc), cloexec, 0]));
        sys(libc::SYS_openat, &[BADFD, cptr(&rel), 0, 0]);
        fds.push(sys(libc::SYS_creat, &[cptr(&gc), 0o600]));
        sys(libc::SYS_creat, &[cptr(&mc), 0o600]);
        for &f in &fds {
            sys(libc::SYS_close, &[f]);
        }
        sys(libc::SYS_close, &[BADFD]);
    });
    assert!(fds.iter().all(|&f| f >= 0), "opens failed: {fds:?}");

    let open = exactly(&c, "open", 2);
    expect(&open[0], fds[0], &[("flags", wtrunc), ("mode", 0o640)]);
    assert_eq!(text(&open[0], "path"), f);
    assert_eq!(names(&open[0], "flags"), "O_WRONLY|O_CREAT|O_TRUNC");
    assert_eq!(names(&open[0], "mode"), "0640");
    expect(&open[1], -ENOENT as i64, &[("flags", 0), ("mode", 0)]);
    assert_eq!(text(&open[1], "path"), missing);

    let openat = exactly(&c, "openat", 2);
    expect(&openat[0], fds[1], &[("dirfd", AT_FDCWD64), ("flags", cloexec), ("mode", 0)]);
    assert_eq!(text(&openat[0], "path"), f);
    assert_eq!(names(&openat[0], "flags"), "O_RDONLY|O_CLOEXEC");
    expect(&openat[1], -EBADF as i64, &[("dirfd", BADFD), ("flags", 0)]);
    assert_eq!(text(&openat[1], "path"), "f");

    let creat = exactly(&c, "creat", 2);
    expect(&creat[0], fds[2], &[("mode", 0o600)]);
    assert_eq!(text(&creat[0], "path"), g);
    expect(&creat[1], -ENOENT as i64, &[("mode", 0o600)]);
    assert_eq!(text(&creat[1], "path"), missing);

    let close = exactly(&c, "close", 4);
    for (e, &f) in close.iter().zip(&fds) {
        expect(e, 0, &[("fd", f)]);
    }
    expect(&close[3], -EBADF as i64, &[("fd", BADFD)]);
}

/// An empty path is a string like any other: its entry copy is kept (6.1's
/// bpf_probe_read_user_str counts an empty string as 0 bytes, not 1).
#[test]
fn openat_of_an_empty_path() {
    if !bpf_available() {
        return;
    }
    let empty = cstr("");
    let c = capture("openat", || {
        sys(libc::SYS_openat, &[AT_FDCWD64, cptr(&empty), 0, 0]);
    });
    let e = exactly(&c, "openat", 1);
    expect(&e[0], -ENOENT as i64, &[("dirfd", AT_FDCWD64), ("flags", 0)]);
    assert_eq!(text(&e[0], "path"), "");
    assert!(!e[0].header.args_at_exit, "the entry copy of \"\" was used");
}

/// struct open_how (linux/openat2.h).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn openat2(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, dirfd) = dir_with_file("openat2", b"");
    let new = d.path("new");
    let (newc, abs) = (cstr(&new), cstr("/etc/hostname"));
    const RESOLVE_NO_SYMLINKS: u64 = 0x04;
    const RESOLVE_BENEATH: u64 = 0x08;
    let create = (libc::O_RDWR | libc::O_CREAT) as u64;
    let ok = OpenHow { flags: create, mode: 0o600, resolve: RESOLVE_NO_SYMLINKS };
    let beneath = OpenHow { flags: 0, mode: 0, resolve: RESOLVE_BENEATH };
    let size = std::mem::size_of::<OpenHow>() as i64;
    let mut fd_ok = 0;
    let c = capture("openat2", || {
        fd_ok = sys(libc::SYS_openat2, &[AT_FDCWD64, cptr(&newc), &ok as *const _ as i64, size]);
        // An absolute path cannot stay beneath dirfd.
        sys(libc::SYS_openat2, &[fd(&dirfd), cptr(&abs), &beneath as *const _ as i64, size]);
    });
    assert!(fd_ok >= 0, "openat2 failed: {fd_ok}");
    sys(libc::SYS_close, &[fd_ok]);

    let e = exactly(&c, "openat2", 2);
    let flags = create as i64;
    expect(&e[0], fd_ok, &[("dirfd", AT_FDCWD64), ("flags", flags), ("mode", 0o600), ("resolve", 4)]);
    assert_eq!(text(&e[0], "path"), new);
    assert_eq!(names(&e[0], "flags"), "O_RDWR|O_CREAT");
    assert_eq!(names(&e[0], "resolve"), "RESOLVE_NO_SYMLINKS");
    expect(&e[1], -EXDEV as i64, &[("dirfd", fd(&dirfd)), ("flags", 0), ("mode", 0), ("resolve", 8)]);
    assert_eq!(text(&e[1], "path"), "/etc/hostname");
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn read_write_pread64_pwrite64(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, _) = dir_with_file("rw", b"");
    let file = open_rw(&d.path("f"));
    let data = payload();
    let mut small = [0u8; 30];
    let mut big = [0u8; 500];
    let (f, buf, bigp) = (fd(&file), small.as_mut_ptr() as i64, big.as_mut_ptr() as i64);
    let c = capture("read,write,pread64,pwrite64", || {
        sys(libc::SYS_write, &[f, data.as_ptr() as i64, 200]);
        sys(libc::SYS_write, &[BADFD, data.as_ptr() as i64, 3]);
        sys(libc::SYS_pwrite64, &[f, b"XYZ".as_ptr() as i64, 3, 300]);
        sys(libc::SYS_pwrite64, &[BADFD, b"XYZ".as_ptr() as i64, 3, 0]);
        sys(libc::SYS_pread64, &[f, buf, 10, 5]);
        sys(libc::SYS_pread64, &[f, buf, 10, -1]);
        sys(libc::SYS_lseek, &[f, 0, libc::SEEK_SET as i64]);
        sys(libc::SYS_read, &[f, buf, 30]);
        // The rest of the 303-byte file: 273 bytes, cut at the snaplen.
        sys(libc::SYS_read, &[f, bigp, 500]);
        sys(libc::SYS_read, &[BADFD, buf, 10]);
    });
    let content = std::fs::read(d.path("f")).unwrap();
    assert_eq!(content.len(), 303);

    let w = exactly(&c, "write", 2);
    expect(&w[0], 200, &[("fd", f), ("size", 200)]);
    assert_eq!(bytes(&w[0], "data"), &data[..80]);
    // write's data is what the caller passed, whatever the outcome.
    expect(&w[1], -EBADF as i64, &[("fd", BADFD), ("size", 3)]);
    assert_eq!(bytes(&w[1], "data"), &data[..3]);

    let pw = exactly(&c, "pwrite64", 2);
    expect(&pw[0], 3, &[("fd", f), ("size", 3), ("pos", 300)]);
    assert_eq!(bytes(&pw[0], "data"), b"XYZ");
    expect(&pw[1], -EBADF as i64, &[("fd", BADFD), ("size", 3), ("pos", 0)]);

    let pr = exactly(&c, "pread64", 2);
    expect(&pr[0], 10, &[("fd", f), ("size", 10), ("pos", 5)]);
    assert_eq!(bytes(&pr[0], "data"), &data[5..15]);
    expect(&pr[1], -EINVAL as i64, &[("fd", f), ("size", 10), ("pos", -1)]);
    assert_eq!(bytes(&pr[1], "data"), b"", "nothing was read");

    let r = exactly(&c, "read", 3);
    expect(&r[0], 30, &[("fd", f), ("size", 30)]);
    assert_eq!(bytes(&r[0], "data"), &data[..30]);
    expect(&r[1], 273, &[("fd", f), ("size", 500)]);
    assert_eq!(bytes(&r[1], "data"), &content[30..110]);
    expect(&r[2], -EBADF as i64, &[("fd", BADFD), ("size", 10)]);
    assert_eq!(bytes(&r[2], "data"), b"");
}

/// An iovec array over `bufs`, for readv/writev.
fn iovecs(bufs: &mut [&mut [u8]]) -> Vec<libc::iovec> {
    bufs.iter_mut().map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() }).collect()
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn readv_writev(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, _) = dir_with_file("rwv", b"");
    let file = open_rw(&d.path("f"));
    let f = fd(&file);
    let (mut a, mut b, mut cc) = (*b"hello ", *b"vectored ", *b"world");
    let (mut long, mut tail) = (payload(), *b"tail");
    let words = iovecs(&mut [&mut a, &mut b, &mut cc]);
    let longv = iovecs(&mut [&mut long, &mut tail]);
    let (mut r4, mut r100) = ([0u8; 4], [0u8; 100]);
    let reads = iovecs(&mut [&mut r4, &mut r100]);
    let (wp, lp, rp) = (words.as_ptr() as i64, longv.as_ptr() as i64, reads.as_ptr() as i64);
    let c = capture("readv,writev", || {
        sys(libc::SYS_writev, &[f, wp, 3]);
        sys(libc::SYS_writev, &[f, lp, 2]);
        sys(libc::SYS_writev, &[BADFD, wp, 3]);
        sys(libc::SYS_lseek, &[f, 0, libc::SEEK_SET as i64]);
        sys(libc::SYS_readv, &[f, rp, 2]);
        // 4 bytes left: data is what was read, not the buffers' size.
        sys(libc::SYS_lseek, &[f, -4, libc::SEEK_END as i64]);
        sys(libc::SYS_readv, &[f, rp, 2]);
        sys(libc::SYS_readv, &[BADFD, rp, 2]);
    });
    let content = std::fs::read(d.path("f")).unwrap();
    assert_eq!(content.len(), 224);

    let w = exactly(&c, "writev", 3);
    expect(&w[0], 20, &[("fd", f), ("iovcnt", 3)]);
    assert_eq!(bytes(&w[0], "data"), b"hello vectored world");
    expect(&w[1], 204, &[("fd", f), ("iovcnt", 2)]);
    assert_eq!(bytes(&w[1], "data"), &payload()[..80]);
    expect(&w[2], -EBADF as i64, &[("fd", BADFD), ("iovcnt", 3)]);
    assert_eq!(bytes(&w[2], "data"), b"hello vectored world", "writev data is the caller's");

    let r = exactly(&c, "readv", 3);
    expect(&r[0], 104, &[("fd", f), ("iovcnt", 2)]);
    assert_eq!(bytes(&r[0], "data"), &content[..80]);
    expect(&r[1], 4, &[("fd", f), ("iovcnt", 2)]);
    assert_eq!(bytes(&r[1], "data"), b"tail");
    expect(&r[2], -EBADF as i64, &[("fd", BADFD), ("iovcnt", 2)]);
    assert_eq!(bytes(&r[2], "data"), b"");
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn dup_dup2_dup3_fcntl(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, _) = dir_with_file("dup", b"x");
    // dup2/dup3 only ever replace `other`, a descriptor this test owns:
    // parallel tests share the fd table.
    let (file, other) = (File::open(d.path("f")).unwrap(), File::open(d.path("f")).unwrap());
    let (f, o) = (fd(&file), fd(&other));
    let cloexec = libc::O_CLOEXEC as i64;
    let (mut dup_fd, mut dupfd_fd) = (0, 0);
    let c = capture("dup,dup2,dup3,fcntl", || {
        dup_fd = sys(libc::SYS_dup, &[f]);
        sys(libc::SYS_dup, &[BADFD]);
        sys(libc::SYS_dup2, &[f, o]);
        sys(libc::SYS_dup2, &[BADFD, o]);
        sys(libc::SYS_dup3, &[f, o, cloexec]);
        sys(libc::SYS_dup3, &[f, f, 0]);
        dupfd_fd = sys(libc::SYS_fcntl, &[f, libc::F_DUPFD_CLOEXEC as i64, 500]);
        sys(libc::SYS_fcntl, &[f, libc::F_GETFD as i64, 0]);
        sys(libc::SYS_fcntl, &[BADFD, libc::F_GETFL as i64, 0]);
    });
    assert!(dup_fd >= 0 && dupfd_fd >= 500, "dup {dup_fd}, F_DUPFD_CLOEXEC {dupfd_fd}");
    sys(libc::SYS_close, &[dup_fd]);
    sys(libc::SYS_close, &[dupfd_fd]);

    let e = exactly(&c, "dup", 2);
    expect(&e[0], dup_fd, &[("oldfd", f)]);
    expect(&e[1], -EBADF as i64, &[("oldfd", BADFD)]);

    let e = exactly(&c, "dup2", 2);
    expect(&e[0], o, &[("oldfd", f), ("newfd", o)]);
    expect(&e[1], -EBADF as i64, &[("oldfd", BADFD), ("newfd", o)]);

    let e = exactly(&c, "dup3", 2);
    expect(&e[0], o, &[("oldfd", f), ("newfd", o), ("flags", cloexec)]);
    assert_eq!(names(&e[0], "flags"), "O_RDONLY|O_CLOEXEC");
    expect(&e[1], -EINVAL as i64, &[("oldfd", f), ("newfd", f), ("flags", 0)]);

    let e = exactly(&c, "fcntl", 3);
    expect(&e[0], dupfd_fd, &[("fd", f), ("cmd", libc::F_DUPFD_CLOEXEC as i64), ("arg", 500)]);
    assert_eq!(names(&e[0], "cmd"), "F_DUPFD_CLOEXEC");
    // std opens with O_CLOEXEC, so F_GETFD says FD_CLOEXEC.
    expect(&e[1], libc::FD_CLOEXEC as i64, &[("fd", f), ("cmd", libc::F_GETFD as i64), ("arg", 0)]);
    expect(&e[2], -EBADF as i64, &[("fd", BADFD), ("cmd", libc::F_GETFL as i64), ("arg", 0)]);
}

/// Asserts `e` has this return value and these path parameters.
fn paths(e: &harrier_schema::decode::SyscallEvent, ret: i64, want: &[(&str, &str)]) {
    assert_eq!(e.ret, ret, "{} ret: {e:?}", e.syscall.name);
    for &(name, path) in want {
        assert_eq!(text(e, name), path, "{} param {name}", e.syscall.name);
    }
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn mkdir_mkdirat_rmdir_unlink_unlinkat(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, dir) = dir_with_file("mkdir", b"");
    let (a, f) = (d.path("a"), d.path("f"));
    let (ac, fc, b, nob) = (cstr(&a), cstr(&f), cstr("b"), cstr("missing/b"));
    let dfd = fd(&dir);
    let c = capture("mkdir,mkdirat,rmdir,unlink,unlinkat", || {
        sys(libc::SYS_mkdir, &[cptr(&ac), 0o750]);
        sys(libc::SYS_mkdir, &[cptr(&ac), 0o750]);
        sys(libc::SYS_mkdirat, &[dfd, cptr(&b), 0o700]);
        sys(libc::SYS_mkdirat, &[dfd, cptr(&nob), 0o700]);
        sys(libc::SYS_rmdir, &[cptr(&ac)]);
        sys(libc::SYS_rmdir, &[cptr(&ac)]);
        sys(libc::SYS_unlink, &[cptr(&fc)]);
        sys(libc::SYS_unlink, &[cptr(&fc)]);
        sys(libc::SYS_unlinkat, &[dfd, cptr(&b), 0]);
        sys(libc::SYS_unlinkat, &[dfd, cptr(&b), libc::AT_REMOVEDIR as i64]);
    });
    let e = exactly(&c, "mkdir", 2);
    expect(&e[0], 0, &[("mode", 0o750)]);
    paths(&e[0], 0, &[("path", &a)]);
    paths(&e[1], -EEXIST as i64, &[("path", &a)]);

    let e = exactly(&c, "mkdirat", 2);
    expect(&e[0], 0, &[("dirfd", dfd), ("mode", 0o700)]);
    paths(&e[0], 0, &[("path", "b")]);
    expect(&e[1], -ENOENT as i64, &[("dirfd", dfd), ("mode", 0o700)]);
    paths(&e[1], -ENOENT as i64, &[("path", "missing/b")]);

    let e = exactly(&c, "rmdir", 2);
    paths(&e[0], 0, &[("path", &a)]);
    paths(&e[1], -ENOENT as i64, &[("path", &a)]);

    let e = exactly(&c, "unlink", 2);
    paths(&e[0], 0, &[("path", &f)]);
    paths(&e[1], -ENOENT as i64, &[("path", &f)]);

    let e = exactly(&c, "unlinkat", 2);
    expect(&e[0], -libc::EISDIR as i64, &[("dirfd", dfd), ("flags", 0)]);
    paths(&e[0], -libc::EISDIR as i64, &[("path", "b")]);
    expect(&e[1], 0, &[("dirfd", dfd), ("flags", libc::AT_REMOVEDIR as i64)]);
    assert_eq!(names(&e[1], "flags"), "AT_REMOVEDIR");
    paths(&e[1], 0, &[("path", "b")]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn rename_renameat_renameat2(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, dir) = dir_with_file("rename", b"");
    std::fs::write(d.path("x"), b"").unwrap();
    let (f, b, z) = (d.path("f"), d.path("b"), d.path("z"));
    let (fc, bc, zc) = (cstr(&f), cstr(&b), cstr(&z));
    let (rb, rc, rx, re, nope) = (cstr("b"), cstr("c"), cstr("x"), cstr("e"), cstr("nope"));
    let dfd = fd(&dir);
    const RENAME_NOREPLACE: i64 = 1;
    let c = capture("rename,renameat,renameat2", || {
        sys(libc::SYS_rename, &[cptr(&fc), cptr(&bc)]);
        sys(libc::SYS_rename, &[cptr(&fc), cptr(&zc)]);
        sys(libc::SYS_renameat, &[dfd, cptr(&rb), dfd, cptr(&rc)]);
        sys(libc::SYS_renameat, &[dfd, cptr(&nope), AT_FDCWD64, cptr(&zc)]);
        sys(libc::SYS_renameat2, &[dfd, cptr(&rc), dfd, cptr(&rx), RENAME_NOREPLACE]);
        sys(libc::SYS_renameat2, &[dfd, cptr(&rc), dfd, cptr(&re), RENAME_NOREPLACE]);
    });
    assert!(std::fs::metadata(d.path("e")).is_ok(), "f ended up as e");

    let e = exactly(&c, "rename", 2);
    paths(&e[0], 0, &[("oldpath", &f), ("newpath", &b)]);
    paths(&e[1], -ENOENT as i64, &[("oldpath", &f), ("newpath", &z)]);

    let e = exactly(&c, "renameat", 2);
    expect(&e[0], 0, &[("olddirfd", dfd), ("newdirfd", dfd)]);
    paths(&e[0], 0, &[("oldpath", "b"), ("newpath", "c")]);
    expect(&e[1], -ENOENT as i64, &[("olddirfd", dfd), ("newdirfd", AT_FDCWD64)]);
    paths(&e[1], -ENOENT as i64, &[("oldpath", "nope"), ("newpath", &z)]);

    let e = exactly(&c, "renameat2", 2);
    let ints = [("olddirfd", dfd), ("newdirfd", dfd), ("flags", RENAME_NOREPLACE)];
    expect(&e[0], -EEXIST as i64, &ints);
    paths(&e[0], -EEXIST as i64, &[("oldpath", "c"), ("newpath", "x")]);
    assert_eq!(names(&e[0], "flags"), "RENAME_NOREPLACE");
    expect(&e[1], 0, &ints);
    paths(&e[1], 0, &[("oldpath", "c"), ("newpath", "e")]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn link_linkat_symlink_symlinkat(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, dir) = dir_with_file("link", b"");
    let (f, h, h3, s, missing) = (d.path("f"), d.path("h"), d.path("h3"), d.path("s"), d.path("missing"));
    let (fc, hc, h3c, sc, mc) = (cstr(&f), cstr(&h), cstr(&h3), cstr(&s), cstr(&missing));
    let (rf, rh, rs2, rnos, target) =
        (cstr("f"), cstr("h"), cstr("s2"), cstr("no/s3"), cstr("/no/such/target"));
    let dfd = fd(&dir);
    const AT_SYMLINK_FOLLOW: i64 = libc::AT_SYMLINK_FOLLOW as i64;
    let c = capture("link,linkat,symlink,symlinkat", || {
        sys(libc::SYS_link, &[cptr(&fc), cptr(&hc)]);
        sys(libc::SYS_link, &[cptr(&mc), cptr(&hc)]);
        sys(libc::SYS_linkat, &[dfd, cptr(&rf), AT_FDCWD64, cptr(&h3c), AT_SYMLINK_FOLLOW]);
        sys(libc::SYS_linkat, &[dfd, cptr(&rf), dfd, cptr(&rh), 0]);
        sys(libc::SYS_symlink, &[cptr(&rf), cptr(&sc)]);
        sys(libc::SYS_symlink, &[cptr(&rf), cptr(&sc)]);
        sys(libc::SYS_symlinkat, &[cptr(&target), dfd, cptr(&rs2)]);
        sys(libc::SYS_symlinkat, &[cptr(&target), dfd, cptr(&rnos)]);
    });
    assert_eq!(std::fs::read_link(d.path("s2")).unwrap().to_str(), Some("/no/such/target"));

    let e = exactly(&c, "link", 2);
    paths(&e[0], 0, &[("oldpath", &f), ("newpath", &h)]);
    paths(&e[1], -ENOENT as i64, &[("oldpath", &missing), ("newpath", &h)]);

    let e = exactly(&c, "linkat", 2);
    expect(&e[0], 0, &[("olddirfd", dfd), ("newdirfd", AT_FDCWD64), ("flags", AT_SYMLINK_FOLLOW)]);
    assert_eq!(names(&e[0], "flags"), "AT_SYMLINK_FOLLOW");
    paths(&e[0], 0, &[("oldpath", "f"), ("newpath", &h3)]);
    expect(&e[1], -EEXIST as i64, &[("olddirfd", dfd), ("newdirfd", dfd), ("flags", 0)]);
    paths(&e[1], -EEXIST as i64, &[("oldpath", "f"), ("newpath", "h")]);

    let e = exactly(&c, "symlink", 2);
    paths(&e[0], 0, &[("target", "f"), ("linkpath", &s)]);
    paths(&e[1], -EEXIST as i64, &[("target", "f"), ("linkpath", &s)]);

    let e = exactly(&c, "symlinkat", 2);
    expect(&e[0], 0, &[("newdirfd", dfd)]);
    paths(&e[0], 0, &[("target", "/no/such/target"), ("linkpath", "s2")]);
    expect(&e[1], -ENOENT as i64, &[("newdirfd", dfd)]);
    paths(&e[1], -ENOENT as i64, &[("target", "/no/such/target"), ("linkpath", "no/s3")]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn chmod_fchmod_fchmodat(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, dir) = dir_with_file("chmod", b"");
    let (f, missing) = (d.path("f"), d.path("missing"));
    let (fc, mc, rf, rm) = (cstr(&f), cstr(&missing), cstr("f"), cstr("missing"));
    let file = File::open(&f).unwrap();
    let (dfd, ffd) = (fd(&dir), fd(&file));
    let c = capture("chmod,fchmod,fchmodat", || {
        sys(libc::SYS_chmod, &[cptr(&fc), 0o640]);
        sys(libc::SYS_chmod, &[cptr(&mc), 0o640]);
        sys(libc::SYS_fchmod, &[ffd, 0o4711]);
        sys(libc::SYS_fchmod, &[BADFD, 0o600]);
        sys(libc::SYS_fchmodat, &[dfd, cptr(&rf), 0o644]);
        sys(libc::SYS_fchmodat, &[dfd, cptr(&rm), 0o644]);
    });
    let e = exactly(&c, "chmod", 2);
    expect(&e[0], 0, &[("mode", 0o640)]);
    paths(&e[0], 0, &[("path", &f)]);
    expect(&e[1], -ENOENT as i64, &[("mode", 0o640)]);
    paths(&e[1], -ENOENT as i64, &[("path", &missing)]);

    let e = exactly(&c, "fchmod", 2);
    expect(&e[0], 0, &[("fd", ffd), ("mode", 0o4711)]);
    assert_eq!(names(&e[0], "mode"), "04711");
    expect(&e[1], -EBADF as i64, &[("fd", BADFD), ("mode", 0o600)]);

    let e = exactly(&c, "fchmodat", 2);
    expect(&e[0], 0, &[("dirfd", dfd), ("mode", 0o644)]);
    paths(&e[0], 0, &[("path", "f")]);
    expect(&e[1], -ENOENT as i64, &[("dirfd", dfd), ("mode", 0o644)]);
    paths(&e[1], -ENOENT as i64, &[("path", "missing")]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn chown_fchown_fchownat_lchown(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, dir) = dir_with_file("chown", b"");
    std::os::unix::fs::symlink("f", d.path("s")).unwrap();
    let (f, s, missing) = (d.path("f"), d.path("s"), d.path("missing"));
    let (fc, sc, mc, rs, rm) = (cstr(&f), cstr(&s), cstr(&missing), cstr("s"), cstr("missing"));
    let file = File::open(&f).unwrap();
    let (dfd, ffd) = (fd(&dir), fd(&file));
    let nofollow = libc::AT_SYMLINK_NOFOLLOW as i64;
    let c = capture("chown,fchown,fchownat,lchown", || {
        sys(libc::SYS_chown, &[cptr(&fc), 1234, 5678]);
        sys(libc::SYS_chown, &[cptr(&mc), 1, 1]);
        sys(libc::SYS_fchown, &[ffd, 42, 43]);
        sys(libc::SYS_fchown, &[BADFD, 0, 0]);
        sys(libc::SYS_fchownat, &[dfd, cptr(&rs), 7, 8, nofollow]);
        // -1: "leave unchanged", seen as the u32 it is.
        sys(libc::SYS_fchownat, &[dfd, cptr(&rm), -1, 8, 0]);
        sys(libc::SYS_lchown, &[cptr(&sc), 11, 12]);
        sys(libc::SYS_lchown, &[cptr(&mc), 11, 12]);
    });
    use std::os::unix::fs::MetadataExt;
    let link = std::fs::symlink_metadata(&s).unwrap();
    assert_eq!((link.uid(), link.gid()), (11, 12));

    let e = exactly(&c, "chown", 2);
    expect(&e[0], 0, &[("uid", 1234), ("gid", 5678)]);
    paths(&e[0], 0, &[("path", &f)]);
    expect(&e[1], -ENOENT as i64, &[("uid", 1), ("gid", 1)]);
    paths(&e[1], -ENOENT as i64, &[("path", &missing)]);

    let e = exactly(&c, "fchown", 2);
    expect(&e[0], 0, &[("fd", ffd), ("uid", 42), ("gid", 43)]);
    expect(&e[1], -EBADF as i64, &[("fd", BADFD), ("uid", 0), ("gid", 0)]);

    let e = exactly(&c, "fchownat", 2);
    expect(&e[0], 0, &[("dirfd", dfd), ("uid", 7), ("gid", 8), ("flags", nofollow)]);
    assert_eq!(names(&e[0], "flags"), "AT_SYMLINK_NOFOLLOW");
    paths(&e[0], 0, &[("path", "s")]);
    expect(&e[1], -ENOENT as i64, &[("dirfd", dfd), ("uid", u32::MAX as i64), ("gid", 8), ("flags", 0)]);
    paths(&e[1], -ENOENT as i64, &[("path", "missing")]);

    let e = exactly(&c, "lchown", 2);
    expect(&e[0], 0, &[("uid", 11), ("gid", 12)]);
    paths(&e[0], 0, &[("path", &s)]);
    expect(&e[1], -ENOENT as i64, &[("uid", 11), ("gid", 12)]);
    paths(&e[1], -ENOENT as i64, &[("path", &missing)]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn truncate_ftruncate(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (d, _) = dir_with_file("trunc", &payload());
    let (f, missing) = (d.path("f"), d.path("missing"));
    let (fc, mc) = (cstr(&f), cstr(&missing));
    let file = open_rw(&f);
    let ffd = fd(&file);
    let c = capture("truncate,ftruncate", || {
        sys(libc::SYS_truncate, &[cptr(&fc), 10]);
        sys(libc::SYS_truncate, &[cptr(&mc), 10]);
        sys(libc::SYS_ftruncate, &[ffd, 3]);
        sys(libc::SYS_ftruncate, &[ffd, -1]);
    });
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 3);

    let e = exactly(&c, "truncate", 2);
    expect(&e[0], 0, &[("length", 10)]);
    paths(&e[0], 0, &[("path", &f)]);
    expect(&e[1], -ENOENT as i64, &[("length", 10)]);
    paths(&e[1], -ENOENT as i64, &[("path", &missing)]);

    let e = exactly(&c, "ftruncate", 2);
    expect(&e[0], 0, &[("fd", ffd), ("length", 3)]);
    expect(&e[1], -EINVAL as i64, &[("fd", ffd), ("length", -1)]);
}

/// Unmounts (lazily) whatever is still mounted at the path when dropped, so a
/// failed assertion never leaves a tmpfs behind.
struct Unmount(CString);

impl Drop for Unmount {
    fn drop(&mut self) {
        unsafe { libc::umount2(self.0.as_ptr(), libc::MNT_DETACH) };
    }
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn mount_umount2(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("mount");
    let m = d.path("m");
    std::fs::create_dir(&m).unwrap();
    let guard = Unmount(cstr(&m));
    let (src, tmpfs, bogus, opts) =
        (cstr("harrier-src"), cstr("tmpfs"), cstr("harrier-nosuchfs"), cstr("size=1m"));
    let flags = (libc::MS_NOSUID | libc::MS_NODEV) as i64;
    let mp = cptr(&guard.0);
    let c = capture("mount,umount2", || {
        sys(libc::SYS_mount, &[cptr(&src), mp, cptr(&tmpfs), flags, cptr(&opts)]);
        sys(libc::SYS_umount2, &[mp, 0]);
        sys(libc::SYS_mount, &[cptr(&src), mp, cptr(&bogus), 0, 0]);
        sys(libc::SYS_umount2, &[mp, libc::MNT_DETACH as i64]);
    });
    drop(guard);

    let e = exactly(&c, "mount", 2);
    expect(&e[0], 0, &[("flags", flags)]);
    assert_eq!(names(&e[0], "flags"), "MS_NOSUID|MS_NODEV");
    paths(&e[0], 0, &[("source", "harrier-src"), ("target", &m), ("fstype", "tmpfs")]);
    expect(&e[1], -ENODEV as i64, &[("flags", 0)]);
    paths(
        &e[1],
        -ENODEV as i64,
        &[("source", "harrier-src"), ("target", &m), ("fstype", "harrier-nosuchfs")],
    );

    let e = exactly(&c, "umount2", 2);
    expect(&e[0], 0, &[("flags", 0)]);
    paths(&e[0], 0, &[("target", &m)]);
    // Nothing is mounted there any more.
    expect(&e[1], -EINVAL as i64, &[("flags", libc::MNT_DETACH as i64)]);
    assert_eq!(names(&e[1], "flags"), "MNT_DETACH");
    paths(&e[1], -EINVAL as i64, &[("target", &m)]);
}

/// Puts the process's working directory back when dropped (it is shared by
/// every test thread; the other tests use absolute or dirfd-relative paths).
struct RestoreCwd(File);

impl Drop for RestoreCwd {
    fn drop(&mut self) {
        unsafe { libc::fchdir(self.0.as_raw_fd()) };
    }
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn chdir_fchdir(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let d = TempDir::new("chdir");
    let (dc, mc) = (cstr(d.0.to_str().unwrap()), cstr(&d.path("missing")));
    let orig = RestoreCwd(File::open(".").unwrap());
    let ofd = fd(&orig.0);
    let mut cwd_inside = None;
    let c = capture("chdir,fchdir", || {
        sys(libc::SYS_chdir, &[cptr(&dc)]);
        cwd_inside = std::env::current_dir().ok();
        sys(libc::SYS_chdir, &[cptr(&mc)]);
        sys(libc::SYS_fchdir, &[ofd]);
        sys(libc::SYS_fchdir, &[BADFD]);
    });
    assert_eq!(cwd_inside.as_deref(), Some(d.0.as_path()));
    drop(orig);

    let e = exactly(&c, "chdir", 2);
    paths(&e[0], 0, &[("path", d.0.to_str().unwrap())]);
    paths(&e[1], -ENOENT as i64, &[("path", &d.path("missing"))]);

    let e = exactly(&c, "fchdir", 2);
    expect(&e[0], 0, &[("fd", ofd)]);
    expect(&e[1], -EBADF as i64, &[("fd", BADFD)]);
}
