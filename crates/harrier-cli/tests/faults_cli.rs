//! Faults, each through a live `harrier run` (issue 30, part 4):
//! - kill -9 leaves no BPF program, map or link loaded (nothing is pinned:
//!   every object lives in the sensor's fds, and the enforcement guardian
//!   holds one map and exits when the sensor's pipe closes), and the next
//!   start alerts;
//! - a full disk under file_output (a 64 KiB tmpfs) is counted as failed
//!   writes while stdout keeps every alert, and the file catches up, whole
//!   lines in order, once space returns;
//! - an HTTP receiver down for 60 s (HARRIER_FAULTS_DOWN_SECS; scaled down in
//!   the emulated guests) gets what was queued when it is back, every
//!   Critical among it, and what the full queue shed is counted per priority.
//!
//! Waits on what the sensor prints or writes, with generous time limits.

mod common;

use common::{harrier_run, wait_for};
use harrier_capture::testing::{bpf_available, scale, slack};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A scratch folder, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("harrier-faults-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// A file the rules watch the opens of; its path.
    fn file(&self, name: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, "x").unwrap();
        p.display().to_string()
    }

    /// `text` written to `name`; its path.
    fn write(&self, name: &str, text: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rule(name: &str, path: &str, priority: &str) -> String {
    format!(
        "- rule: {name}\n  desc: t\n  condition: evt.type = openat and fd.name = {path}\n  \
         output: opened %fd.name\n  priority: {priority}\n"
    )
}

/// Opens `path` `n` times: an alert each.
fn open_n(path: &str, n: usize) {
    for _ in 0..n {
        std::fs::File::open(path).unwrap();
    }
}

/// Polls `f` until it holds; panics with `what` after `limit` (scaled).
fn until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + slack(limit);
    while !f() {
        assert!(Instant::now() < end, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The JSON alerts a sensor prints on stdout, kept as they come.
struct Alerts {
    rx: Receiver<String>,
    got: Vec<Value>,
}

impl Alerts {
    fn new(rx: Receiver<String>) -> Alerts {
        Alerts { rx, got: Vec::new() }
    }

    fn count(&self, rule: &str) -> usize {
        self.got.iter().filter(|a| a["rule"] == rule).count()
    }

    /// Until `n` alerts of `rule` have come.
    fn wait(&mut self, rule: &str, n: usize) {
        while self.count(rule) < n {
            let l = self
                .rx
                .recv_timeout(slack(Duration::from_secs(60)))
                .unwrap_or_else(|_| panic!("{} of {n} alerts of '{rule}' on stdout", self.count(rule)));
            if let Ok(v) = serde_json::from_str::<Value>(&l) {
                self.got.push(v);
            }
        }
    }
}

/// The last line of a stats file (`--stats-file`): its `outputs` key.
fn outputs(stats: &Path) -> Value {
    let text = std::fs::read_to_string(stats).unwrap_or_default();
    let last = text.lines().rev().find_map(|l| serde_json::from_str::<Value>(l).ok());
    last.map_or(Value::Null, |v| v["outputs"].clone())
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The exit summary's line of `output` (its failures may have been said before).
fn summary(err: &Receiver<String>, output: &str) -> String {
    loop {
        let l = wait_for(err, &format!("harrier: output {output}: "));
        if l.contains(" sent, ") {
            return l;
        }
    }
}

fn sigint_and_wait(child: &mut common::Reaped) {
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success(), "SIGINT ends it cleanly");
}

// ------------------------------------------------------------------ kill -9

/// The BPF objects a process holds through its fds (their fdinfo names them).
fn bpf_objects(pid: u32) -> BTreeSet<(&'static str, u32)> {
    let mut set = BTreeSet::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return set };
    for e in dir.flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for line in text.lines() {
            for (key, kind) in [("prog_id:", "prog"), ("map_id:", "map"), ("link_id:", "link")] {
                if let Some(id) = line.strip_prefix(key).and_then(|v| v.trim().parse().ok()) {
                    set.insert((kind, id));
                }
            }
        }
    }
    set
}

/// Whether the kernel still has this object, whoever holds it (BPF_*_GET_FD_BY_ID).
fn bpf_exists(kind: &str, id: u32) -> bool {
    // BPF_{PROG,MAP,LINK}_GET_NEXT_ID: an fd by id would hold the object.
    // On a prog array that fd's close is a second release of its last user
    // reference, and while the first's deferred clear is still queued, the
    // kernel's reference for it is taken again but put once: the map leaks
    // (2026-12-02, 6.18: get-fd-by-id and close in a loop after kill -9
    // left exit_tails and guard_tails_btf behind for good).
    let cmd: libc::c_long = match kind {
        "prog" => 11,
        "map" => 12,
        _ => 31,
    };
    // The start_id and next_id of union bpf_attr.
    let mut attr = [id - 1, 0u32, 0u32];
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of_val(&attr)) };
    if r == 0 {
        return attr[1] == id;
    }
    let e = std::io::Error::last_os_error();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "looking BPF {kind} {id} up: {e}");
    false
}

