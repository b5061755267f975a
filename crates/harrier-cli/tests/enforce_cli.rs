//! `harrier run --enforce`: the kernel kills at the syscall's exit, so the
//! process never sees the data it opened, nor runs the program it exec'd;
//! dry-run and exempt processes are reported, not killed. Waits on lines
//! the sensor prints, never on a clock.

mod common;

use common::{harrier_run, wait_for};
use harrier_capture::testing::bpf_available;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch folder with a secret and copies of cat named `names`.
fn scratch(name: &str, names: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("harrier-enforce-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("secret"), "TOPSECRET\n").unwrap();
    std::fs::write(dir.join("held"), "TOPSECRET\n").unwrap();
    for n in names {
        std::fs::copy("/bin/cat", dir.join(n)).unwrap();
    }
    std::fs::write(
        dir.join("rules.yaml"),
        format!(
            "- rule: Read the secret\n  desc: t\n  condition: evt.type = openat and evt.is_open_read = true \
             and fd.name = {}/secret and not proc.name in (cat)\n  output: read %fd.name by %proc.name\n  \
             priority: WARNING\n\
             - rule: Exec from shm\n  desc: t\n  condition: evt.type = execve and proc.exe startswith {}\n  \
             output: ran %proc.exe\n  priority: WARNING\n\
             - rule: Read the held secret\n  desc: t\n  condition: evt.type = openat and evt.is_open_read = true \
             and fd.name = {0}/held and not (proc.name = hrpy and proc.cmdline endswith \" -\")\n  \
             output: read %fd.name by %proc.cmdline\n  priority: WARNING\n",
            dir.display(),
            shm_drop(name).display()
        ),
    )
    .unwrap();
    dir
}

/// The program the shm test drops: each test's rules name only its own files
/// (the tests' sensors run side by side and see each other's events).
fn shm_drop(test: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/hrdrop-{test}-{}", std::process::id()))
}

fn cat(dir: &Path, name: &str) -> Output {
    Command::new(dir.join(name)).arg(dir.join("secret")).output().unwrap()
}

fn killed(o: &Output) -> bool {
    o.status.signal() == Some(libc::SIGKILL)
}

#[test]
fn an_open_for_reading_is_killed_before_the_read_and_exempt_names_are_not() {
    kill_and_exempt("kill", "auto");
}

/// The dispatcher's handlers reach the guard through their own program array.
#[test]
fn the_dispatchers_handlers_kill_as_the_per_syscall_ones_do() {
    kill_and_exempt("kill-dispatcher", "dispatcher");
}

fn kill_and_exempt(name: &str, attach: &str) {
    if !bpf_available() {
        return;
    }
    let dir = scratch(name, &["hrsteal", "hrok", "cat"]);
    let config = dir.join("harrier.yaml");
    std::fs::write(&config, "enforce_exempt:\n  proc_names: [hrok]\n").unwrap();
    let rules = dir.join("rules.yaml");
    let (mut child, out, err) = harrier_run(&[
        "--json",
        "--attach",
        attach,
        "-c",
        config.to_str().unwrap(),
        "-r",
        rules.to_str().unwrap(),
        "--enforce",
        "Read the secret=kill",
    ]);
    let plan = wait_for(&err, "enforce (kill) 'Read the secret'");
    assert!(plan.contains(": kernel (openat)"), "{plan}");
    wait_for(&err, "rules loaded");

    let o = cat(&dir, "hrsteal");
    assert!(killed(&o), "hrsteal was not killed: {:?}", o.status);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("TOPSECRET"), "it read the secret");
    let alert = wait_for(&out, "\"rule\"");
    assert!(
        alert.contains("\"enforce.action\":\"killed\"") && alert.contains("\"enforce.by\":\"kernel\""),
        "{alert}"
    );

    let o = cat(&dir, "hrok");
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("TOPSECRET"));
    let alert = wait_for(&out, "\"rule\"");
    assert!(alert.contains("\"enforce.action\":\"not killed\"") && alert.contains("exempt"), "{alert}");
    // The rule's exception holds: nothing to do.
    assert!(cat(&dir, "cat").status.success());

    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_exec_from_dev_shm_is_killed_before_the_program_runs_and_dry_run_kills_nothing() {
    if !bpf_available() {
        return;
    }
    let dir = scratch("shm", &["hrsteal"]);
    let drop = shm_drop("shm");
    std::fs::copy("/bin/echo", &drop).unwrap();
    let rules = dir.join("rules.yaml");
    let (mut child, out, err) = harrier_run(&[
        "--json",
        "-r",
        rules.to_str().unwrap(),
        "--enforce",
        "Exec from shm=kill",
        "--enforce",
        "Read the secret",
    ]);
    wait_for(&err, "rules loaded");

    let o = Command::new(&drop).arg("RAN").output().unwrap();
    assert!(killed(&o), "the dropped program was not killed: {:?}", o.status);
    assert!(o.stdout.is_empty(), "it ran: {:?}", String::from_utf8_lossy(&o.stdout));
    let alert = wait_for(&out, "\"rule\"");
    assert!(alert.contains("Exec from shm") && alert.contains("\"enforce.action\":\"killed\""), "{alert}");

    // Dry-run (the default): reported, not done.
    let o = cat(&dir, "hrsteal");
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("TOPSECRET"));
    let alert = wait_for(&out, "\"rule\"");
    assert!(alert.contains("\"enforce.action\":\"would kill\""), "{alert}");

    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success());
    std::fs::remove_file(&drop).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The sensor breaks its own kill rule (it reads its rule file again on
/// SIGHUP) and lives on: the kernel never acts on it. The same read by
/// another process is killed, so the rule is live while the sensor reads.
#[test]
fn the_sensor_breaking_its_own_kill_rule_is_not_killed() {
    if !bpf_available() {
        return;
    }
    let dir = scratch("self", &["hrsteal"]);
    let rules = dir.join("self.yaml");
    std::fs::write(
        &rules,
        format!(
            "- rule: Read the rule file\n  desc: t\n  condition: evt.type = openat and evt.is_open_read = true \
             and fd.num >= 0 and fd.name = {}\n  output: read %fd.name by %proc.name pid %proc.pid\n  \
             priority: WARNING\n",
            rules.display()
        ),
    )
    .unwrap();
    let (mut child, out, err) =
        harrier_run(&["--json", "-r", rules.to_str().unwrap(), "--enforce", "Read the rule file=kill"]);
    let plan = wait_for(&err, "enforce (kill) 'Read the rule file'");
    assert!(plan.contains(": kernel (openat)"), "{plan}");
    wait_for(&err, "rules loaded");

    let o = Command::new(dir.join("hrsteal")).arg(&rules).output().unwrap();
    assert!(killed(&o), "the rule is not live: hrsteal was not killed: {:?}", o.status);
    assert!(wait_for(&out, "\"rule\"").contains("\"enforce.action\":\"killed\""));

    let sensor = child.0.id();
    unsafe { libc::kill(sensor as i32, libc::SIGHUP) };
    wait_for(&err, "reloaded: 1 rules evaluated");
    let alert = wait_for(&out, "\"rule\"");
    assert!(alert.contains(&format!("pid {sensor}")), "not the sensor's read: {alert}");
    assert!(
        alert.contains("\"enforce.action\":\"not killed\"") && alert.contains("protected process"),
        "{alert}"
    );
    // Alive, and still enforcing.
    let o = Command::new(dir.join("hrsteal")).arg(&rules).output().unwrap();
    assert!(killed(&o), "hrsteal was not killed after the reload: {:?}", o.status);
    unsafe { libc::kill(sensor as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success(), "the sensor did not live to stop cleanly");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The task's state letter in /proc (T: stopped).
fn state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(") ")?.1.chars().next()
}

#[test]
fn a_rule_the_kernel_defers_holds_the_task_until_user_space_decides_and_a_dead_sensor_lets_it_go() {
    if !bpf_available() {
        return;
    }
    let dir = scratch("hold", &["hrpy"]);
    let rules = dir.join("rules.yaml");
    let hrpy =
        |extra: &[&str]| Command::new(dir.join("hrpy")).arg(dir.join("held")).args(extra).output().unwrap();
    let (mut child, out, err) =
        harrier_run(&["--json", "-r", rules.to_str().unwrap(), "--enforce", "Read the held secret=kill"]);
    let plan = wait_for(&err, "enforce (kill) 'Read the held secret'");
    assert!(plan.contains("proc.cmdline") && plan.contains("(the task held meanwhile"), "{plan}");
    wait_for(&err, "rules loaded");

    // The command line decides: held at openat's exit, killed by user space before the read.
    let o = hrpy(&[]);
    assert!(killed(&o) && !String::from_utf8_lossy(&o.stdout).contains("TOPSECRET"), "{o:?}");
    let alert = wait_for(&out, "\"rule\"");
    assert!(
        alert.contains("\"enforce.action\":\"killed\"") && alert.contains("held by the kernel"),
        "{alert}"
    );
    // The exception holds: held, then resumed.
    let o = hrpy(&["-"]);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("TOPSECRET"), "{o:?}");
    // Held again right after each resume, 40 times: every hold is let go.
    let again: Vec<PathBuf> = (0..40).map(|_| dir.join("held")).collect();
    let mut args: Vec<&std::ffi::OsStr> = again.iter().map(|p| p.as_os_str()).collect();
    args.push("-".as_ref());
    let o = Command::new(dir.join("hrpy")).args(&args).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).matches("TOPSECRET").count(), 40, "{o:?}");

    // The sensor stopped: the task stays held. The sensor killed: it goes on.
    let sensor = child.0.id() as i32;
    unsafe { libc::kill(sensor, libc::SIGSTOP) };
    let task = Command::new(dir.join("hrpy"))
        .arg(dir.join("held"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let held = (0..600).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        state(task.id()) == Some('T')
    });
    assert!(held, "the task was not held");
    unsafe { libc::kill(sensor, libc::SIGKILL) };
    let _ = child.0.wait();
    let o = task.wait_with_output().unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("TOPSECRET"), "{o:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Run as a child (HARRIER_RACER=folder): one thread flips a path buffer
