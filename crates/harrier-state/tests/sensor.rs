//! The state engine fed by the real sensor (root): a child that forks and
//! execs, this process's descriptors, and /proc seeding of what existed
//! before the sensor attached.

use harrier_capture::testing::bpf_available;
use harrier_capture::{parse_syscalls, Config, Session};
use harrier_schema::decode::decode;
use harrier_state::{FdType, State, L4};
use std::cell::RefCell;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::rc::Rc;

const SYSCALLS: &str =
    "execve,execveat,openat,close,dup,dup2,dup3,fcntl,pipe2,socket,connect,accept4,bind,chdir";

/// Starts the sensor for every process, seeds a State from /proc, runs
/// `work`, then applies everything the sensor saw (exits stay visible: no
/// batch is ended).
fn observe(work: impl FnOnce()) -> State {
    // One at a time: the tests share this process's fd table and numbers.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let events = Rc::new(RefCell::new(Vec::<Vec<u8>>::new()));
    let sink = events.clone();
    let cfg = Config::new(parse_syscalls(SYSCALLS).unwrap());
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec())))
        .expect("the sensor starts");
    let mut state = State::new();
    state.scan_proc(None);
    work();
    s.drain().unwrap();
    let stats = s.stop().expect("the sensor stops");
    assert_eq!(stats.total_drops(), 0, "no drops");
    for b in events.borrow().iter() {
        state.apply(&decode(b).expect("sensor events decode"));
    }
    state
}

/// Removed with its contents when dropped, also when an assertion fails.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn gettid() -> u32 {
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

#[test]
fn a_forked_child_that_execs_is_tracked_with_its_parent() {
    if !bpf_available() {
        return;
    }
    let me = std::process::id();
    let mut child_pid = 0;
    let state = observe(|| {
        let mut c = std::process::Command::new("/usr/bin/true");
        c.args(["state-test", "arg two"]).current_dir("/tmp").uid(65534).gid(65534);
        let mut child = c.spawn().expect("spawn /usr/bin/true");
        child_pid = child.id();
        assert!(child.wait().unwrap().success());
    });
    let p = state.process_by_pid(child_pid).unwrap_or_else(|| panic!("child {child_pid} not in the table"));
    assert_eq!(p.ppid, me, "ppid");
    assert_eq!(p.name(), "true");
    assert_eq!(&*p.exepath, "/usr/bin/true");
    assert_eq!(&*p.exe, "/usr/bin/true", "argv[0]");
    assert_eq!(p.args().collect::<Vec<_>>(), ["state-test", "arg two"]);
    assert_eq!(&*p.cwd, "/tmp");
    assert_eq!((p.uid, p.euid, p.gid), (65534, 65534, 65534));
    assert_eq!(p.cap_effective, 0, "a non-root exec has no effective capabilities");
    assert!(p.exe_mtime > 0 && p.exe_ctime > 0, "exe inode times");
    assert_eq!(p.vpid, child_pid, "same pid namespace");
    let parent = state.process_by_pid(me).unwrap();
    let first = state.ancestors(child_pid).next().expect("an ancestor");
    assert_eq!((first.pid, first.name()), (me, parent.name()));
    assert!(state.ancestors(child_pid).count() >= 2, "the chain goes above the test");
    let mut users = harrier_state::Users::default();
    assert_eq!(&*users.user(p.uid).expect("uid 65534 resolves").name, "nobody");
}

#[test]
fn this_process_fds_are_tracked_through_open_dup_pipe_connect_and_accept() {
    if !bpf_available() {
        return;
    }
    let me = std::process::id();
    let dir = TempDir(std::env::temp_dir().join(format!("harrier-state-fds-{me}-{}", gettid())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("f");
    let mut held = Vec::new();
    let (mut fd, mut dupped, mut closed, mut pipe, mut conn, mut acc) = (0, 0, 0, [0; 2], 0, 0);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = observe(|| {
        let f = std::fs::File::create(&file).unwrap();
        fd = f.as_raw_fd();
        dupped = unsafe { libc::dup(fd) };
        assert_eq!(unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        conn = c.as_raw_fd();
        let (a, _) = listener.accept().unwrap();
        acc = a.as_raw_fd();
        held.push(f);
        held.push(std::fs::File::from(std::os::fd::OwnedFd::from(c)));
        held.push(std::fs::File::from(std::os::fd::OwnedFd::from(a)));
        // Last, so that no later open reuses its number.
        let tmp = std::fs::File::open("/etc/hostname").unwrap();
        closed = tmp.as_raw_fd();
        drop(tmp);
    });
    let tid = gettid();
    let name = |fd: i32| state.fd(tid, fd).map(|f| f.name.to_string());
    let path = file.to_str().unwrap().to_string();
    assert_eq!(name(fd).as_deref(), Some(path.as_str()), "opened file");
    assert_eq!(name(dupped).as_deref(), Some(path.as_str()), "dup");
    assert!(state.fd(tid, dupped).is_some_and(|f| !f.cloexec), "dup clears close-on-exec");
    assert_eq!(state.fd(tid, closed).map(|f| f.typ), None, "closed");
    let p0 = state.fd(tid, pipe[0]).expect("pipe read end");
    assert!(p0.typ == FdType::Pipe && p0.cloexec);
    let c = state.fd(me, conn).expect("connected socket");
    let t = c.tuple.as_ref().unwrap();
    assert_eq!((c.typ, t.l4, t.dport), (FdType::Ipv4, L4::Tcp, port));
    assert!(t.sport != 0, "the kernel's local port");
    assert_eq!(&*c.name, format!("127.0.0.1:{}->127.0.0.1:{port}", t.sport));
    let a = state.fd(me, acc).expect("accepted socket");
    let at = a.tuple.as_ref().unwrap();
    assert_eq!(
        (at.sport, at.dport, at.l4),
        (port, t.sport, L4::Tcp),
        "accept: local and peer from the kernel"
    );
    held.last_mut().unwrap().flush().ok();
    unsafe {
        libc::close(dupped);
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
    drop(dir);
}

#[test]
fn proc_seeding_sees_fds_and_sockets_that_existed_before() {
    if !bpf_available() {
        return;
    }
    let me = std::process::id();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let peer = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let file = std::fs::File::open("/etc/passwd").unwrap();
    let state = observe(|| {});
    let l = state.fd(me, listener.as_raw_fd()).expect("the listener, from /proc/net/tcp");
    assert_eq!((l.typ, l.tuple.as_ref().unwrap().sport), (FdType::Ipv4, port));
    let c = state.fd(me, peer.as_raw_fd()).expect("the connected socket");
    assert_eq!(c.tuple.as_ref().unwrap().dport, port);
    assert_eq!(state.fd(me, file.as_raw_fd()).map(|f| &*f.name), Some("/etc/passwd"));
    assert!(state.process_by_pid(1).is_some(), "every process is seeded");
}
