//! End-to-end tests of `harrier capture`: the real binary, real BPF, real
//! signals. Tests that load BPF call `bpf_available()` first.
//!
//! Each session's stop costs ~75 ms per attached syscall tracepoint, so the
//! sessions here attach one or two syscalls.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");
/// Longest any single sensor run may take before the test gives up on it.
/// Upper bounds only (a hung sensor fails instead of hanging the suite),
/// stretched on slow machines (HARRIER_TEST_SCALE: a kernel under emulation).
fn timeout() -> Duration {
    slack(Duration::from_secs(10))
}

use harrier_capture::testing::{bpf_available, slack};

/// `harrier capture ARGS`, with backtraces requested: errors must stay one
/// line even then.
fn capture_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(HARRIER);
    c.arg("capture").args(args).env("RUST_BACKTRACE", "full");
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A failed run: non-zero exit, and stderr is one "harrier: error:" line
/// that mentions `needle`.
fn assert_one_line_error(out: &Output, needle: &str) {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "expected failure, got {:?}; stderr: {err}", out.status);
    assert_eq!(err.lines().count(), 1, "expected one line on stderr, got:\n{err}");
    assert!(err.starts_with("harrier: error:"), "not a harrier error: {err}");
    assert!(err.contains(needle), "error does not mention {needle:?}: {err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
}

fn parse_json(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
}

fn now_ns() -> i128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128
}

fn signal(pid: u32, sig: libc::c_int) {
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0, "kill({pid}, {sig})");
}

/// A child process, killed and reaped when dropped: a failing test leaves
/// nothing running (a sensor without --duration would run forever).
struct Proc(Child);

impl Proc {
    fn spawn(cmd: &mut Command) -> Proc {
        Proc(cmd.spawn().unwrap_or_else(|e| panic!("starting {cmd:?}: {e}")))
    }

    fn id(&self) -> u32 {
        self.0.id()
    }

    /// Waits for the exit; panics (and kills, on drop) after `timeout`.
    fn wait(&mut self, what: &str, timeout: Duration) -> ExitStatus {
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < end, "{what} did not exit within {timeout:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs a command that should end by itself, quickly (errors only print a line).
fn output(mut cmd: Command) -> Output {
    let mut p = Proc::spawn(cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()));
    let status = p.wait(&format!("{cmd:?}"), slack(Duration::from_secs(5)));
    let mut out = Output { status, stdout: Vec::new(), stderr: Vec::new() };
    p.0.stdout.take().unwrap().read_to_end(&mut out.stdout).unwrap();
    p.0.stderr.take().unwrap().read_to_end(&mut out.stderr).unwrap();
    out
}

/// A running `harrier capture`, its stdout and stderr read by threads so
/// that neither pipe can fill up and stall it.
struct Sensor {
    proc: Proc,
    stdout: Option<std::thread::JoinHandle<Vec<u8>>>,
    stderr: Receiver<String>,
    stderr_seen: String,
}

/// What a sensor left behind when it exited.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Finished {
    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    /// Every stdout line as JSON (each one must parse).
    fn events(&self) -> Vec<Value> {
        self.lines().into_iter().map(parse_json).collect()
    }

    fn assert_report(&self) {
        for part in ["STATS", "[KERNEL]", "[BPF]", "[USER]", "[SYSCALLS]"] {
            assert!(self.stderr.contains(part), "no {part} in the report on stderr:\n{}", self.stderr);
        }
    }
}

impl Sensor {
    /// Starts `harrier capture ARGS` and returns once it says it is capturing.
    fn start(args: &[&str]) -> Sensor {
        let mut cmd = capture_cmd(args);
        let mut proc = Proc::spawn(cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()));
        let mut out = proc.0.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut v = Vec::new();
            out.read_to_end(&mut v).unwrap();
            v
        });
        let (tx, stderr) = channel();
        let err = BufReader::new(proc.0.stderr.take().unwrap());
        std::thread::spawn(move || err.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
        let mut s = Sensor { proc, stdout: Some(stdout), stderr, stderr_seen: String::new() };
        s.wait_for_capturing();
        s
    }

    fn wait_for_capturing(&mut self) {
        let end = Instant::now() + timeout();
        while let Ok(line) = self.stderr.recv_timeout(end.saturating_duration_since(Instant::now())) {
            self.stderr_seen += &(line.clone() + "\n");
            if line.starts_with("harrier: capturing") {
                return;
            }
        }
        panic!("harrier never said it was capturing; stderr:\n{}", self.stderr_seen);
    }

    /// Waits for the sensor to exit on its own and collects its output.
    fn finish(mut self) -> Finished {
        let status = self.proc.wait("harrier", timeout());
        let stdout = text(&self.stdout.take().unwrap().join().unwrap());
        let mut stderr = std::mem::take(&mut self.stderr_seen);
        // The reader thread ends (and the channel closes) at EOF.
        self.stderr.iter().for_each(|l| stderr += &(l + "\n"));
        Finished { status, stdout, stderr }
    }

    /// Sends `sig`, then waits as `finish` does.
    fn stop_with(self, sig: libc::c_int) -> Finished {
        signal(self.proc.id(), sig);
        self.finish()
    }
}