/// between the secret and a harmless file while this one opens through it
/// and reads. Prints LEAK if it ever reads the secret.
#[test]
fn racer() {
    let Ok(dir) = std::env::var("HARRIER_RACER") else { return };
    let secret = std::ffi::CString::new(format!("{dir}/secret")).unwrap();
    let other = std::ffi::CString::new(format!("{dir}/other")).unwrap();
    let buf: &'static mut [u8; 512] = Box::leak(Box::new([0u8; 512]));
    let at = buf.as_mut_ptr() as usize;
    std::thread::spawn(move || loop {
        for p in [&secret, &other] {
            let b = p.as_bytes_with_nul();
            // SAFETY: the buffer lives forever; the race on its bytes is the point.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), at as *mut u8, b.len()) };
        }
    });
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < end {
        // SAFETY: plain syscalls on a live buffer.
        unsafe {
            let fd = libc::open(at as *const libc::c_char, libc::O_RDONLY);
            if fd >= 0 {
                let mut got = [0u8; 16];
                let n = libc::read(fd, got.as_mut_ptr() as *mut libc::c_void, got.len());
                if n > 0 && got.starts_with(b"TOPSECRET") {
                    println!("LEAK");
                    libc::_exit(1);
                }
                libc::close(fd);
            }
        }
    }
    println!("never opened the secret");
}

