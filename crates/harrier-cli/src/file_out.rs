//! `-w FILE`: the capture file as one more sink of the event stream.
//!
//! The capture thread copies each record into a batch buffer (reused: no
//! allocation per event) and hands whole batches to a writer thread through
//! a bounded queue. A full queue never blocks the capture: the batch is
//! dropped and its records counted as lost (recorded in the file's next
//! block). A write error (disk full, EIO) stops the writer: it says so once
//! and counts every record it could not write as lost.

use anyhow::{Context, Result};
use harrier_capfile::{FileInfo, Options, Summary, Writer};
use harrier_schema::wire::Header;
use harrier_state::Snapshot;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Batches in flight at most (each up to BATCH_BYTES).
const QUEUE_BATCHES: usize = 32;
const BATCH_BYTES: usize = 2 << 20;
/// A pending block is written at least this often, so a killed capture
/// loses at most about this much.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

#[derive(clap::Args, Debug, Clone)]
pub struct WriteArgs {
    /// Write the events to this capture file (see docs/capture-format.md).
    #[arg(long, short = 'w', value_name = "FILE")]
    pub write: Option<String>,
    /// Store the capture file's blocks uncompressed.
    #[arg(long, requires = "write")]
    pub no_compress: bool,
    /// zstd level of the capture file (1-19).
    #[arg(long, default_value_t = 3, requires = "write")]
    pub compress_level: i32,
    /// Store the events as the sensor delivers them (block encoding 0), not packed.
    #[arg(long, requires = "write")]
    pub no_pack: bool,
}

enum Msg {
    Batch { buf: Vec<u8>, records: u64, drops: u64, lost: u64 },
    Snapshot(Box<Snapshot>),
}

/// What the writer thread reports at the end.
#[derive(Debug, Default)]
pub struct Outcome {
    pub summary: Summary,
    /// Records lost: queue full, or after a write error.
    pub lost: u64,
    pub error: Option<String>,
}

pub struct FileOut {
    tx: Option<SyncSender<Msg>>,
    spare: Receiver<Vec<u8>>,
    buf: Vec<u8>,
    records: u64,
    /// Kernel drops and queue losses not yet handed to the writer.
    drops: u64,
    lost: u64,
    lost_total: u64,
    failed: Arc<AtomicBool>,
    thread: Option<JoinHandle<Outcome>>,
    path: String,
}

impl FileOut {
    /// Creates the file and writes its header (an unwritable path fails
    /// here, before the capture starts).
    pub fn create(args: &WriteArgs, info: &FileInfo) -> Result<Option<FileOut>> {
        let Some(path) = &args.write else { return Ok(None) };
        if !args.no_compress && !(1..=22).contains(&args.compress_level) {
            anyhow::bail!("--compress-level must be 1 to 22, not {}", args.compress_level);
        }
        let f = File::create(path).with_context(|| format!("creating {path}"))?;
        let opts = Options {
            compression: (!args.no_compress).then_some(args.compress_level),
            packed: !args.no_pack,
            ..Options::default()
        };
        // No BufWriter: blocks are large and written whole, so what the
        // writer counts as written is in the kernel's hands.
        let w = Writer::new(f, info, opts).with_context(|| format!("writing {path}"))?;
        let (tx, rx) = mpsc::sync_channel(QUEUE_BATCHES);
        let (spare_tx, spare) = mpsc::channel();
        let failed = Arc::new(AtomicBool::new(false));
        let (f2, p2) = (failed.clone(), path.clone());
        let thread = std::thread::Builder::new()
            .name("capfile-writer".into())
            .spawn(move || writer_thread(w, rx, spare_tx, f2, p2))
            .context("starting the file writer")?;
        Ok(Some(FileOut {
            tx: Some(tx),
            spare,
            buf: Vec::with_capacity(BATCH_BYTES),
            records: 0,
            drops: 0,
            lost: 0,
            lost_total: 0,
            failed,
            thread: Some(thread),
            path: path.clone(),
        }))
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The state at capture start (call before the first drain).
    pub fn snapshot(&mut self, s: Snapshot) {
        if let Some(tx) = &self.tx {
            // Blocking is fine here: nothing is being captured into a full queue yet.
            let _ = tx.send(Msg::Snapshot(Box::new(s)));
        }
    }

    /// One record (the hot path: a copy into the batch buffer).
    pub fn event(&mut self, rec: &[u8]) {
        if self.buf.len() + rec.len() > BATCH_BYTES {
            self.send();
        }
        self.buf.extend_from_slice(rec);
        self.records += 1;
    }

    /// Kernel drops seen since the last call (recorded with the next batch).
    pub fn add_drops(&mut self, n: u64) {
        self.drops += n;
    }

    /// True once the writer has stopped on an error.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Hands the batch to the writer; a full queue drops it (counted).
    pub fn send(&mut self) {
        if self.records == 0 && self.drops == 0 && self.lost == 0 {
            return;
        }
        let Some(tx) = &self.tx else { return };
        let next = self.spare.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH_BYTES));
        let buf = std::mem::replace(&mut self.buf, next);
        let msg = Msg::Batch { buf, records: self.records, drops: self.drops, lost: self.lost };
        match tx.try_send(msg) {
            Ok(()) => {
                self.drops = 0;
                self.lost = 0;
            }
            Err(TrySendError::Full(Msg::Batch { mut buf, .. }))
            | Err(TrySendError::Disconnected(Msg::Batch { mut buf, .. })) => {
                self.lost += self.records;
                self.lost_total += self.records;
                buf.clear();
                self.buf = buf;
            }
            Err(_) => {}
        }
        self.buf.clear();
        self.records = 0;
    }

    /// Sends what is left, closes the queue and waits for the writer to
    /// write the last block, the index and the trailer.
    pub fn finish(mut self) -> Outcome {
        self.send();
        // Losses after the last batch still belong in the file: one empty batch carries them.
        if self.lost > 0 || self.drops > 0 {
            if let Some(tx) = &self.tx {
                let msg = Msg::Batch { buf: Vec::new(), records: 0, drops: self.drops, lost: self.lost };
                let _ = tx.send(msg);
            }
        }
        drop(self.tx.take());
        let mut out = self.thread.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default();
        out.lost += self.lost_total;
        out
    }
}