/// A thread of this process calling getpid() every `every` until dropped.
struct GetpidLoad(Arc<AtomicBool>);

impl GetpidLoad {
    fn start(every: Duration) -> GetpidLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                unsafe { libc::syscall(libc::SYS_getpid) };
                std::thread::sleep(every);
            }
        });
        GetpidLoad(stop)
    }
}

impl Drop for GetpidLoad {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A file path unique to this test run.
fn unique_path(tag: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    std::env::temp_dir()
        .join(format!("harrier-cli-{tag}-{}-{nanos}", std::process::id()))
        .display()
        .to_string()
}

// ---------------------------------------------------------------- bad input

#[test]
fn bad_arguments_fail_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["--syscalls", "open,frobnicate"], "frobnicate"),
        (&["--syscalls", ","], "empty syscall list"),
        (&["--buffer-size", "12345"], "12345"),
        (&["--buffer-size", "lots"], "lots"),
        (&["--snaplen", "99999"], "snaplen 99999"),
        (&["--duration", "0"], "duration"),
        (&["--duration", "-1"], "duration"),
        (&["--duration", "1e30"], "duration"),
        (&["--cpus-per-buffer", "0"], "cpus per buffer"),
        (&["--pid", "0"], "--pid 0"),
        (&["--pid", "4194305"], "no process with pid 4194305"), // above pid_max's ceiling
        // clap's own usage errors are one line too.
        (&["--events", "abc"], "abc"),
        (&["--bogus"], "--bogus"),
        (&["--syscalls", "read", "--all"], "--all"),
    ];
    // Every case is tried, and every failure reported.
    let failed: Vec<String> = cases
        .iter()
        .filter_map(|(args, needle)| {
            let run = std::panic::catch_unwind(|| assert_one_line_error(&output(capture_cmd(args)), needle));
            run.is_err().then(|| format!("{args:?}"))
        })
        .collect();
    assert!(failed.is_empty(), "wrong errors for: {failed:?}");
}

#[test]
fn a_thread_id_is_not_a_pid() {
    // A thread of this process that lives until `release` is dropped.
    let (release, wait) = channel::<()>();
    let (tid_tx, tid) = channel();
    let thread = std::thread::spawn(move || {
        tid_tx.send(unsafe { libc::syscall(libc::SYS_gettid) }).unwrap();
        let _ = wait.recv();
    });
    let tid = tid.recv().unwrap().to_string();
    let out = output(capture_cmd(&["--pid", &tid]));
    drop(release);
    thread.join().unwrap();
    assert_one_line_error(&out, &format!("{tid} is a thread of process {}", std::process::id()));
}

#[test]
fn a_non_root_user_gets_a_privileges_error() {
    let out = if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            HARRIER,
            "capture",
            "--duration",
            "1",
        ])
        .env("RUST_BACKTRACE", "full")
        .current_dir("/");
        output(c)
    } else {
        output(capture_cmd(&["--duration", "1"]))
    };
    assert_one_line_error(&out, "needs root");
}

#[test]
fn an_unwritable_stats_file_fails_before_capturing() {
    if !bpf_available() {
        return;
    }
    let out = output(capture_cmd(&["--syscalls", "getpid", "--stats-json", "/nonexistent/dir/s.json"]));
    assert_one_line_error(&out, "/nonexistent/dir/s.json");
}

// ---------------------------------------------------------------- --json