/// (pid, state) of each process whose parent is `pid`.
fn children(pid: u32) -> Vec<(u32, char)> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let Some((_, rest)) = stat.rsplit_once(") ") else { continue };
        let mut f = rest.split_whitespace();
        let (state, ppid) = (f.next().and_then(|s| s.chars().next()), f.next().and_then(|s| s.parse().ok()));
        if ppid == Some(pid) {
            found.push((p, state.unwrap_or('?')));
        }
    }
    found
}

fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

fn tracefs_mounts() -> usize {
    let m = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    m.lines().filter(|l| l.contains(" - tracefs ")).count()
}

#[test]
fn kill_9_leaves_no_bpf_object_loaded_and_the_next_start_alerts() {
    if !bpf_available() {
        return;
    }
    let dir = Scratch::new("kill9");
    let (marker, held) = (dir.file("marker"), dir.file("held"));
    // A kill rule the kernel decides up to a term only user space knows
    // (proc.cmdline) holds tasks: the guardian runs.
    let rules = rule("Faults marker", &marker, "WARNING")
        + &format!(
            "- rule: Faults held\n  desc: t\n  condition: evt.type = openat and evt.is_open_read = true \
             and fd.name = {held} and not (proc.name = hrnone and proc.cmdline endswith \" -\")\n  output: read %fd.name\n  \
             priority: WARNING\n"
        );
    let rules = dir.write("rules.yaml", &rules);
    let args = ["--json", "-r", &rules, "--enforce", "Faults held=kill"];
    let tracefs_before = tracefs_mounts();
    let kinds = |s: &BTreeSet<(&str, u32)>, k: &str| s.iter().filter(|o| o.0 == k).count();

    // Each start alerts although the one before was killed: nothing to clean. In the emulated
    // guests each per-syscall tracepoint's release waits seconds of grace period: the host
    // covers that mode, the guests the dispatcher (the final start is `auto`).
    let modes: &[&str] = if scale() > 1 { &["dispatcher"] } else { &["per-syscall", "dispatcher"] };
    for &mode in modes {
        let (mut child, out, err) = harrier_run(&[&args[..], &["--attach", mode]].concat());
        let plan = wait_for(&err, "enforce (kill) 'Faults held'");
        assert!(plan.contains("(the task held meanwhile"), "{plan}");
        wait_for(&err, "rules loaded");
        let mut alerts = Alerts::new(out);
        open_n(&marker, 1);
        alerts.wait("Faults marker", 1);

        let sensor = child.0.id();
        let mut objects = bpf_objects(sensor);
        assert!(kinds(&objects, "prog") > 0 && kinds(&objects, "map") > 0, "{mode}: {objects:?}");
        let guardian = children(sensor);
        assert_eq!(guardian.len(), 1, "the guardian is the sensor's one child: {guardian:?}");
        let guardian = guardian[0].0;
        let kept = bpf_objects(guardian);
        assert!(
            kept.len() == 1 && kinds(&kept, "map") == 1,
            "the guardian holds the held-task map only, no program or link: {kept:?}"
        );
        objects.extend(kept);

        unsafe { libc::kill(sensor as i32, libc::SIGKILL) };
        let _ = child.0.wait();
        // Released objects are freed after an RCU grace period or from a work item.
        let end = Instant::now() + slack(Duration::from_secs(30));
        loop {
            let left: Vec<_> = objects.iter().filter(|(k, id)| bpf_exists(k, *id)).collect();
            if left.is_empty() {
                break;
            }
            assert!(Instant::now() < end, "{mode}: still loaded after kill -9: {left:?} of {objects:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        until(Duration::from_secs(10), "the guardian outlived the sensor", || {
            matches!(state(guardian), None | Some('Z'))
        });
        assert_eq!(tracefs_mounts(), tracefs_before, "no tracefs mount left");
    }

    let (mut child, out, err) = harrier_run(&args);
    wait_for(&err, "rules loaded");
    let mut alerts = Alerts::new(out);
    open_n(&marker, 1);
    alerts.wait("Faults marker", 1);
    let guardian = children(child.0.id());
    sigint_and_wait(&mut child);
    assert!(guardian.iter().all(|g| state(g.0).is_none()), "the guardian ended and was reaped with it");
}

