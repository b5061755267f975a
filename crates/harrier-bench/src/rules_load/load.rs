//! The syscall load: a thread pinned to one CPU issuing syscalls of the types
//! Falco's rules capture, in a mix like a busy server's, at a set rate.
//!
//! One iteration is 10 syscalls: three openat+close of small files, one
//! openat of a missing file (ENOENT, as path lookups often are), and one UDP
//! socket+connect+close to a local port. Every `exec_every` iterations
//! (rules-load: [`EXEC_EVERY`], 2,000 = 20,000 syscalls) /bin/true is
//! executed (fork+execve). No getpid-style calls: every syscall is one the
//! rules or the state tracking attach to. Also vs-falco's state-heavy mix.

use anyhow::{Context, Result};
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const SYSCALLS_PER_ITERATION: u64 = 10;
/// rules-load's iterations between two execs.
pub const EXEC_EVERY: u64 = 2_000;
/// Iterations between clock checks.
const BATCH: u64 = 16;
/// `set_rate` value for "as fast as the CPU allows".
pub const MAX: u64 = u64::MAX;

struct Shared {
    stop: AtomicBool,
    /// Target syscalls per second (0: idle, MAX: unpaced).
    rate: AtomicU64,
    /// Bumped by set_rate so the worker restarts its pacing base.
    generation: AtomicU64,
    issued: AtomicU64,
}

pub struct Load {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<Result<()>>>,
    dir: std::path::PathBuf,
}

struct Targets {
    files: Vec<CString>,
    missing: CString,
    udp: libc::sockaddr_in,
    _sink: std::net::UdpSocket,
}

impl Targets {
    fn new(dir: &std::path::Path) -> Result<Targets> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut files = Vec::new();
        for i in 0..64 {
            let p = dir.join(format!("f{i}"));
            std::fs::write(&p, b"harrier load\n")?;
            files.push(CString::new(p.into_os_string().into_encoded_bytes())?);
        }
        let missing = CString::new(dir.join("missing").into_os_string().into_encoded_bytes())?;
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").context("binding the UDP sink")?;
        let port = sink.local_addr()?.port();
        let udp = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes([127, 0, 0, 1]) },
            sin_zero: [0; 8],
        };
        Ok(Targets { files, missing, udp, _sink: sink })
    }

    /// One iteration of the mix: SYSCALLS_PER_ITERATION syscalls.
    fn iteration(&self, n: u64) {
        unsafe {
            for k in 0..3u64 {
                let f = &self.files[((n * 3 + k) % self.files.len() as u64) as usize];
                let fd = libc::openat(libc::AT_FDCWD, f.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                libc::close(fd);
            }
            libc::openat(libc::AT_FDCWD, self.missing.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            libc::connect(
                s,
                (&self.udp as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            );
            libc::close(s);
        }
    }
}

fn pin(cpu: usize) {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn work(shared: &Shared, t: &Targets, exec_every: u64) -> Result<()> {
    let (mut n, mut to_exec) = (0u64, exec_every);
    let mut seen_gen = u64::MAX;
    let (mut base, mut base_issued) = (Instant::now(), 0u64);
    while !shared.stop.load(Ordering::Relaxed) {
        let generation = shared.generation.load(Ordering::Relaxed);
        if generation != seen_gen {
            seen_gen = generation;
            base = Instant::now();
            base_issued = shared.issued.load(Ordering::Relaxed);
        }
        let rate = shared.rate.load(Ordering::Relaxed);
        if rate == 0 {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        if rate != MAX {
            // Ahead of the schedule: sleep off the lead.
            let issued = shared.issued.load(Ordering::Relaxed) - base_issued;
            let due = base.elapsed().as_secs_f64() * rate as f64;
            if issued as f64 > due {
                let lead = (issued as f64 - due) / rate as f64;
                std::thread::sleep(Duration::from_secs_f64(lead.min(0.01)));
                continue;
            }
        }
        for _ in 0..BATCH {
            t.iteration(n);
            n += 1;
            to_exec -= 1;
            if to_exec == 0 {
                to_exec = exec_every;
                std::process::Command::new("/bin/true").status().context("running /bin/true")?;
            }
        }
        shared.issued.fetch_add(BATCH * SYSCALLS_PER_ITERATION, Ordering::Relaxed);
    }
    Ok(())
}

impl Load {
    /// Starts idle, on `cpu` if given; /bin/true runs every `exec_every` iterations.
    pub fn start(cpu: Option<usize>, exec_every: u64) -> Result<Load> {
        anyhow::ensure!(exec_every > 0, "the load execs every N iterations: N must be at least 1");
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::path::PathBuf::from(format!(
            "/var/tmp/.harrier-load-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let targets = Targets::new(&dir)?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            rate: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            issued: AtomicU64::new(0),
        });
        let s = shared.clone();
        let worker = std::thread::Builder::new().name("syscall-load".into()).spawn(move || {
            if let Some(c) = cpu {
                pin(c);
            }
            work(&s, &targets, exec_every)
        })?;
        Ok(Load { shared, worker: Some(worker), dir })
    }

    pub fn set_rate(&self, syscalls_per_s: u64) {
        self.shared.rate.store(syscalls_per_s, Ordering::Relaxed);
        self.shared.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// Syscalls issued so far.
    pub fn issued(&self) -> u64 {
        self.shared.issued.load(Ordering::Relaxed)
    }

    /// The worker thread's CPU time so far (user + system), seconds: what a
    /// sensor's in-kernel work costs it, without the time it waits for a CPU.
    pub fn cpu_s(&self) -> Result<f64> {
        use std::os::unix::thread::JoinHandleExt;
        let worker = self.worker.as_ref().context("the load thread has stopped")?;
        let mut clock: libc::clockid_t = 0;
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: the thread is not joined while `worker` is held, so its pthread_t is valid.
        let rc = unsafe { libc::pthread_getcpuclockid(worker.as_pthread_t(), &mut clock) };
        anyhow::ensure!(rc == 0, "the load thread's CPU clock: error {rc}");
        // SAFETY: ts is a valid timespec to write.
        if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
            return Err(std::io::Error::last_os_error()).context("reading the load thread's CPU clock");
        }
        Ok(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
    }

    /// Stops the worker; its error, if it failed.
    pub fn finish(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        self.shared.stop.store(true, Ordering::Relaxed);
        let r = match self.worker.take() {
            Some(w) => w.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the load thread panicked"))),
            None => Ok(()),
        };
        let _ = std::fs::remove_dir_all(&self.dir);
        r
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