#[test]
fn json_open_event_of_a_child() {
    if !bpf_available() {
        return;
    }
    let path = unique_path("open");
    std::fs::write(&path, "hello\n").unwrap();
    // The child exists before the sensor (for --pid) and opens the file only
    // once told to, after the sensor is attached. The shell itself opens
    // /dev/null (the redirection) before it becomes cat.
    let script = format!("read x; exec cat '{path}' </dev/null");
    let mut child =
        Proc::spawn(Command::new("sh").args(["-c", &script]).stdin(Stdio::piped()).stdout(Stdio::null()));
    let pid = child.id();
    let sensor = Sensor::start(&["--syscalls", "openat,close", "--json", "--pid", &pid.to_string()]);
    child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait("the child", timeout()).success());
    // Every event of the child is in the rings already; stopping drains them.
    let done = sensor.stop_with(libc::SIGINT);
    let fullpath = std::fs::canonicalize(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(done.status.success(), "{:?}\n{}", done.status, done.stderr);

    let events = done.events();
    assert!(events.iter().all(|e| e["pid"] == pid), "--pid {pid} let others through: {}", done.stdout);
    let open = events
        .iter()
        .find(|e| e["syscall"] == "openat" && e["path"] == path.as_str())
        .unwrap_or_else(|| panic!("no openat of {path} in:\n{}", done.stdout));
    let ts = open["ts"].as_u64().expect("ts is a number") as i128;
    assert!((ts - now_ns()).abs() < 10_000_000_000, "ts {ts} is not near now ({})", now_ns());
    assert!(open["tid"].as_u64().is_some(), "{open}");
    assert_eq!(open["comm"], "cat", "{open}");
    assert!(open["ret"].as_i64().expect("ret is a number") >= 0, "{open}");
    assert_eq!(open["fullpath"], fullpath.to_str().unwrap(), "{open}");
    assert!(open["flags"].as_u64().is_some(), "{open}");
    assert!(open["flags_names"].as_str().unwrap().contains("O_RDONLY"), "{open}");
    assert_eq!(open["dirfd"], -100, "{open}");
    // Seen before the exec, the shell's own open keeps the shell's name.
    let redirect = events.iter().find(|e| e["syscall"] == "openat" && e["path"] == "/dev/null");
    assert_eq!(redirect.unwrap_or_else(|| panic!("no open of /dev/null: {}", done.stdout))["comm"], "sh");
    // The file's fd is closed by the same thread, with the same number.
    let closed =
        events.iter().any(|e| e["syscall"] == "close" && e["fd"] == open["ret"] && e["tid"] == open["tid"]);
    assert!(closed, "no close of fd {} in:\n{}", open["ret"], done.stdout);
}

#[test]
fn events_limit_prints_exactly_n_lines() {
    if !bpf_available() {
        return;
    }
    let _load = GetpidLoad::start(Duration::from_millis(1));
    let me = std::process::id().to_string();
    let done = Sensor::start(&["--syscalls", "getpid", "--json", "--events", "25", "--pid", &me]).finish();
    assert!(done.status.success(), "{:?}\n{}", done.status, done.stderr);
    let events = done.events();
    assert_eq!(events.len(), 25, "{}", done.stdout);
    assert!(
        events.iter().all(|e| e["syscall"] == "getpid" && e["ret"] == std::process::id()),
        "{}",
        done.stdout
    );
    done.assert_report();
}