// --------------------------------------------------------------- full disk

/// A tmpfs mounted on `dir` for the test, unmounted on drop (lazily, so a
/// failing test's sensor still holding a file there cannot keep it).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: PathBuf, size: &str) -> Tmpfs {
        std::fs::create_dir_all(&dir).unwrap();
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let (target, opts) = (c(dir.to_str().unwrap()), c(&format!("size={size},mode=0755")));
        let r = unsafe {
            libc::mount(
                c("harrier-faults").as_ptr(),
                target.as_ptr(),
                c("tmpfs").as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                opts.as_ptr().cast(),
            )
        };
        assert_eq!(r, 0, "mounting a tmpfs on {}: {}", dir.display(), std::io::Error::last_os_error());
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let p = std::ffi::CString::new(self.0.to_str().unwrap()).unwrap();
        unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Writes `path` until the file system is full.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let block = [b'.'; 4096];
    loop {
        match f.write(&block) {
            Ok(n) if n == block.len() => {}
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
}

fn lines_in(path: &Path) -> usize {
    std::fs::read(path).unwrap_or_default().iter().filter(|&&b| b == b'\n').count()
}

#[test]
fn a_full_disk_is_counted_stdout_keeps_every_alert_and_the_file_catches_up() {
    if !bpf_available() {
        return;
    }
    const RULE: &str = "Faults disk";
    let dir = Scratch::new("disk");
    // Dropped after the sensor (declared before it): unmounted whatever happens.
    let disk = Tmpfs::mount(dir.path("disk"), "64k");
    let marker = dir.file("marker");
    let rules = dir.write("rules.yaml", &rule(RULE, &marker, "WARNING"));
    let (file, stats) = (disk.0.join("alerts.json"), dir.path("stats.jsonl"));
    let (mut child, out, err) = harrier_run(&[
        "--json",
        "-r",
        &rules,
        "--file-output",
        file.to_str().unwrap(),
        "--stats-file",
        stats.to_str().unwrap(),
        "--stats-interval",
        "100",
    ]);
    wait_for(&err, "rules loaded");
    let mut alerts = Alerts::new(out);
    open_n(&marker, 1);
    alerts.wait(RULE, 1);
    until(Duration::from_secs(20), "the first alert in the file", || lines_in(&file) == 1);

    // The disk full: the alert file's last page takes a few more lines, then writes fail.
    let filler = disk.0.join("filler");
    fill(&filler);
    const FULL: usize = 40;
    open_n(&marker, FULL);
    alerts.wait(RULE, 1 + FULL);
    let mut o = Value::Null;
    until(Duration::from_secs(20), "failed writes counted", || {
        o = outputs(&stats);
        n(&o["file"]["errors"]) > 0 && n(&o["stdout"]["sent"]) == 1 + FULL as u64
    });
    assert!(lines_in(&file) < 1 + FULL, "the disk was full, yet every alert was written");
    assert_eq!((n(&o["file"]["lost"]), n(&o["stdout"]["lost"]), n(&o["stdout"]["errors"])), (0, 0, 0), "{o}");
    assert!(n(&o["file"]["sent"]) < 1 + FULL as u64, "the file's alerts wait (queued or in its batch): {o}");
    eprintln!("disk full: {} lines in the file; {o}", lines_in(&file));

    // Space returns: the queued alerts are written, then new ones.
    std::fs::remove_file(&filler).unwrap();
    until(Duration::from_secs(20), "the file catching up", || lines_in(&file) == 1 + FULL);
    open_n(&marker, 5);
    alerts.wait(RULE, 1 + FULL + 5);
    until(Duration::from_secs(20), "new alerts in the file", || lines_in(&file) == 1 + FULL + 5);
    let text = std::fs::read_to_string(&file).unwrap();
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("a cut line ({e}): {l}"));
        assert_eq!(v["rule"], RULE);
    }
    sigint_and_wait(&mut child);
    let o = outputs(&stats);
    assert_eq!((n(&o["file"]["sent"]), n(&o["file"]["lost"])), (1 + FULL as u64 + 5, 0), "{o}");
    let summary = summary(&err, "file");
    assert!(summary.contains(" 0 lost") && summary.contains("failed attempt(s)"), "{summary}");
}

