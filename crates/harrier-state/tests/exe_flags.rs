//! Where the executable lives (root): a binary on an overlayfs upper layer
//! and one run from a memfd get the flags Falco's proc.is_exe_upper_layer and
//! proc.is_exe_from_memfd read, from the kernel at exec.

use harrier_capture::testing::bpf_available;
use harrier_capture::{parse_syscalls, Config, Session};
use harrier_schema::decode::decode;
use harrier_state::State;
use std::cell::RefCell;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Runs `work` (which returns the pids it exec'd) under the sensor.
fn observe(work: impl FnOnce() -> Vec<u32>) -> (State, Vec<u32>) {
    let events = Rc::new(RefCell::new(Vec::<Vec<u8>>::new()));
    let sink = events.clone();
    let cfg = Config::new(parse_syscalls("execve,execveat").unwrap());
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec())))
        .expect("the sensor starts");
    let mut state = State::new();
    state.scan_proc(None);
    let pids = work();
    s.drain().unwrap();
    s.stop().expect("the sensor stops");
    for b in events.borrow().iter() {
        state.apply(&decode(b).expect("sensor events decode"));
    }
    (state, pids)
}

fn cstr(p: &Path) -> CString {
    CString::new(p.to_str().unwrap()).unwrap()
}

/// A tmpfs with an overlay mounted in it, unmounted and removed on drop.
struct Overlay {
    root: PathBuf,
    mounted: Vec<PathBuf>,
}

impl Drop for Overlay {
    fn drop(&mut self) {
        for m in self.mounted.iter().rev() {
            unsafe { libc::umount2(cstr(m).as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn mount(src: &str, target: &Path, fstype: &str, data: &str) {
    let (src, fs, data) =
        (CString::new(src).unwrap(), CString::new(fstype).unwrap(), CString::new(data).unwrap());
    let rc =
        unsafe { libc::mount(src.as_ptr(), cstr(target).as_ptr(), fs.as_ptr(), 0, data.as_ptr().cast()) };
    assert_eq!(rc, 0, "mount {fstype} on {}: {}", target.display(), std::io::Error::last_os_error());
}

/// Forks a child that execs `path` (or, with `fd`, the open file fd) and waits for it.
fn exec_child(path: &CString, fd: Option<i32>) -> u32 {
    let argv = [path.as_ptr(), std::ptr::null()];
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let empty = CString::new("").unwrap();
    // SAFETY: the child only makes raw syscalls before exec or _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        unsafe {
            match fd {
                Some(fd) => libc::syscall(
                    libc::SYS_execveat,
                    fd,
                    empty.as_ptr(),
                    argv.as_ptr(),
                    envp.as_ptr(),
                    libc::AT_EMPTY_PATH,
                ),
                None => libc::syscall(libc::SYS_execve, path.as_ptr(), argv.as_ptr(), envp.as_ptr()),
            };
            libc::_exit(127);
        }
    }
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{} ran", path.to_string_lossy());
    pid as u32
}

#[test]
fn overlay_upper_layer_and_memfd_executables_are_flagged() {
    if !bpf_available() {
        return;
    }
    let root = std::env::temp_dir().join(format!("harrier-exe-flags-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let mut ov = Overlay { root: root.clone(), mounted: vec![] };
    // tmpfs: an upper layer must not itself be on an overlay.
    mount("tmpfs", &root, "tmpfs", "size=16m");
    ov.mounted.push(root.clone());
    for d in ["lower", "upper", "work", "merged"] {
        std::fs::create_dir(root.join(d)).unwrap();
    }
    std::fs::copy("/usr/bin/true", root.join("lower/lowertrue")).unwrap();
    std::fs::copy("/usr/bin/true", root.join("upper/uppertrue")).unwrap();
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        root.join("lower").display(),
        root.join("upper").display(),
        root.join("work").display()
    );
    mount("overlay", &root.join("merged"), "overlay", &opts);
    ov.mounted.push(root.join("merged"));
    let bytes = std::fs::read("/usr/bin/true").unwrap();
    let name = CString::new("harrier-memfd-true").unwrap();
    let memfd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    assert!(memfd >= 0);
    assert_eq!(unsafe { libc::write(memfd, bytes.as_ptr().cast(), bytes.len()) }, bytes.len() as isize);

    let (state, pids) = observe(|| {
        vec![
            exec_child(&cstr(&root.join("merged/uppertrue")), None),
            exec_child(&cstr(&root.join("merged/lowertrue")), None),
            exec_child(&CString::new("/usr/bin/true").unwrap(), None),
            exec_child(&name, Some(memfd)),
        ]
    });
    unsafe { libc::close(memfd) };
    let p = |i: usize| state.process_by_pid(pids[i]).unwrap_or_else(|| panic!("child {i} seen"));
    assert!(p(0).is_exe_upper_layer() && !p(0).is_exe_from_memfd(), "upper layer: {:?}", p(0));
    assert!(!p(1).is_exe_upper_layer(), "lower layer");
    assert!(!p(2).is_exe_upper_layer() && !p(2).is_exe_from_memfd(), "plain ext4");
    assert!(p(3).is_exe_from_memfd() && !p(3).is_exe_upper_layer(), "memfd: {:?}", p(3));
    assert_eq!(&*p(3).exepath, "/memfd:harrier-memfd-true", "named as /proc/PID/exe names it");
    drop(ov);
    assert!(!root.exists(), "cleaned up");
}
