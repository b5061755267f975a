//! vs-falco's four workloads, each run once per (round, sensor): what the
//! application got done, how fast, and how many syscalls it made.

use super::softirqd::Softirqd;
use crate::capture::{redis_results, Redis, REDIS_PORT, REDIS_TESTS};
use crate::rules_load::load::{Load, MAX};
use crate::workload::{paused_loop, paused_shell, Paused};
use anyhow::{anyhow, Context, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// (a) rules-load's open/close/connect mix with an exec every N iterations.
    Mix,
    /// (b) the seed proposal's redis-benchmark.
    Redis,
    /// (c) raw getpid: a syscall no rule selects.
    Getpid,
    /// (d) a shell loop running /bin/true: process creation.
    Exec,
}

impl Workload {
    pub const ALL: [Workload; 4] = [Workload::Mix, Workload::Redis, Workload::Getpid, Workload::Exec];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Mix => "mix",
            Workload::Redis => "redis",
            Workload::Getpid => "getpid",
            Workload::Exec => "exec",
        }
    }

    pub fn parse(s: &str) -> Result<Workload> {
        Workload::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| anyhow!("unknown workload '{s}' (mix, redis, getpid, exec)"))
    }

    /// What one operation is, for the table.
    pub fn op(self) -> &'static str {
        match self {
            Workload::Mix => "syscall",
            Workload::Redis => "request",
            Workload::Getpid => "call",
            Workload::Exec => "fork+exec",
        }
    }
}

/// How much each workload does per run.
#[derive(Debug, Clone)]
pub struct Sizes {
    pub mix: Duration,
    pub exec_every: u64,
    pub redis_requests: u64,
    pub getpid_calls: u64,
    pub execs: u64,
}

/// One workload run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Done {
    pub ops: f64,
    pub secs: f64,
    /// The workload's syscalls: counted (mix: its own 10 per iteration;
    /// getpid: the calls), or ops × the calibrated syscalls per op.
    pub syscalls: f64,
    /// The mix thread's own CPU time over the run, seconds (0: not measured).
    pub load_cpu_s: f64,
    /// The ksoftirqd threads' CPU time over the mix's run, seconds (softirqd.rs).
    pub softirqd_s: f64,
}

impl Done {
    pub fn ops_per_s(&self) -> f64 {
        self.ops / self.secs
    }
}

/// What the workloads need that outlives a run: the idle load thread, the
/// redis-server, and the syscalls per op measured once without a sensor.
pub struct Bench {
    pub sizes: Sizes,
    load: Option<Load>,
    redis: Option<Redis>,
    softirqd: Softirqd,
    /// Syscalls per op of redis (server + client) and of the exec loop.
    pub per_op: [(Workload, f64); 2],
}

fn shell_loop(n: u64) -> String {
    format!("sh -c 'i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done'")
}

impl Bench {
    pub fn new(sizes: Sizes, workloads: &[Workload]) -> Result<Bench> {
        let load = match workloads.contains(&Workload::Mix) {
            true => Some(Load::start(None, sizes.exec_every)?),
            false => None,
        };
        let redis = match workloads.contains(&Workload::Redis) {
            true => Some(Redis::start()?),
            false => None,
        };
        let mut b = Bench {
            sizes,
            load,
            redis,
            softirqd: Softirqd::find(),
            per_op: [(Workload::Redis, f64::NAN), (Workload::Exec, f64::NAN)],
        };
        for w in [Workload::Redis, Workload::Exec].into_iter().filter(|w| workloads.contains(w)) {
            let per_op = b.calibrate(w)?;
            b.per_op.iter_mut().find(|p| p.0 == w).expect("listed").1 = per_op;
        }
        Ok(b)
    }

    pub fn redis_pid(&self) -> Option<u32> {
        self.redis.as_ref().map(Redis::pid)
    }

    fn per_op(&self, w: Workload) -> f64 {
        self.per_op.iter().find(|p| p.0 == w).map_or(f64::NAN, |p| p.1)
    }

    /// Syscalls per op, counted once with no sensor by a perf counter on
    /// raw_syscalls:sys_enter (it puts every task on the slow syscall path,
    /// so never while timing).
    fn calibrate(&mut self, w: Workload) -> Result<f64> {
        let n = self.calibration_size(w);
        let mut work = self.spawn(w, n)?;
        let mut counters = vec![SyscallCounter::open(work.pid(), true)?];
        if let (Workload::Redis, Some(pid)) = (w, self.redis_pid()) {
            for tid in threads(pid) {
                counters.push(SyscallCounter::open(tid, false)?);
            }
        }
        let done = self.finish(w, &mut work, n)?;
        let n: u64 = counters.iter().map(SyscallCounter::read).sum::<Result<u64>>()?;
        Ok(n as f64 / done.ops)
    }