// ------------------------------------------------------------ HTTP down

/// The receiver's down time: 60 s (the issue's figure) on a normal machine,
/// HARRIER_FAULTS_DOWN_SECS if set. Nothing in the outputs is timed by it
/// (the retries back off to 1 s, the queue is bounded by count and bytes),
/// so an emulated guest tests the same with 60 s / HARRIER_TEST_SCALE.
fn down_window() -> Duration {
    let secs = std::env::var("HARRIER_FAULTS_DOWN_SECS").ok().and_then(|v| v.parse().ok());
    Duration::from_secs(secs.unwrap_or((60 / scale() as u64).max(3)))
}

/// A loopback port below the ephemeral range, free now: no outgoing
/// connection takes it (nor connects to itself) while nothing listens.
fn quiet_port() -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let low: u16 = range.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(32768);
    let (lo, hi) = (10_000u16, low.clamp(10_001, 30_000));
    let start = lo + (std::process::id() % u32::from(hi - lo)) as u16;
    (start..hi).chain(lo..start).find(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok()).expect("a free port")
}

/// An HTTP/1.1 receiver that keeps every JSON body (alerts and the loss
/// notice) and answers 200; it stops accepting on drop.
struct HttpReceiver {
    got: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
    port: u16,
}

impl HttpReceiver {
    fn start(port: u16) -> HttpReceiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("binding the receiver's port again");
        let (got, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (g, s) = (got.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let g = g.clone();
                if let Ok(c) = conn {
                    std::thread::spawn(move || serve(c, &g));
                }
            }
        });
        HttpReceiver { got, stop, port }
    }

    fn count(&self, f: impl Fn(&Value) -> bool) -> usize {
        self.got.lock().unwrap().iter().filter(|v| f(v)).count()
    }
}

impl Drop for HttpReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wakes the accept loop
    }
}

/// Requests on one kept-alive connection until the sender closes it.
fn serve(conn: TcpStream, got: &Mutex<Vec<Value>>) {
    let Ok(mut w) = conn.try_clone() else { return };
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    loop {
        let mut len = 0;
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let h = line.trim_end();
            if h.is_empty() && len > 0 {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(v) = serde_json::from_slice(&body) {
            got.lock().unwrap().push(v);
        }
        if w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").is_err() {
            return;
        }
    }
}

/// Sleeps until `end`, the most alerts the http output's queue held meanwhile
/// (sampled from the stats lines) raised into `peak`.
fn sample_until(end: Instant, stats: &Path, peak: &mut u64) {
    while Instant::now() < end {
        *peak = (*peak).max(n(&outputs(stats)["http"]["queued"]));
        std::thread::sleep(Duration::from_millis(100).min(end.saturating_duration_since(Instant::now())));
    }
}

