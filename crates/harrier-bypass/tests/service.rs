//! Loads the real BPF programs: start, status, the library against them
//! (including the security checks as `nobody`), stop. Needs root; without it
//! the test is skipped, except under CI=true where it fails.
//! One #[test] only: the service is machine-wide.

use harrier_bypass::{BypassCommand, StartArgs, BUILD_DIR, BUILT_LIB, PIN_DIR, STATE_FILE};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

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

fn bt(args: &[&str], nobody: bool) -> std::process::Output {
    let bt = format!("{BUILD_DIR}/bt");
    let mut c = if nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", &bt]);
        c
    } else {
        Command::new(&bt)
    };
    c.args(args).env("LD_PRELOAD", BUILT_LIB).env("BT_EXPECT_BYPASS", "1");
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
    let mut guard = Cleanup { children: Vec::new() };

    let args = StartArgs { slots: 1024, quota: Some(64), libs: vec![BUILT_LIB.into()] };
    harrier_bypass::run(BypassCommand::Start(args.clone())).expect("start");
    let slots = Path::new(PIN_DIR).join("slots");
    assert_eq!(std::fs::metadata(&slots).unwrap().permissions().mode() & 0o777, 0o666);
    for p in ["prog_hb_register", "prog_hb_disable", "link_register_0", "link_exit", "stats"] {
        assert!(Path::new(PIN_DIR).join(p).exists(), "{p} not pinned");
    }
    let e = harrier_bypass::run(BypassCommand::Start(args)).unwrap_err();
    assert!(e.to_string().contains("already started"), "{e}");

    // The library answers from the map, and the values are right.
    assert_ok(&bt(&["basic", "100000"], false), "bt basic");
    assert_ok(&bt(&["fork"], false), "bt fork");
    assert_ok(&bt(&["threads", "40", "40", "40"], false), "bt threads");

    // Security as nobody, with a root process holding a slot to forge.
    let mut hold = Command::new(format!("{BUILD_DIR}/bt"))
        .arg("hold")
        .env("LD_PRELOAD", BUILT_LIB)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(hold.stdout.take().unwrap()), &mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    guard.children.push(hold);
    let out = {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", &format!("{BUILD_DIR}/bt"), "security"])
            .env("LD_PRELOAD", BUILT_LIB)
            .env("BT_EXPECT_BYPASS", "1")
            .env("BT_NEED_VICTIM", "1");
        c.output().unwrap()
    };
    assert_ok(&out, "bt security as nobody");
    assert_ok(&bt(&["threads", "80", "60", "64"], true), "bt threads over the quota as nobody");

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
    let out = Command::new(format!("{BUILD_DIR}/bt"))
        .args(["basic", "10000"])
        .env("LD_PRELOAD", BUILT_LIB)
        .output()
        .unwrap();
    assert_ok(&out, "bt basic after stop");
}