fn writer_thread(
    mut w: Writer<File>,
    rx: Receiver<Msg>,
    spare: mpsc::Sender<Vec<u8>>,
    failed: Arc<AtomicBool>,
    path: String,
) -> Outcome {
    let mut out = Outcome::default();
    let mut last_flush = Instant::now();
    // Records given to the writer; on a failure those not in a written block are lost.
    let mut taken = 0u64;
    let fail = |out: &mut Outcome, e: std::io::Error, taken: u64, written: u64| {
        say!("harrier: error: writing {path}: {e}; the file stops here, further events are counted as lost");
        out.error = Some(format!("writing {path}: {e}"));
        out.lost += taken.saturating_sub(written);
        failed.store(true, Ordering::Relaxed);
    };
    loop {
        let msg = match rx.recv_timeout(FLUSH_EVERY) {
            Ok(m) => Some(m),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        match msg {
            Some(Msg::Batch { mut buf, records, drops, lost }) => {
                if out.error.is_some() {
                    out.lost += records;
                } else {
                    w.add_drops(drops, lost);
                    let mut i = 0;
                    let mut done = 0;
                    while i < buf.len() {
                        // The rings hand out whole records; lengths were checked there.
                        let len = Header::parse(&buf[i..]).map_or(buf.len() - i, |h| (h.len as usize).max(1));
                        let end = (i + len).min(buf.len());
                        if let Err(e) = w.event(&buf[i..end]) {
                            fail(&mut out, e, taken, w.summary().records);
                            break;
                        }
                        i = end;
                        done += 1;
                        taken += 1;
                    }
                    out.lost += records - done;
                }
                buf.clear();
                let _ = spare.send(buf);
            }
            Some(Msg::Snapshot(s)) if out.error.is_none() => {
                if let Err(e) = w.snapshot(&s) {
                    fail(&mut out, e, taken, w.summary().records);
                }
            }
            _ => {}
        }
        if out.error.is_none() && last_flush.elapsed() >= FLUSH_EVERY {
            if let Err(e) = w.flush() {
                fail(&mut out, e, taken, w.summary().records);
            }
            last_flush = Instant::now();
        }
    }
    if out.error.is_none() {
        let written = w.summary().records;
        match w.finish() {
            Ok((_, s)) => out.summary = s,
            Err(e) => fail(&mut out, e, taken, written),
        }
    }
    out
}

/// The header info of a live capture on this machine.
pub fn live_info(epoch_offset: u64, settings: serde_json::Value) -> FileInfo {
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname fills the struct it is given.
    let kernel = if unsafe { libc::uname(&mut u) } == 0 {
        // SAFETY: uname NUL-terminates its fields.
        unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy().into_owned()
    } else {
        String::new()
    };
    FileInfo {
        host: harrier_outputs::hostname(),
        kernel,
        epoch_offset,
        writer: format!("harrier {}", env!("CARGO_PKG_VERSION")),
        settings,
    }
}

/// One line for the end report.
pub fn report(path: &str, o: &Outcome) -> String {
    let s = &o.summary;
    // The records as the sensor delivered them against the file: packing and zstd together.
    let ratio = if s.bytes > 0 { s.wire_bytes as f64 / s.bytes as f64 } else { 0.0 };
    match &o.error {
        Some(_) => format!("harrier: {path}: FAILED, whole blocks before the error kept; {} events lost", o.lost),
        None => format!(
            "harrier: wrote {path}: {} events in {} blocks, {} bytes ({ratio:.1}x), {} lost before the writer",
            s.records, s.blocks, s.bytes, o.lost
        ),
    }
}