#[test]
fn a_closed_stdout_ends_the_capture() {
    if !bpf_available() {
        return;
    }
    // A quiet process: a few openat calls a second, far from filling a buffer.
    let quiet =
        Proc::spawn(Command::new("sh").args(["-c", "while :; do read x < /dev/null; sleep 0.05; done"]));
    let quiet_pid = quiet.id().to_string();
    let mut cmd = capture_cmd(&["--syscalls", "openat", "--json", "--pid", &quiet_pid]);
    let mut sensor = Proc::spawn(cmd.stdout(Stdio::piped()).stderr(Stdio::null()));
    // Like `| head -1`: read one line, then close the pipe.
    let mut first = String::new();
    BufReader::new(sensor.0.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let closed = Instant::now();
    let status = sensor.wait("harrier with its stdout closed", timeout());
    parse_json(&first);
    assert!(status.success(), "{status:?}");
    assert!(closed.elapsed() < slack(Duration::from_secs(3)), "took {:?} to notice", closed.elapsed());
}

// ---------------------------------------------------------------- stats

#[test]
fn stats_json_file_and_report() {
    if !bpf_available() {
        return;
    }
    let file = unique_path("stats.json");
    let _load = GetpidLoad::start(Duration::from_millis(1));
    let started = Instant::now();
    // Per-program figures need run-time stats (off by default) and the per-syscall program.
    let args = [
        "--syscalls",
        "getpid",
        "--duration",
        "1",
        "--stats-json",
        &file,
        "--bpf-stats",
        "--attach",
        "per-syscall",
    ];
    let done = Sensor::start(&args).finish();
    let elapsed = started.elapsed();
    assert!(done.status.success(), "{:?}\n{}", done.status, done.stderr);
    assert!(elapsed >= Duration::from_secs(1) && elapsed < slack(Duration::from_secs(5)), "ran {elapsed:?}");
    done.assert_report();
    assert!(done.stdout.is_empty(), "no --json, yet stdout has: {}", done.stdout);

    let s = parse_json(&std::fs::read_to_string(&file).expect("the stats file exists"));
    std::fs::remove_file(&file).unwrap();
    let num = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v} in {s:#}"));
    let k = &s["kernel"];
    let per_cpu = k["per_cpu"].as_array().expect("kernel.per_cpu is an array");
    assert!(!per_cpu.is_empty());
    let per_cpu_sum: f64 = per_cpu.iter().map(|c| num(&c["events"])).sum();
    assert_eq!(num(&k["events"]), per_cpu_sum, "kernel.events is the sum over CPUs");
    assert_eq!(num(&k["drops"]), 0.0, "{s:#}");
    // Nothing dropped: user space read every event the kernel wrote.
    let u = &s["user"];
    assert_eq!(num(&u["events"]), num(&k["events"]), "{s:#}");
    assert!(num(&u["bytes"]) >= 24.0 * num(&u["events"]), "events are at least 24 bytes: {s:#}");
    assert!((num(&u["avg_event_bytes"]) - num(&u["bytes"]) / num(&u["events"])).abs() < 1e-6);
    assert!(num(&u["events_per_s"]) > 0.0 && num(&s["duration_s"]) >= 1.0, "{s:#}");
    let getpids = num(&s["syscalls"]["getpid"]);
    assert!(getpids >= 100.0, "a 1 ms getpid loop for 1 s: {s:#}");

    let programs = s["programs"].as_array().expect("programs is an array");
    let exit = programs.iter().find(|p| p["name"] == "hr_exit_getpid").unwrap_or_else(|| panic!("{s:#}"));
    // One run per event, and maybe a few more: runs between the stop flag
    // and the detach return at once (they emit nothing).
    let extra_runs = num(&exit["run_cnt"]) - getpids;
    assert!((0.0..=16.0).contains(&extra_runs), "one program run per getpid event: {s:#}");
    assert!(num(&exit["run_time_ns"]) > 0.0);
    assert!((num(&exit["avg_ns"]) - num(&exit["run_time_ns"]) / num(&exit["run_cnt"])).abs() < 1e-6);
    assert_eq!(s["run_time_stats"], true);
    assert_eq!(s["attach_mode"], "per-syscall");
}

#[test]
fn run_time_stats_are_off_unless_asked_for() {
    if !bpf_available() {
        return;
    }
    let file = unique_path("stats-off.json");
    let done = Sensor::start(&["--syscalls", "getpid", "--duration", "0.3", "--stats-json", &file]).finish();
    assert!(done.status.success(), "{:?}\n{}", done.status, done.stderr);
    let s = parse_json(&std::fs::read_to_string(&file).expect("the stats file exists"));
    std::fs::remove_file(&file).unwrap();
    assert_eq!(s["run_time_stats"], false, "{s:#}");
    assert!(done.stderr.contains("run-time stats off"), "{}", done.stderr);
}

// ---------------------------------------------------------------- signals

/// Stops a `--json` getpid capture with `sig` after a second of load, then
/// checks the output and that a new session can start right away.
fn stops_cleanly_on(sig: libc::c_int) {
    if !bpf_available() {
        return;
    }
    let _load = GetpidLoad::start(Duration::from_millis(1));
    let sensor = Sensor::start(&["--syscalls", "getpid", "--json"]);
    std::thread::sleep(Duration::from_secs(1));
    let done = sensor.stop_with(sig);
    assert!(done.status.success(), "exit on signal {sig}: {:?}\n{}", done.status, done.stderr);
    done.assert_report();
    assert!(done.stdout.ends_with('\n'), "stdout ends mid-line: {:?}", done.stdout.lines().last());
    let events = done.events(); // each line, the last included, is complete JSON
    assert!(events.len() >= 100, "only {} events in a second of getpid load", events.len());
    assert_eq!(events.last().unwrap()["syscall"], "getpid");

    // Everything was detached: the next session starts and ends at once.
    let started = Instant::now();
    let next = Sensor::start(&["--syscalls", "getpid", "--duration", "0.5"]).finish();
    assert!(next.status.success(), "{:?}\n{}", next.status, next.stderr);
    assert!(started.elapsed() < slack(Duration::from_secs(3)), "second session took {:?}", started.elapsed());
}

#[test]
fn sigint_stops_cleanly() {
    stops_cleanly_on(libc::SIGINT);
}

#[test]
fn sigterm_stops_cleanly() {
    stops_cleanly_on(libc::SIGTERM);
}
