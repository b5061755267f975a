//! Workload processes: started paused, so a sensor can attach first, then
//! released and timed.

use anyhow::{bail, Context, Result};
use std::io::{BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// `harrier-bench loop NR COUNT [THREADS]`: waits for a line on stdin, makes
/// COUNT raw syscalls NR in each of THREADS threads, prints ns per call.
/// openat (257) opens /dev/null and closes it: ns per pair.
pub fn syscall_loop(nr: i64, count: u64, threads: usize) -> Result<()> {
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line)? == 0 {
        return Ok(()); // never released
    }
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                for _ in 0..count {
                    if nr == libc::SYS_openat {
                        open_close_dev_null();
                    } else {
                        unsafe { libc::syscall(nr) };
                    }
                }
            });
        }
    });
    // The parent may have gone (e.g. the benchmark was interrupted): no panic.
    let _ = writeln!(std::io::stdout(), "{}", t.elapsed().as_nanos() as f64 / count as f64);
    Ok(())
}

fn open_close_dev_null() {
    let fd =
        unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, c"/dev/null".as_ptr(), libc::O_RDONLY) };
    if fd >= 0 {
        unsafe { libc::close(fd as i32) };
    }
}

/// A paused workload process.
pub struct Paused {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    released: Option<Instant>,
}

impl Paused {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn release(&mut self) -> Result<()> {
        let mut stdin = self.stdin.take().context("released twice")?;
        writeln!(stdin, "go")?;
        self.released = Some(Instant::now());
        Ok(())
    }

    pub fn try_done(&mut self) -> Result<bool> {
        Ok(self.child.try_wait()?.is_some())
    }

    /// Waits for the end; returns what it printed and its wall time.
    pub fn finish(&mut self) -> Result<(String, Duration)> {
        let mut out = String::new();
        self.stdout.read_to_string(&mut out)?;
        let status = self.child.wait()?;
        let wall = self.released.map(|r| r.elapsed()).unwrap_or_default();
        if !status.success() {
            bail!("workload failed: {status}");
        }
        Ok((out.trim().to_string(), wall))
    }
}

impl Drop for Paused {
    /// A workload never outlives its benchmark.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts `harrier-bench loop nr count threads`, paused.
pub fn paused_loop_threads(nr: i64, count: u64, threads: usize) -> Result<Paused> {
    let exe = std::env::current_exe()?;
    let args = ["loop".to_string(), nr.to_string(), count.to_string(), threads.to_string()];
    paused(Command::new(exe).args(args))
}

pub fn paused_loop(nr: i64, count: u64) -> Result<Paused> {
    paused_loop_threads(nr, count, 1)
}

/// A shell command that starts once released; `exec` keeps its pid, so a
/// sensor can filter on it before it runs.
pub fn paused_shell(script: &str) -> Result<Paused> {
    paused(Command::new("sh").args(["-c", &format!("read _ && exec {script}")]))
}

fn paused(cmd: &mut Command) -> Result<Paused> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting a workload")?;
    let stdin = child.stdin.take();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    Ok(Paused { child, stdin, stdout, released: None })
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}
