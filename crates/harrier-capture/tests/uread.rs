//! Entry copies read through the page tables (bpf/include/uread.h): the
//! same bytes as the helper's wherever the string lies (heap, stack, the end
//! of a page, across one, a huge page, a file's page), nothing read from a
//! kernel address, and a walk the helper disagrees with turns itself off.

mod common;

use common::{bpf_available, bytes, gettid, sys, Captured};
use harrier_capture::uread::{UserReads, WalkState};
use harrier_capture::{parse_syscalls, AttachMode, Config, Session};
use std::cell::RefCell;
use std::rc::Rc;

const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

/// One test at a time: each counts the copies its own thread made.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Captures openat and connect of this process, every walked copy checked
/// against the helper: the events, the choice, the walk's state after the
/// work and the copies checked during it.
fn capture_checked(skew: u64, work: impl FnOnce()) -> (Captured, UserReads, WalkState, u64) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut cfg = Config::new(parse_syscalls("openat,connect").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.attach = AttachMode::PerSyscall;
    cfg.user_read_checks = Some(u64::MAX);
    cfg.user_read_check_skew = skew;
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = events.clone();
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec()))).unwrap();
    let before = s.walk_state().checked();
    work();
    let (reads, state) = (s.user_reads().clone(), s.walk_state());
    s.drain().unwrap();
    let stats = s.stop().unwrap();
    let c = Captured { events: Rc::try_unwrap(events).unwrap().into_inner(), stats };
    (c, reads, state, state.checked() - before)
}

/// An anonymous mapping of `len` bytes, unmapped on drop.
struct Mapping(*mut u8, usize);

impl Mapping {
    fn new(len: usize) -> Mapping {
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap of {len} bytes");
        Mapping(p.cast(), len)
    }

    /// `s` and its NUL written at offset `at`; the string's address.
    fn put(&self, at: usize, s: &[u8]) -> i64 {
        assert!(at + s.len() < self.1);
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), self.0.add(at), s.len());
            *self.0.add(at + s.len()) = 0;
        }
        self.0 as i64 + at as i64
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.0.cast(), self.1) };
    }
}

/// A missing file's path of exactly `len` bytes (the open fails; its event
/// still carries the path as passed).
fn path_of(tag: &str, len: usize) -> Vec<u8> {
    let mut p = format!("/no-such-dir/{tag}-").into_bytes();
    assert!(p.len() <= len);
    p.resize(len, b'x');
    p
}

fn open_at(ptr: i64) -> i64 {
    sys(libc::SYS_openat, &[libc::AT_FDCWD as i64, ptr, libc::O_RDONLY as i64])
}

/// The paths the test's opens carried, in order.
fn opened(c: &Captured) -> Vec<Vec<u8>> {
    c.named(gettid(), "openat").iter().map(|e| bytes(e, "path").to_vec()).collect()
}

/// Where the walk must be on (a kernel with plain loads, run as root), it is.
fn assert_walk_is_used(reads: &UserReads) {
    let cast = harrier_capture::kernel::RDONLY_CAST.present();
    match reads {
        UserReads::Walk { .. } => {}
        UserReads::Helper(why) => {
            assert!(cast == Some(false) && why.contains("bpf_rdonly_cast"), "no walk on this kernel: {why}")
        }
    }
}