#[test]
fn an_http_receiver_down_for_a_minute_gets_the_queue_when_back_and_the_shed_is_counted() {
    if !bpf_available() {
        return;
    }
    const WARN: &str = "Faults warning";
    const CRIT: &str = "Faults critical";
    const NOTICE: &str = "Falco internal: outputs queue drop";
    const CAPACITY: u64 = 100;
    // Three bursts across the window, each 150 Warnings with a Critical every
    // 30th: an alert per open (stdout is off: with a queue this small it would
    // shed a burst too; the http output's own counts account for each alert).
    const BURSTS: u32 = 3;
    const PER_BURST: usize = 150;
    const EVERY: usize = 30;
    let (warns, crits) = (BURSTS as usize * PER_BURST, BURSTS as usize * PER_BURST / EVERY);
    let down = down_window();
    let dir = Scratch::new("http");
    let (warn, crit) = (dir.file("warn"), dir.file("crit"));
    let rules = dir.write("rules.yaml", &(rule(WARN, &warn, "WARNING") + &rule(CRIT, &crit, "CRITICAL")));
    let port = quiet_port();
    let config = dir.write(
        "harrier.yaml",
        &format!(
            "json_output: true\nstdout_output:\n  enabled: false\nhttp_output:\n  enabled: true\n  \
             url: http://127.0.0.1:{port}/alerts\n  keep_alive: true\noutputs_queue:\n  capacity: {CAPACITY}\n"
        ),
    );
    let stats = dir.path("stats.jsonl");
    let (mut child, out, err) = harrier_run(&[
        "-c",
        &config,
        "-r",
        &rules,
        "--stats-file",
        stats.to_str().unwrap(),
        "--stats-interval",
        "100",
    ]);
    wait_for(&err, "rules loaded");
    drop(out);

    // Nothing listens on the port for the whole window.
    let t0 = Instant::now();
    let mut peak = 0;
    for b in 0..BURSTS {
        sample_until(t0 + down * b / BURSTS, &stats, &mut peak);
        for i in 0..PER_BURST {
            open_n(&warn, 1);
            if i % EVERY == 0 {
                open_n(&crit, 1);
            }
        }
    }
    sample_until(t0 + down, &stats, &mut peak);
    let o = outputs(&stats)["http"].clone();
    assert_eq!(n(&o["sent"]), 0, "nothing delivered while down: {o}");
    assert!(n(&o["errors"]) > 0, "the failed attempts are counted: {o}");
    assert!(n(&o["shed"]["Warning"]) > 0, "the queue overflowed: {o}");
    assert_eq!((n(&o["shed"]["Critical"]), n(&o["lost"])), (0, n(&o["shed"]["Warning"])), "{o}");
    assert!(peak > 0 && peak <= CAPACITY, "the queue held {peak}, its capacity {CAPACITY}");

    // Back on the same port: what was queued is delivered, then the notice of what was shed.
    let receiver = HttpReceiver::start(port);
    let is = |rule: &'static str| move |v: &Value| v["rule"] == rule;
    let mut o = Value::Null;
    // The notice comes once the queue is empty: lanes still waiting to retry
    // their one alert in flight (up to 1 s) may deliver it after the notice.
    until(Duration::from_secs(60), "every alert accounted for, and the loss notice", || {
        o = outputs(&stats)["http"].clone();
        receiver.count(is(NOTICE)) == 1 && n(&o["sent"]) + n(&o["lost"]) == (warns + crits) as u64
    });
    let (got_w, got_c) = (receiver.count(is(WARN)), receiver.count(is(CRIT)));
    let shed = n(&o["shed"]["Warning"]);
    assert_eq!(got_c, crits, "every Critical delivered: {o}");
    assert_eq!(got_w as u64 + shed, warns as u64, "each Warning delivered or counted as shed: {o}");
    assert_eq!((o["failed"].clone(), n(&o["sent"])), (serde_json::json!({}), (got_w + got_c) as u64), "{o}");
    eprintln!("receiver back after {:?}: {got_w} Warnings, {got_c} Criticals; {o}", t0.elapsed());
    let notice = receiver.got.lock().unwrap().iter().find(|v| v["rule"] == NOTICE).cloned().unwrap();
    let f = &notice["output_fields"];
    assert_eq!(notice["priority"], "Warning", "the most severe lost: {notice}");
    assert_eq!((n(&f["n_drops"]), n(&f["n_drops_warning"]), n(&f["n_drops_critical"])), (shed, shed, 0));

    sigint_and_wait(&mut child);
    // An alert per open, no event lost in the kernel.
    let totals = wait_for(&err, " dropped in the kernel, ");
    let none_lost = format!(" 0 dropped in the kernel, 0 shed by a full backlog, {} alerts", warns + crits);
    assert!(totals.contains(&none_lost), "{totals}");
    let summary = summary(&err, "http");
    let want = format!("{} sent, {shed} lost; shed from a full queue: Warning {shed}", got_w + got_c);
    assert!(summary.contains(&want), "{summary}");
}
