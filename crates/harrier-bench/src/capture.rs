//! `harrier-bench capture` (make bench-capture): the sensor on a getpid loop,
//! dd and redis-benchmark, each configuration run side by side in rounds.

use crate::workload::{median, paused_loop_threads, paused_shell, Paused};
use anyhow::{bail, Context, Result};
use harrier_capture::{parse_syscalls, AttachMode, Config, Session, Stats};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const REDIS_PORT: u16 = 16379;
pub const REDIS_TESTS: &str = "ping_inline,ping_mbulk,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset";
const SMALL_SET: &str = "sendto,recvfrom";
pub const BIG_SET: &str = "read,write,close,fcntl,gettimeofday,epoll_ctl,epoll_wait,clock_gettime,\
clock_nanosleep,socket,connect,sendto,recvfrom,setsockopt,accept4";
/// Requests per redis-benchmark test.
const REDIS_REQUESTS: u64 = 100_000;
/// A syscall nothing in the workloads calls: the sensor is attached, idle.
const UNUSED: &str = "acct";

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Workload {
    /// THREADS threads × COUNT raw getpid.
    Getpid {
        threads: usize,
        count: u64,
    },
    Dd,
    Redis,
}

/// One line of the table.
pub struct Case {
    pub label: String,
    pub workload: Workload,
    /// None: no sensor.
    pub syscalls: Option<&'static str>,
    /// Filter on the workload's pid (else: the whole machine).
    pub filter_workload: bool,
    /// Filter on a pid that is not the workload: every call is filtered out.
    pub filter_other: bool,
    pub mode: AttachMode,
    /// BPF run-time stats on (BPF ns/run) or off (wall figures without their cost).
    pub bpf_stats: bool,
    /// Empty programs where the sensor's would be (the floor of any
    /// exit-time sensor of these syscalls), not the sensor.
    pub floor: bool,
}

impl Case {
    /// The same case with another sensor variant.
    fn variant(&self, mode: AttachMode, bpf_stats: bool) -> Case {
        Case { label: self.label.clone(), mode, bpf_stats, ..*self }
    }
}

/// What one run measured.
#[derive(Default, Clone)]
pub struct Run {
    pub events: f64,
    pub events_per_s: f64,
    pub bpf_ns: f64,
    pub bytes_per_event: f64,
    pub consumer_ms_per_m: f64,
    pub drops: f64,
    /// ns per call (getpid), seconds (dd) or requests per second (redis).
    pub result: f64,
    /// Change against a no-sensor run of the same workload taken just before
    /// this one (ns per call for getpid, a fraction for dd and redis); NaN
    /// when unpaired. Pairs cancel the drift of a shared machine that
    /// separate medians of the two keep.
    pub paired: f64,
    /// redis: CPU µs per request of redis-server, redis-benchmark and the
    /// consumer together (kernel time included: the sensor's BPF runs in
    /// the traced tasks). Unlike requests/s, it hardly depends on what else
    /// the shared machine runs.
    pub cpu_us_per_request: f64,
    /// redis, paired: the requests/s a CPU-bound redis loses to that extra
    /// CPU, 1 − base CPU / case CPU (a fraction, negative = loss).
    pub paired_cpu: f64,
}

impl Run {
    fn unpaired(result: f64, cpu_us_per_request: f64) -> Run {
        Run { result, paired: f64::NAN, cpu_us_per_request, paired_cpu: f64::NAN, ..Run::default() }
    }
}

