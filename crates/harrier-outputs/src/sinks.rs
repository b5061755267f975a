//! Where alerts go. Each sink runs on its own lane threads (see lane.rs), so
//! a slow disk or a dead HTTP receiver only ever fills its own queue.

use crate::alert::{Alert, JsonShape};
use crate::lane::Lane;
use crate::queue::Queued;
use crate::LineFormat;
use anyhow::{anyhow, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsFd;
use std::time::Duration;

pub use crate::http::{Http, HttpOptions, IN_FLIGHT};

/// One destination. Its methods may block: they run on the output's lanes.
pub trait Sink: Send {
    /// The line this sink writes for an alert (text, or JSON of a shape), if
    /// it writes lines: under a backlog its queue then holds lines rendered
    /// at emit (shared by all such outputs), and [`Sink::send_batch`] gets
    /// those or alerts. None (the default): it gets alerts only.
    fn lines(&self) -> Option<LineFormat> {
        None
    }

    /// Delivers one alert; an error means it cannot be (counted as failed, not retried).
    fn send(&mut self, alert: &Alert) -> Result<()>;

    /// Delivers `batch` in order and returns how many alerts, from its start,
    /// were handled: delivered, or given up on with [`Lane::reject`]. A sink
    /// whose destination is failing for now retries (reporting it with
    /// [`Lane::trouble`], waiting with [`Lane::pause`]) and returns fewer only
    /// when the pause says the exit deadline has passed. The default sends
    /// each alert with [`Sink::send`].
    fn send_batch(&mut self, batch: &[Queued], lane: &mut Lane) -> usize {
        for q in batch {
            let r = match q.alert() {
                Some(a) => self.send(a),
                None => Err(anyhow!("a line for a sink that takes alerts")),
            };
            if let Err(e) = r {
                lane.reject(q, &e);
            }
        }
        batch.len()
    }
}

/// The first retry's wait after a failed write, doubled up to [`MAX_BACKOFF`].
pub const BACKOFF: Duration = Duration::from_millis(10);
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Lines to a file descriptor: a batch's lines (rendered here, or at emit
/// under a backlog) are gathered into one buffer and written with as few write(2) calls as the
/// kernel takes, no other buffering, so each batch is on its way when
/// `send_batch` returns. The buffers are reused: no allocation per alert
/// once they have grown.
struct Lines {
    json: Option<JsonShape>,
    out: File,
    what: String,
    buf: Vec<u8>,
    /// Where each alert's line ends in `buf`.
    ends: Vec<usize>,
}

impl Lines {
    fn new(out: File, what: String, json: Option<JsonShape>) -> Lines {
        Lines { json, out, what, buf: Vec::with_capacity(64 << 10), ends: Vec::with_capacity(1024) }
    }

    fn gather(&mut self, batch: &[Queued]) {
        self.buf.clear();
        self.ends.clear();
        for q in batch {
            match (q.line(), q.alert()) {
                (Some(line), _) => self.buf.extend_from_slice(line),
                (None, Some(a)) => a.write_line(self.json, &mut self.buf),
                (None, None) => {}
            }
            self.ends.push(self.buf.len());
        }
    }

    fn send_batch(&mut self, batch: &[Queued], lane: &mut Lane) -> usize {
        self.gather(batch);
        let (mut done, mut wait) = (0, BACKOFF);
        while done < self.buf.len() {
            let err = match self.out.write(&self.buf[done..]) {
                Ok(0) => std::io::ErrorKind::WriteZero.into(),
                Ok(n) => {
                    done += n;
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => e,
            };
            // A full disk or a stuck reader: keep the rest and try again; the
            // queue sheds by priority meanwhile.
            lane.trouble(&anyhow!("writing {}: {err}", self.what));
            if !lane.pause(wait) {
                return self.ends.partition_point(|&end| end <= done);
            }
            wait = (wait * 2).min(MAX_BACKOFF);
        }
        batch.len()
    }

    fn send(&mut self, alert: &Alert) -> Result<()> {
        self.buf.clear();
        alert.write_line(self.json, &mut self.buf);
        self.out.write_all(&self.buf).with_context(|| format!("writing {}", self.what))
    }
}

/// Text or JSON lines on stdout.
pub struct Stdout(Lines);

impl Stdout {
    /// Writes to a duplicate of fd 1, past std's line buffer and its lock.
    pub fn new(json: Option<JsonShape>) -> Result<Stdout> {
        let fd = std::io::stdout().as_fd().try_clone_to_owned().context("duplicating stdout")?;
        Ok(Stdout(Lines::new(File::from(fd), "stdout".into(), json)))
    }
}

impl Sink for Stdout {
    fn lines(&self) -> Option<LineFormat> {
        Some(self.0.json)
    }
    fn send(&mut self, alert: &Alert) -> Result<()> {
        self.0.send(alert)
    }
    fn send_batch(&mut self, batch: &[Queued], lane: &mut Lane) -> usize {
        self.0.send_batch(batch, lane)
    }
}

/// Appends lines to a file (Falco's file_output).
pub struct FileSink(Lines);

impl FileSink {
    /// Opens (creates) the file at once, so a bad path is a start-up error.
    pub fn open(path: &str, json: Option<JsonShape>) -> Result<FileSink> {
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {path}"))?;
        Ok(FileSink(Lines::new(f, path.to_string(), json)))
    }
}

impl Sink for FileSink {
    fn lines(&self) -> Option<LineFormat> {
        Some(self.0.json)
    }
    fn send(&mut self, alert: &Alert) -> Result<()> {
        self.0.send(alert)
    }
    fn send_batch(&mut self, batch: &[Queued], lane: &mut Lane) -> usize {
        self.0.send_batch(batch, lane)
    }
}

/// Falco's program_output: each line to `sh -c PROGRAM`'s standard input. With keep_alive
/// one process reads every line; without, a process per alert, as Falco runs it.
pub struct Program {
    program: String,
    json: Option<JsonShape>,
    /// The long-lived process (keep_alive) and its stdin.
    kept: Option<(std::process::Child, Lines)>,
}

impl Program {
    pub fn new(program: &str, keep_alive: bool, json: Option<JsonShape>) -> Result<Program> {
        let mut p = Program { program: program.to_string(), json, kept: None };
        if keep_alive {
            let (child, stdin) = p.spawn()?;
            p.kept = Some((child, Lines::new(stdin, format!("program '{program}'"), json)));
        }
        Ok(p)
    }

    fn spawn(&self) -> Result<(std::process::Child, File)> {
        let mut child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(&self.program)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("starting program '{}'", self.program))?;
        let stdin = child.stdin.take().expect("piped");
        Ok((child, File::from(std::os::fd::OwnedFd::from(stdin))))
    }
}

impl Sink for Program {
    fn lines(&self) -> Option<LineFormat> {
        Some(self.json)
    }
    fn send(&mut self, alert: &Alert) -> Result<()> {
        if let Some((_, lines)) = &mut self.kept {
            return lines.send(alert);
        }
        let (mut child, stdin) = self.spawn()?;
        let mut lines = Lines::new(stdin, format!("program '{}'", self.program), self.json);
        let sent = lines.send(alert);
        drop(lines);
        child.wait().with_context(|| format!("waiting for program '{}'", self.program))?;
        sent
    }
    fn send_batch(&mut self, batch: &[Queued], lane: &mut Lane) -> usize {
        match &mut self.kept {
            Some((_, lines)) => lines.send_batch(batch, lane),
            None => {
                for q in batch {
                    let r = match (q.alert(), q.line()) {
                        (Some(a), _) => self.send(a),
                        (None, _) => Err(anyhow!("a line without its alert")),
                    };
                    if let Err(e) = r {
                        lane.reject(q, &e);
                    }
                }
                batch.len()
            }
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if let Some((mut child, lines)) = self.kept.take() {
            drop(lines); // EOF: the program finishes its input
            let _ = child.wait();
        }
    }
}

/// Falco's syslog_output: each line to the local syslog as `falco`, the alert's priority as
/// the syslog level (Falco's priorities are syslog's levels).
pub struct Syslog {
    json: Option<JsonShape>,
    buf: Vec<u8>,
}

impl Syslog {
    pub fn new(json: Option<JsonShape>) -> Syslog {
        static IDENT: &[u8] = b"falco\0";
        unsafe { libc::openlog(IDENT.as_ptr().cast(), libc::LOG_NDELAY, libc::LOG_USER) };
        Syslog { json, buf: Vec::with_capacity(4096) }
    }
}

impl Sink for Syslog {
    fn send(&mut self, alert: &Alert) -> Result<()> {
        self.buf.clear();
        alert.write_line(self.json, &mut self.buf);
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        self.buf.retain(|&b| b != 0);
        self.buf.push(0);
        let level = crate::rank(alert.priority) as libc::c_int;
        unsafe { libc::syslog(level, c"%s".as_ptr(), self.buf.as_ptr()) };
        Ok(())
    }
}
