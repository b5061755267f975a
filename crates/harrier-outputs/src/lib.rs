//! Alerts out of the engine: Falco's text and JSON shapes, to stdout, a
//! file and HTTP. The engine never waits for an output: each has a queue
//! bounded by alerts and bytes and one or more lane threads that deliver
//! from it in batches. A full queue sheds the least severe alerts first; a
//! failing destination is retried while its queue keeps the most severe
//! ones; every alert lost is counted per output and priority, and once the
//! pressure ends a notice in the output's own stream tells what was lost.
//!
//! ```no_run
//! use harrier_outputs::{Limits, Outputs, sinks::Stdout};
//! let mut outs = Outputs::new(Limits::default());
//! outs.add("stdout", Box::new(Stdout::new(None).unwrap()));
//! // outs.emit(std::sync::Arc::new(alert));
//! let report = outs.close(std::time::Duration::from_millis(800));
//! ```

pub mod alert;
mod http;
mod lane;
pub mod notice;
pub mod queue;
pub mod sinks;
pub mod testing;
pub mod tls;

pub use alert::{hostname, new_uuid, rank, set_time_format_iso_8601, Alert, JsonShape, PRIORITIES};
pub use lane::Lane;
pub use queue::{ByPriority, Item, Limits, Queued};

use queue::Shared;
use sinks::Sink;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Alerts a lane takes from its queue at once (one write for stdout and file).
pub const BATCH: usize = 1024;

/// From this backlog on, an output that writes lines is handed lines, not alerts.
pub const COMPACT_AT: usize = 256;

/// At the close deadline, an output that delivered something since the close
/// began is given this much more, again and again while it keeps delivering...
pub const PROGRESS_STEP: Duration = Duration::from_millis(100);
/// ...up to this much past the deadline (Falco's output_timeout).
pub const MAX_EXTRA: Duration = Duration::from_secs(2);

/// One output's figures so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputStats {
    pub name: String,
    pub sent: ByPriority,
    /// Shed because the queue was full (the least severe first).
    pub shed: ByPriority,
    /// Refused by the receiver, or still undelivered at the exit deadline.
    pub failed: ByPriority,
    /// Loss notices written into the stream (not counted in `sent`).
    pub notices: u64,
    /// Failed delivery attempts, retries included (a full disk, a receiver down).
    pub errors: u64,
    /// Alerts and bytes queued now, and the most bytes ever queued.
    pub queued: usize,
    pub queued_bytes: usize,
    pub peak_bytes: usize,
}

impl OutputStats {
    pub fn lost(&self) -> u64 {
        self.shed.total() + self.failed.total()
    }
}

/// A line an output writes for an alert: JSON of a shape, or (None) Falco's text.
pub type LineFormat = Option<JsonShape>;

struct Output {
    name: String,
    shared: Arc<Shared>,
    lanes: Vec<JoinHandle<()>>,
    /// Index in `Outputs::formats` of the line it writes; None: it takes alerts.
    format: Option<usize>,
}

/// Every configured output.
pub struct Outputs {
    limits: Limits,
    host: Arc<str>,
    outputs: Vec<Output>,
    /// The distinct lines the outputs write: each is rendered once per alert.
    formats: Vec<LineFormat>,
    /// Where a line is rendered before it is shared (one allocation, its own).
    scratch: Mutex<Vec<u8>>,
}

impl Outputs {
    /// Each output added gets a queue with these limits.
    pub fn new(limits: Limits) -> Outputs {
        Outputs {
            limits,
            host: hostname().into(),
            outputs: Vec::new(),
            formats: Vec::new(),
            scratch: Mutex::new(Vec::with_capacity(4096)),
        }
    }

    /// An output delivered by one lane.
    pub fn add(&mut self, name: &str, sink: Box<dyn Sink>) {
        self.add_lanes(name, vec![sink]);
    }