    fn calibration_size(&self, w: Workload) -> u64 {
        match w {
            Workload::Redis => (self.sizes.redis_requests / 10).max(1000),
            _ => (self.sizes.execs / 5).max(100),
        }
    }

    fn spawn(&self, w: Workload, n: u64) -> Result<Paused> {
        match w {
            Workload::Redis => {
                paused_shell(&format!("redis-benchmark -p {REDIS_PORT} -t {REDIS_TESTS} -q -n {n}"))
            }
            Workload::Getpid => paused_loop(libc::SYS_getpid, n),
            Workload::Exec => paused_shell(&shell_loop(n)),
            Workload::Mix => unreachable!("the mix is a thread of this process"),
        }
    }

    /// Releases a spawned workload of size `n` and reads what it did.
    fn finish(&self, w: Workload, work: &mut Paused, n: u64) -> Result<Done> {
        work.release()?;
        let (out, wall) = work.finish()?;
        let n = n as f64;
        Ok(match w {
            Workload::Redis => {
                // Each test runs n requests: the time is the sum of theirs.
                let rps = redis_results(&out)?;
                let ops = n * rps.len() as f64;
                Done {
                    ops,
                    secs: rps.iter().map(|r| n / r).sum(),
                    syscalls: ops * self.per_op(w),
                    ..Done::default()
                }
            }
            Workload::Getpid => {
                let ns: f64 = out.trim().parse().with_context(|| format!("getpid loop printed {out:?}"))?;
                Done { ops: n, secs: n * ns / 1e9, syscalls: n, ..Done::default() }
            }
            _ => Done { ops: n, secs: wall.as_secs_f64(), syscalls: n * self.per_op(w), ..Done::default() },
        })
    }

    /// One timed run of `w`.
    pub fn run(&mut self, w: Workload) -> Result<Done> {
        let n = match w {
            Workload::Mix => {
                let load = self.load.as_ref().expect("started for the mix");
                let (i0, c0, t0) = (load.issued(), load.cpu_s()?, Instant::now());
                let k0 = self.softirqd.cpu_s()?;
                load.set_rate(MAX);
                std::thread::sleep(self.sizes.mix);
                load.set_rate(0);
                let (n, secs) = ((load.issued() - i0) as f64, t0.elapsed().as_secs_f64());
                let softirqd_s = self.softirqd.cpu_s()? - k0;
                return Ok(Done { ops: n, secs, syscalls: n, load_cpu_s: load.cpu_s()? - c0, softirqd_s });
            }
            Workload::Redis => self.sizes.redis_requests,
            Workload::Getpid => self.sizes.getpid_calls,
            Workload::Exec => self.sizes.execs,
        };
        let mut work = self.spawn(w, n)?;
        self.finish(w, &mut work, n)
    }
}

/// Thread ids of a process.
fn threads(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// linux/perf_event.h
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// A perf counter of raw_syscalls:sys_enter on one task (with `inherit`:
/// and the children it creates from now on; their counts join it at exit).
struct SyscallCounter(OwnedFd);

impl SyscallCounter {
    fn open(tid: u32, inherit: bool) -> Result<SyscallCounter> {
        let id = harrier_capture::tracefs::tracepoint_ids("raw_syscalls", &["sys_enter".to_string()])?[0]
            .ok_or_else(|| anyhow!("no raw_syscalls:sys_enter tracepoint"))?;
        // SAFETY: perf_event_attr is plain data; zero is a valid default.
        let mut attr: libbpf_sys::perf_event_attr = unsafe { std::mem::zeroed() };
        attr.type_ = libbpf_sys::PERF_TYPE_TRACEPOINT;
        attr.size = std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32;
        attr.config = id;
        attr.set_inherit(inherit as u64);
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const _,
                tid as i32,
                -1,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("perf_event_open(raw_syscalls:sys_enter)");
        }
        Ok(SyscallCounter(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    fn read(&self) -> Result<u64> {
        let mut v = 0u64;
        let n = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        anyhow::ensure!(n == 8, "reading a syscall counter: {}", std::io::Error::last_os_error());
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::parse(w.name()).unwrap(), w);
        }
        assert!(Workload::parse("dd").unwrap_err().to_string().contains("mix, redis, getpid, exec"));
    }

    #[test]
    fn a_counter_counts_a_child_and_its_children() {
        if unsafe { libc::geteuid() } != 0 {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "CI runs as root");
            return;
        }
        let loop_of = |n| {
            let mut w = paused_shell(&shell_loop(n)).unwrap();
            let c = SyscallCounter::open(w.pid(), true).unwrap();
            w.release().unwrap();
            w.finish().unwrap();
            c.read().unwrap()
        };
        let (ten, forty) = (loop_of(10), loop_of(40));
        // Each /bin/true is a fork, an exec and its start-up: dozens of syscalls.
        let per = (forty - ten) as f64 / 30.0;
        assert!(per > 10.0 && per < 1000.0, "{ten} and {forty} syscalls: {per} per exec");
    }
}