#[test]
fn a_thread_racing_to_rewrite_the_path_cannot_evade_the_kernel() {
    if !bpf_available() {
        return;
    }
    let dir = scratch("race", &[]);
    std::fs::write(dir.join("other"), "harmless\n").unwrap();
    let rules = dir.join("rules.yaml");
    let (mut child, out, err) =
        harrier_run(&["--json", "-r", rules.to_str().unwrap(), "--enforce", "Read the secret=kill"]);
    wait_for(&err, "rules loaded");
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "racer", "--nocapture", "--test-threads=1"])
        .env("HARRIER_RACER", &dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(!said.contains("LEAK"), "the racer read the secret: {said}");
    assert!(killed(&o), "the racer was not killed: {:?} {said}", o.status);
    let alert = wait_for(&out, "\"rule\"");
    assert!(
        alert.contains("\"enforce.action\":\"killed\"") && alert.contains("\"enforce.by\":\"kernel\""),
        "{alert}"
    );
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn words_in_the_arguments_and_the_age_of_the_process_are_decided_in_the_kernel() {
    if !bpf_available() {
        return;
    }
    let dir = scratch("words", &["hrold"]);
    std::fs::copy("/bin/echo", dir.join("hrfind")).unwrap();
    // The word is this test's own: the tests' sensors see each other's events.
    let word = format!("ID_RSA-{}", std::process::id());
    let rules = dir.join("words.yaml");
    std::fs::write(
        &rules,
        format!(
            "- rule: Search keys\n  desc: t\n  condition: evt.type = execve and proc.name = hrfind \
             and proc.args icontains \"{}\"\n  output: ran %proc.cmdline\n  priority: WARNING\n\
             - rule: Old reader\n  desc: t\n  condition: evt.type = openat and fd.name = {}/secret \
             and proc.name = hrold and proc.duration > 1000000000\n  output: read by %proc.name\n  \
             priority: WARNING\n",
            word.to_lowercase(),
            dir.display()
        ),
    )
    .unwrap();
    let (mut child, out, err) = harrier_run(&[
        "--json",
        "-r",
        rules.to_str().unwrap(),
        "--enforce",
        "Search keys=kill",
        "--enforce",
        "Old reader=kill",
    ]);
    for rule in ["Search keys", "Old reader"] {
        let plan = wait_for(&err, &format!("enforce (kill) '{rule}'"));
        assert!(plan.contains("kernel") && !plan.contains("user space ("), "{plan}");
    }
    wait_for(&err, "rules loaded");

    let find = |arg: &str| Command::new(dir.join("hrfind")).args(["-n", arg]).output().unwrap();
    assert_eq!(find("other").stdout, b"other");
    let o = find(&format!("x{word}y"));
    assert!(killed(&o) && o.stdout.is_empty(), "the search ran: {o:?}");
    let alert = wait_for(&out, "\"rule\":\"Search keys\"");
    assert!(
        alert.contains("\"enforce.action\":\"killed\"") && alert.contains("\"enforce.by\":\"kernel\""),
        "{alert}"
    );

    // Young: reads. Started over a second before its open (a shell that
    // waited, then exec'd it in place): killed before the read.
    let o = cat(&dir, "hrold");
    assert!(String::from_utf8_lossy(&o.stdout).contains("TOPSECRET"), "{o:?}");
    let script = format!("sleep 1.5; exec {}/hrold {}/secret", dir.display(), dir.display());
    let o = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(killed(&o) && o.stdout.is_empty(), "the old process read: {o:?}");
    let alert = wait_for(&out, "\"rule\":\"Old reader\"");
    assert!(alert.contains("\"enforce.action\":\"killed\""), "{alert}");

    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}