    /// An output delivered by several lanes (one per sink), each taking the
    /// next alerts from the same queue: several requests in flight.
    pub fn add_lanes(&mut self, name: &str, sinks: Vec<Box<dyn Sink>>) {
        let shared = Arc::new(Shared::new(sinks.len()));
        let format = sinks.first().and_then(|s| s.lines()).map(|f| {
            self.formats.iter().position(|g| *g == f).unwrap_or_else(|| {
                self.formats.push(f);
                self.formats.len() - 1
            })
        });
        // Parallel lanes take one alert at a time: each has one in flight.
        let batch = if sinks.len() == 1 { BATCH } else { 1 };
        let lanes = sinks
            .into_iter()
            .map(|sink| {
                let (s, n, h) = (shared.clone(), name.to_string(), self.host.clone());
                std::thread::Builder::new()
                    .name(format!("out-{name}"))
                    .spawn(move || lane::run(s, sink, n, h, batch))
                    .expect("spawning an output thread")
            })
            .collect();
        self.outputs.push(Output { name: name.to_string(), shared, lanes, format });
    }

    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Hands an alert to every output without waiting. An output that keeps
    /// up gets the alert, and its lane renders it; one with a backlog of
    /// [`COMPACT_AT`] or more gets the alert's line, rendered here once per
    /// distinct line and shared, which takes a third of the alert's memory
    /// or less: a queue bounded by bytes holds three times as many.
    pub fn emit(&self, alert: Arc<Alert>) {
        if self.outputs.is_empty() {
            return;
        }
        let (rank, time_ns) = (rank(alert.priority), alert.time_ns);
        // Text and JSON of four shapes: at most five distinct lines.
        let mut lines: [Option<Arc<[u8]>>; 5] = Default::default();
        let mut alert_bytes = None;
        for o in &self.outputs {
            let item = match o.format {
                Some(i) if o.shared.backlog() >= COMPACT_AT => {
                    Item::Line(lines[i].get_or_insert_with(|| self.render(&alert, self.formats[i])).clone())
                }
                _ => Item::Alert(alert.clone()),
            };
            let q = Queued { rank, time_ns, item };
            let bytes = match q.item {
                Item::Line(_) => q.bytes(),
                Item::Alert(_) => *alert_bytes.get_or_insert_with(|| q.bytes()),
            };
            o.shared.push(q, bytes, &self.limits);
        }
    }

    fn render(&self, alert: &Alert, format: LineFormat) -> Arc<[u8]> {
        let mut scratch = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        scratch.clear();
        alert.write_line(format, &mut scratch);
        Arc::from(&scratch[..])
    }

    pub fn stats(&self) -> Vec<OutputStats> {
        self.outputs
            .iter()
            .map(|o| {
                let (c, f) = (o.shared.counts(), o.shared.fill());
                OutputStats {
                    name: o.name.clone(),
                    sent: c.sent,
                    shed: c.shed,
                    failed: c.failed,
                    notices: c.notices,
                    errors: c.errors,
                    queued: f.alerts,
                    queued_bytes: f.bytes,
                    peak_bytes: f.peak_bytes,
                }
            })
            .collect()
    }

    /// Lets every output deliver what it has queued (and its loss notice)
    /// within `deadline`. An output still delivering then is given more time
    /// while it keeps delivering, in steps of [`PROGRESS_STEP`], up to
    /// [`MAX_EXTRA`] more; one that is not (a dead receiver) is abandoned:
    /// what it still has queued or in flight is counted as failed, and its
    /// lanes blocked in their sink are left behind.
    pub fn close(self, deadline: Duration) -> Vec<OutputStats> {
        let end = Instant::now() + deadline;
        let cap = end + MAX_EXTRA;
        let progress: Vec<u64> = self.outputs.iter().map(|o| o.shared.progress()).collect();
        for o in &self.outputs {
            o.shared.close();
        }
        for (o, mut last) in self.outputs.iter().zip(progress) {
            let mut until = end;
            while !o.shared.wait_lanes(until) {
                let now = o.shared.progress();
                if now == last || Instant::now() >= cap {
                    o.shared.abandon();
                    // A lane in a pause wakes at once; one blocked in a write or a
                    // request is left behind.
                    o.shared.wait_lanes(Instant::now() + Duration::from_millis(20));
                    break;
                }
                last = now;
                until = Instant::now() + PROGRESS_STEP;
            }
        }
        let stats = self.stats();
        for o in self.outputs {
            for t in o.lanes {
                if t.is_finished() {
                    let _ = t.join();
                }
            }
        }
        stats
    }
}