/// The change from `base` to `run` in the workload's unit.
pub fn change(w: Workload, run: f64, base: f64) -> f64 {
    match w {
        Workload::Getpid { .. } => run - base,
        Workload::Dd | Workload::Redis => run / base - 1.0,
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn spawn(w: Workload) -> Result<Paused> {
    match w {
        Workload::Getpid { threads, count } => paused_loop_threads(libc::SYS_getpid, count, threads),
        Workload::Dd => paused_shell("dd if=/dev/zero of=/dev/null bs=1 count=5000000"),
        Workload::Redis => {
            paused_shell(&format!("redis-benchmark -p {REDIS_PORT} -t {REDIS_TESTS} -q -n {REDIS_REQUESTS}"))
        }
    }
}

/// Requests/s of each test, from redis-benchmark -q lines ("SET: 51234.56
/// requests per second, ..."); all 11 of REDIS_TESTS or an error.
pub fn redis_results(out: &str) -> Result<Vec<f64>> {
    let v: Vec<f64> = out
        .split(['\n', '\r'])
        .filter_map(|l| l.split_once(": ")?.1.split_whitespace().next()?.parse().ok())
        .collect();
    if v.len() != REDIS_TESTS.split(',').count() {
        bail!("redis-benchmark printed {} results, expected 11: {out:?}", v.len());
    }
    Ok(v)
}

/// Mean requests/s over the tests.
fn redis_rps(out: &str) -> Result<f64> {
    let v = redis_results(out)?;
    Ok(v.iter().sum::<f64>() / v.len() as f64)
}

fn result_of(w: Workload, out: &str, wall: Duration) -> Result<f64> {
    match w {
        Workload::Getpid { .. } => Ok(out.trim().parse()?),
        Workload::Dd => Ok(wall.as_secs_f64()),
        Workload::Redis => redis_rps(out),
    }
}

/// BPF ns per run of the exit path: per selected event with per-syscall
/// tracepoints; per syscall on the machine (selected or not, tail calls
/// included) with the dispatcher.
fn bpf_ns_per_run(stats: &Stats) -> f64 {
    let exit_path = |n: &str| (n.starts_with("hr_exit_") && n != "hr_exit_task") || n == "hr_dispatch";
    let (cnt, ns) = stats
        .programs
        .iter()
        .filter(|p| exit_path(&p.name))
        .fold((0u64, 0u64), |(c, n), p| (c + p.run_cnt, n + p.run_time_ns));
    if cnt == 0 {
        f64::NAN
    } else {
        ns as f64 / cnt as f64
    }
}

/// CPU ns a process has used (user + system), from /proc/PID/stat.
fn process_cpu_ns(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised comm: state is the 3rd field, utime the 14th.
    let rest = stat.rsplit_once(')').context("malformed /proc/PID/stat")?.1;
    let f: Vec<u64> = rest.split_whitespace().skip(11).take(2).map(|v| v.parse().unwrap_or(0)).collect();
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(f.iter().sum::<u64>() * 1_000_000_000 / hz)
}

/// CPU ns of this process's waited-for children (the workload once reaped).
fn children_cpu_ns() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

/// Where the workload's CPU goes: its own children, plus a server it talks to.
struct CpuMeter {
    server: Option<u32>,
    start: (u64, u64),
}

impl CpuMeter {
    fn start(server: Option<u32>) -> Result<CpuMeter> {
        let server_ns = server.map(process_cpu_ns).transpose()?.unwrap_or(0);
        Ok(CpuMeter { server, start: (children_cpu_ns(), server_ns) })
    }

    /// CPU µs per redis request since start, adding the consumer's `extra_ns`.
    fn us_per_request(&self, w: Workload, extra_ns: u64) -> Result<f64> {
        let Some(server) = self.server.filter(|_| w == Workload::Redis) else { return Ok(f64::NAN) };
        let used = children_cpu_ns() - self.start.0 + process_cpu_ns(server)? - self.start.1 + extra_ns;
        let requests = REDIS_REQUESTS * REDIS_TESTS.split(',').count() as u64;
        Ok(used as f64 / 1e3 / requests as f64)
    }
}

/// One run of a case; `server` is the redis-server's pid when one runs.
pub fn run(case: &Case, server: Option<u32>) -> Result<Run> {
    let meter = CpuMeter::start(server)?;
    let mut work = spawn(case.workload)?;
    let floor = match case.syscalls {
        Some(list) if case.floor => {
            Some(crate::costs::attach_empty(list, case.mode == AttachMode::Dispatcher)?)
        }
        _ => None,
    };
    let Some(list) = case.syscalls.filter(|_| floor.is_none()) else {
        work.release()?;
        let (out, wall) = work.finish()?;
        drop(floor);
        let cpu = meter.us_per_request(case.workload, 0)?;
        return Ok(Run::unpaired(result_of(case.workload, &out, wall)?, cpu));
    };
    let mut cfg = Config::new(parse_syscalls(list)?);
    if case.filter_workload {
        cfg.pid = Some(work.pid());
    }
    if case.filter_other {
        cfg.pid = Some(1);
    }
    cfg.attach = case.mode;
    cfg.run_time_stats = case.bpf_stats;
    let mut session = Session::start_counting(&cfg)?;
    let (cpu0, t0) = (thread_cpu_ns(), Instant::now());
    work.release()?;
    // The consumer: this thread, draining on the same timer as `harrier capture`.
    let mut pace = session.pace();
    while !work.try_done()? {
        session.sleep_and_drain(&mut pace)?;
    }
    session.drain()?;
    let (cpu, secs) = (thread_cpu_ns() - cpu0, t0.elapsed().as_secs_f64());
    let (out, wall) = work.finish()?;
    let stats = session.stop()?;
    let u = &stats.user;
    let events = (u.events - u.meta_events) as f64;
    Ok(Run {
        events,
        events_per_s: events / secs,
        bpf_ns: if case.bpf_stats { bpf_ns_per_run(&stats) } else { f64::NAN },
        bytes_per_event: if events > 0.0 { u.bytes as f64 / u.events as f64 } else { f64::NAN },
        consumer_ms_per_m: if events > 0.0 { cpu as f64 / 1e6 / (events / 1e6) } else { f64::NAN },
        drops: stats.total_drops() as f64,
        result: result_of(case.workload, &out, wall)?,
        paired: f64::NAN,
        cpu_us_per_request: meter.us_per_request(case.workload, cpu)?,
        paired_cpu: f64::NAN,
    })
}

/// A sensor case right after a no-sensor run of its workload (stats-off
/// cases only: theirs are the wall figures the targets are about).
fn run_paired(case: &Case, server: Option<u32>) -> Result<Run> {
    if case.syscalls.is_none() || case.bpf_stats {
        return run(case, server);
    }
    let base = run(&Case { syscalls: None, ..case.variant(case.mode, false) }, server)?;
    let mut r = run(case, server)?;
    r.paired = change(case.workload, r.result, base.result);
    r.paired_cpu = 1.0 - r.cpu_us_per_request / base.cpu_us_per_request;
    Ok(r)
}

/// A redis-server of our own on a private port; stopped (by PID) on drop.
pub struct Redis(Child);

impl Redis {
    pub fn start() -> Result<Redis> {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &REDIS_PORT.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .context("starting redis-server (make deps installs it)")?;
        let r = Redis(child);
        for _ in 0..100 {
            let ping = Command::new("redis-cli").args(["-p", &REDIS_PORT.to_string(), "ping"]).output();
            if ping.is_ok_and(|o| o.stdout.starts_with(b"PONG")) {
                return Ok(r);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("redis-server did not answer on port {REDIS_PORT}")
    }
}

impl Redis {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The workloads and selections; each sensor case once per attach mode with
/// run-time stats off (wall figures), then on (BPF ns/run).
pub fn cases(quick: bool) -> Vec<Case> {
    let count = if quick { 500_000 } else { 3_000_000 };
    let getpid = Workload::Getpid { threads: 1, count };
    let two = Workload::Getpid { threads: 2, count };
    let case = |label: &str, workload, syscalls, filter_workload, filter_other| Case {
        label: label.to_string(),
        workload,
        syscalls,
        filter_workload,
        filter_other,
        mode: AttachMode::PerSyscall,
        bpf_stats: false,
        floor: false,
    };
    let mut base = vec![
        case("getpid loop: no sensor", getpid, None, false, false),
        case("getpid loop: getpid captured", getpid, Some("getpid"), true, false),
        case("getpid loop: getpid filtered out (pid)", getpid, Some("getpid"), false, true),
        case("getpid loop: unselected (getppid attached)", getpid, Some("getppid"), false, false),
        case("2 getpid threads: getpid captured", two, Some("getpid"), true, false),
        case("dd bs=1: no sensor", Workload::Dd, None, false, false),
        case("dd bs=1: read,write captured", Workload::Dd, Some("read,write"), true, false),
    ];
    if !quick {
        for (label, set) in [
            ("no sensor", None),
            ("attached, nothing called", Some(UNUSED)),
            ("small set", Some(SMALL_SET)),
            ("big set", Some(BIG_SET)),
        ] {
            base.push(case(&format!("redis: {label}"), Workload::Redis, set, false, false));
        }
    }
    let floor = |c: Case, mode| Case {
        label: format!("{}: empty programs (floor)", c.label),
        floor: true,
        mode,
        ..c
    };
    let mut floors = vec![case("getpid loop: getpid", getpid, Some("getpid"), false, false)];
    if !quick {
        floors.push(case("redis: big set", Workload::Redis, Some(BIG_SET), false, false));
    }
    let mut v = Vec::new();
    for c in base {
        if c.syscalls.is_none() {
            v.push(c);
            continue;
        }
        for stats in [false, true] {
            for mode in [AttachMode::PerSyscall, AttachMode::Dispatcher] {
                v.push(c.variant(mode, stats));
            }
        }
    }
    for c in floors {
        for mode in [AttachMode::PerSyscall, AttachMode::Dispatcher] {
            v.push(floor(Case { label: c.label.clone(), ..c }, mode));
        }
    }
    v
}

/// What `auto` picks for a case.
pub fn auto_pick(case: &Case) -> Result<harrier_capture::AttachChoice> {
    let Some(list) = case.syscalls else { bail!("no sensor in this case") };
    harrier_capture::attach::auto_choice(&Config::new(parse_syscalls(list)?))
}

/// What `auto` picks, per selection label.
pub type Picks = Vec<(String, harrier_capture::AttachChoice)>;

/// Runs every case `rounds` times, interleaved, and returns per-case
/// medians, plus what `auto` picks for each selection (by label).
pub fn measure(cases: &[Case], rounds: usize) -> Result<(Vec<Run>, Picks)> {
    let redis =
        if cases.iter().any(|c| c.workload == Workload::Redis) { Some(Redis::start()?) } else { None };
    let mut picks: Picks = Vec::new();
    for c in cases.iter().filter(|c| c.syscalls.is_some() && !c.floor) {
        if !picks.iter().any(|(l, _)| *l == c.label) {
            eprintln!("bench-capture: what auto picks for {}", c.label);
            picks.push((c.label.clone(), auto_pick(c)?));
        }
    }
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); cases.len()];
    for r in 0..rounds {
        for (i, c) in cases.iter().enumerate() {
            let stats = if c.bpf_stats { ", stats on" } else { "" };
            eprintln!("bench-capture: round {}/{rounds}: {} [{}{stats}]", r + 1, c.label, c.mode);
            runs[i].push(run_paired(c, redis.as_ref().map(Redis::pid))?);
        }
    }
    Ok((runs.into_iter().map(|v| median_run(&v)).collect(), picks))
}

fn median_run(v: &[Run]) -> Run {
    let m = |f: fn(&Run) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
    Run {
        events: m(|r| r.events),
        events_per_s: m(|r| r.events_per_s),
        bpf_ns: m(|r| r.bpf_ns),
        bytes_per_event: m(|r| r.bytes_per_event),
        consumer_ms_per_m: m(|r| r.consumer_ms_per_m),
        drops: m(|r| r.drops),
        result: m(|r| r.result),
        paired: m(|r| r.paired),
        cpu_us_per_request: m(|r| r.cpu_us_per_request),
        paired_cpu: m(|r| r.paired_cpu),
    }
}
