//! Loads the real BPF programs: start, status, the library against them
//! (including the security checks as `nobody`), stop. Needs root; without it
//! the test is skipped, except under CI=true where it fails.
//! One #[test] only: the service is machine-wide.

use harrier_bypass::{BypassCommand, StartArgs, BUILD_DIR, BUILT_LIB, PIN_DIR, STATE_FILE};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// bt and the library copied into a folder of their own that any user can
/// enter: the checkout (with its target dir) may sit in a 0700 folder, and
/// while setpriv still execs bt with root's capabilities, the loader opens
/// the preloaded library as nobody. The service attaches to this copy (its
/// uprobe follows the file's inode), so every bt here preloads it. Removed
/// on drop.
struct ForNobody {
    dir: PathBuf,
    bt: String,
    lib: String,
}

impl ForNobody {
    fn new() -> ForNobody {
        let dir = std::env::temp_dir().join(format!("harrier-bypass-service-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for a in dir.ancestors() {
            let mode = std::fs::metadata(a).unwrap().permissions().mode();
            assert!(
                a == dir || mode & 0o001 != 0,
                "{} (mode {mode:o}) cannot be entered by nobody: set TMPDIR to a folder every user can reach",
                a.display()
            );
        }
        let copy = |from: &str, name: &str, mode: u32| {
            let to = dir.join(name);
            std::fs::copy(from, &to).unwrap_or_else(|e| panic!("copying {from}: {e}"));
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode)).unwrap();
            to.display().to_string()
        };
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bt = copy(&format!("{BUILD_DIR}/bt"), "bt", 0o755);
        let lib = copy(BUILT_LIB, "libharrier-bypass.so", 0o644);
        ForNobody { dir, bt, lib }
    }
}

impl Drop for ForNobody {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ci() -> bool {
    std::env::var("CI").map(|v| v == "true" || v == "1").unwrap_or(false)
}

fn bpffs_mounts() -> usize {
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .filter(|l| l.contains(" /sys/fs/bpf bpf "))
        .count()
}

/// Stops the service and kills what the test started, even when it panics.
struct Cleanup {
    children: Vec<Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if harrier_bypass::is_started() {
            let _ = harrier_bypass::run(BypassCommand::Stop);
        }
    }
}

fn bt(f: &ForNobody, args: &[&str], nobody: bool) -> std::process::Output {
    let mut c = if nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", &f.bt]);
        c
    } else {
        Command::new(&f.bt)
    };
    c.args(args).env("LD_PRELOAD", &f.lib).env("BT_EXPECT_BYPASS", "1");
    c.output().expect("running bt")
}

fn assert_ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn start_use_stop() {
    if unsafe { libc::geteuid() } != 0 {
        assert!(!ci(), "CI=true: this test must run as root to load BPF");
        eprintln!("skipped: needs root to load BPF");
        return;
    }
    assert!(!harrier_bypass::is_started(), "the bypass service is already running; stop it first");
    let mounts_before = bpffs_mounts();
    // Dropped after `guard` (which stops the service): declared before it.
    let f = ForNobody::new();
    let mut guard = Cleanup { children: Vec::new() };

    let args = StartArgs { slots: 1024, quota: Some(64), libs: vec![f.lib.clone().into()] };
    harrier_bypass::run(BypassCommand::Start(args.clone())).expect("start");
    let slots = Path::new(PIN_DIR).join("slots");
    assert_eq!(std::fs::metadata(&slots).unwrap().permissions().mode() & 0o777, 0o666);
    for p in ["prog_hb_register", "prog_hb_disable", "link_register_0", "link_exit", "stats"] {
        assert!(Path::new(PIN_DIR).join(p).exists(), "{p} not pinned");
    }
    let e = harrier_bypass::run(BypassCommand::Start(args)).unwrap_err();
    assert!(e.to_string().contains("already started"), "{e}");

    // The library answers from the map, and the values are right.
    assert_ok(&bt(&f, &["basic", "100000"], false), "bt basic");
    assert_ok(&bt(&f, &["fork"], false), "bt fork");
    assert_ok(&bt(&f, &["threads", "40", "40", "40"], false), "bt threads");

    // Security as nobody, with a root process holding a slot to forge.
    let mut hold =
        Command::new(&f.bt).arg("hold").env("LD_PRELOAD", &f.lib).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(hold.stdout.take().unwrap()), &mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    guard.children.push(hold);
    let out = {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", &f.bt, "security"])
            .env("LD_PRELOAD", &f.lib)
            .env("BT_EXPECT_BYPASS", "1")
            .env("BT_NEED_VICTIM", "1");
        c.output().unwrap()
    };
    assert_ok(&out, "bt security as nobody");
    assert_ok(&bt(&f, &["threads", "80", "60", "64"], true), "bt threads over the quota as nobody");

    let st = harrier_bypass::read_status().expect("status");
    assert_eq!(st.nslots, 1024);
    assert_eq!(st.quota, 64);
    let registered = st.stats.iter().find(|(n, _)| n == "registered").unwrap().1;
    assert!(registered >= 40 + 64 + 2, "registered {registered}");
    assert!(st.uids.iter().any(|u| u.0 == 65534 && u.3 > 0), "nobody was never refused: {:?}", st.uids);
    harrier_bypass::run(BypassCommand::Status).expect("status");

    for mut c in guard.children.drain(..) {
        let _ = c.kill();
        let _ = c.wait();
    }
    harrier_bypass::run(BypassCommand::Stop).expect("stop");
    assert!(!Path::new(PIN_DIR).exists());
    assert!(!Path::new(STATE_FILE).exists());
    assert_eq!(bpffs_mounts(), mounts_before, "bpffs mount not restored");
    let e = harrier_bypass::run(BypassCommand::Stop).unwrap_err();
    assert!(e.to_string().contains("not started"), "{e}");
    assert!(harrier_bypass::run(BypassCommand::Status).is_err());

    // After stop, the library falls back and stays right.
    let out = Command::new(&f.bt).args(["basic", "10000"]).env("LD_PRELOAD", &f.lib).output().unwrap();
    assert_ok(&out, "bt basic after stop");
}
