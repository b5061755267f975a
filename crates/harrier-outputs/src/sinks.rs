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

pub use crate::http::{Http, IN_FLIGHT};

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
