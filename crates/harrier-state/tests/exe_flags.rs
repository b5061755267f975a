//! Where the executable lives (root): a binary on an overlayfs upper or lower
//! layer and one run from a memfd get the flags Falco's proc.is_exe_upper_layer,
//! proc.is_exe_lower_layer and proc.is_exe_from_memfd read, and EXE_WRITABLE
//! (proc.is_exe_writable) says whether the process could write its executable,
//! all from the kernel at exec.

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
    exec_child_as(path, fd, None)
}

/// The same, with the child's ids (and its file-system ids) changed to `ugid` first.
fn exec_child_as(path: &CString, fd: Option<i32>, ugid: Option<u32>) -> u32 {
    let argv = [path.as_ptr(), std::ptr::null()];
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let empty = CString::new("").unwrap();
    // SAFETY: the child only makes raw syscalls before exec or _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        unsafe {
            if let Some(id) = ugid {
                if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(id) != 0 || libc::setuid(id) != 0
                {
                    libc::_exit(126);
                }
            }
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

    // Writable by whom: a copy owned by nobody, one any user may write, and one on a
    // read-only mount (never writable, even by root).
    let nobody = 65534;
    let owned = root.join("nobodytrue");
    std::fs::copy("/usr/bin/true", &owned).unwrap();
    std::os::unix::fs::chown(&owned, Some(nobody), Some(nobody)).unwrap();
    let open = root.join("opentrue");
    std::fs::copy("/usr/bin/true", &open).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o757)).unwrap();
    let ro = root.join("ro");
    std::fs::create_dir(&ro).unwrap();
    mount("tmpfs", &ro, "tmpfs", "size=4m");
    ov.mounted.push(ro.clone());
    std::fs::copy("/usr/bin/true", ro.join("rotrue")).unwrap();
    let remount = unsafe {
        libc::mount(
            std::ptr::null(),
            cstr(&ro).as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_RDONLY,
            std::ptr::null(),
        )
    };
    assert_eq!(remount, 0, "remount read-only: {}", std::io::Error::last_os_error());

    let (state, pids) = observe(|| {
        vec![
            exec_child(&cstr(&root.join("merged/uppertrue")), None),
            exec_child(&cstr(&root.join("merged/lowertrue")), None),
            exec_child(&CString::new("/usr/bin/true").unwrap(), None),
            exec_child(&name, Some(memfd)),
            exec_child_as(&CString::new("/usr/bin/true").unwrap(), None, Some(nobody)),
            exec_child_as(&cstr(&owned), None, Some(nobody)),
            exec_child_as(&cstr(&open), None, Some(nobody)),
            exec_child(&cstr(&ro.join("rotrue")), None),
        ]
    });
    unsafe { libc::close(memfd) };
    let p = |i: usize| state.process_by_pid(pids[i]).unwrap_or_else(|| panic!("child {i} seen"));
    let flags = |i: usize| harrier_schema::render::render("exe_flags", p(i).exe_flags as u64).unwrap();
    // Falco's evt.arg.flags of each execve: root may write what it runs (owner or
    // CAP_DAC_OVERRIDE), nobody only its own file or an other-writable one.
    // /usr/bin/true is on an overlay's lower layer where /usr is an overlay
    // (the kernel matrix's guests), on a plain file system here.
    let usr_overlay = {
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statfs(c"/usr/bin/true".as_ptr(), &mut st) }, 0);
        st.f_type == 0x794c7630 // OVERLAYFS_SUPER_MAGIC
    };
    let (sys_root, sys_nobody) =
        if usr_overlay { ("EXE_WRITABLE|EXE_LOWER_LAYER", "EXE_LOWER_LAYER") } else { ("EXE_WRITABLE", "0") };
    let want = [
        "EXE_WRITABLE|EXE_UPPER_LAYER",
        "EXE_WRITABLE|EXE_LOWER_LAYER",
        sys_root,
        "EXE_WRITABLE|EXE_FROM_MEMFD",
        sys_nobody,
        "EXE_WRITABLE",
        "EXE_WRITABLE",
        "0",
    ];
    for (i, w) in want.iter().enumerate() {
        assert_eq!(flags(i), *w, "child {i}: {:?}", p(i));
    }
    assert!(p(0).is_exe_upper_layer() && !p(0).is_exe_from_memfd(), "upper layer: {:?}", p(0));
    assert!(!p(1).is_exe_upper_layer() && p(1).is_exe_lower_layer(), "lower layer");
    assert!(!p(2).is_exe_upper_layer() && !p(2).is_exe_from_memfd(), "the system's /usr/bin/true");
    assert!(p(3).is_exe_from_memfd() && !p(3).is_exe_upper_layer(), "memfd: {:?}", p(3));
    assert!(p(3).is_exe_writable() && !p(4).is_exe_writable());
    assert_eq!(&*p(3).exepath, "memfd:harrier-memfd-true", "named as Falco's driver names it");
    drop(ov);
    assert!(!root.exists(), "cleaned up");
}