#[test]
fn walked_copies_are_the_helpers_wherever_the_string_lies() {
    if !bpf_available() {
        return;
    }
    let pages = Mapping::new(4 * PAGE);
    let huge = Mapping::new(2 * HUGE);
    let huge_at = (huge.0 as usize).next_multiple_of(HUGE) - huge.0 as usize;
    unsafe { libc::madvise(huge.0.add(huge_at).cast(), HUGE, libc::MADV_HUGEPAGE) };
    let file = tempfile_page(&path_of("file", 60));
    let mut want: Vec<Vec<u8>> = Vec::new();
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let peer: std::net::SocketAddr = sink.local_addr().unwrap();
    let sa = sockaddr_of(&peer);
    let udp = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };

    let (c, reads, state, walked) = capture_checked(0, || {
        let heap = std::ffi::CString::new(path_of("heap", 40)).unwrap();
        let stack: [u8; 64] = {
            let mut b = [0u8; 64];
            b[..50].copy_from_slice(&path_of("stack", 50));
            b
        };
        let cases: Vec<(Vec<u8>, i64)> = vec![
            (heap.as_bytes().to_vec(), heap.as_ptr() as i64),
            (stack[..50].to_vec(), stack.as_ptr() as i64),
            (path_of("start", 30), pages.put(PAGE, &path_of("start", 30))),
            // The NUL is the page's last byte; then one that runs into the next page.
            (path_of("end", 45), pages.put(2 * PAGE - 46, &path_of("end", 45))),
            (path_of("across", 45), pages.put(3 * PAGE - 20, &path_of("across", 45))),
            (path_of("huge", 70), huge.put(huge_at + HUGE / 2 + 8, &path_of("huge", 70))),
            (path_of("long", 200), pages.put(3 * PAGE + 100, &path_of("long", 200))),
            (path_of("file", 60), file.0 as i64),
            (Vec::new(), pages.put(2 * PAGE + 8, b"")),
        ];
        for (w, ptr) in cases {
            assert!(open_at(ptr) < 0, "{:?} does not exist", String::from_utf8_lossy(&w));
            want.push(w);
        }
        sys(libc::SYS_connect, &[udp as i64, sa.as_ptr() as i64, sa.len() as i64]);
    });
    unsafe { libc::close(udp) };

    assert_eq!(opened(&c), want, "the paths as passed");
    let e = c.named(gettid(), "connect");
    assert_eq!(e.len(), 1, "one connect");
    assert_eq!(bytes(&e[0], "addr"), &sa[..], "connect's address as passed");
    assert_walk_is_used(&reads);
    if reads.is_walk() {
        // Walked: heap, stack, start, end, huge, file and the address (the
        // others go to the helper), each one checked and agreed with.
        assert!(matches!(state, WalkState::On { .. }), "{state:?}");
        assert_eq!(walked, 7, "copies walked");
    }
}

#[test]
fn a_kernel_address_as_a_path_is_never_read() {
    if !bpf_available() {
        return;
    }
    // Where the kernel's direct map starts without KASLR, and its text.
    let kernel = [0xffff_8880_0000_0000u64 as i64, 0xffff_ffff_8100_0000u64 as i64];
    let (c, reads, _, walked) = capture_checked(0, || {
        for p in kernel {
            assert_eq!(open_at(p), -libc::EFAULT as i64);
        }
    });
    assert_walk_is_used(&reads);
    assert_eq!(opened(&c), vec![Vec::<u8>::new(); 2], "no bytes from kernel addresses");
    assert_eq!(walked, 0, "no walk of a kernel address");
}

#[test]
fn a_walk_the_helper_disagrees_with_turns_itself_off_and_paths_stay_right() {
    if !bpf_available() {
        return;
    }
    let paths: Vec<_> =
        (0..5).map(|i| std::ffi::CString::new(path_of(&format!("off{i}"), 40)).unwrap()).collect();
    // The check reads one byte further on: it always disagrees.
    let (c, reads, state, _) = capture_checked(1, || {
        for p in &paths {
            open_at(p.as_ptr() as i64);
        }
    });
    let want: Vec<Vec<u8>> = paths.iter().map(|p| p.as_bytes().to_vec()).collect();
    assert_eq!(opened(&c), want, "the helper's copies, after the walk turned off");
    assert_walk_is_used(&reads);
    if reads.is_walk() {
        assert_eq!(state, WalkState::Off { checked: 1 }, "off after its first check, walking no more");
    }
}

/// A file's page mapped privately, holding `s` and a NUL at its start.
fn tempfile_page(s: &[u8]) -> Mapping {
    let dir = common::TempDir::new("uread");
    let path = dir.path("page");
    let mut body = s.to_vec();
    body.resize(PAGE, 0);
    std::fs::write(&path, &body).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    // Read once: a page not yet faulted in is not in the page tables.
    assert_eq!(unsafe { *(p as *const u8) }, s[0]);
    Mapping(p.cast(), PAGE)
}

fn sockaddr_of(a: &std::net::SocketAddr) -> Vec<u8> {
    let std::net::SocketAddr::V4(v4) = a else { unreachable!() };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
        sin_zero: [0; 8],
    };
    let b = unsafe { std::slice::from_raw_parts((&sin as *const libc::sockaddr_in).cast::<u8>(), 16) };
    b.to_vec()
}
