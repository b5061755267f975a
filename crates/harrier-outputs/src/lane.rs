//! A lane: one thread taking batches from an output's queue and handing them
//! to its sink. Most outputs have one lane; HTTP has one per request in flight.

use crate::queue::{Item, Losses, Queued, Shared};
use crate::sinks::Sink;
use std::sync::Arc;
use std::time::Duration;

/// What a sink sees of its lane while it delivers a batch.
pub struct Lane<'a> {
    shared: &'a Shared,
    output: &'a str,
    rejected: Losses,
    troubled: bool,
}

impl<'a> Lane<'a> {
    fn new(shared: &'a Shared, output: &'a str) -> Lane<'a> {
        Lane { shared, output, rejected: Losses::default(), troubled: false }
    }

    /// `alert` cannot be delivered (e.g. the receiver answered 4xx): it is
    /// counted as failed, and not retried.
    pub fn reject(&mut self, alert: &Queued, why: &anyhow::Error) {
        self.rejected.add(alert.rank, alert.time_ns);
        self.shared.error();
        self.say(why, "alert counted as lost");
    }

    /// The destination is failing for now (down, disk full): the sink retries
    /// after [`Lane::pause`] while the queue sheds by priority meanwhile.
    pub fn trouble(&mut self, why: &anyhow::Error) {
        self.troubled = true;
        self.shared.error();
        self.say(why, "retrying; the queue keeps the most severe alerts meanwhile");
    }

    /// Waits `d` before a retry. False: the exit deadline passed; give up.
    pub fn pause(&self, d: Duration) -> bool {
        self.shared.pause(d)
    }

    /// Whether the exit deadline passed.
    pub fn stopping(&self) -> bool {
        self.shared.abandoned()
    }

    /// One line per distinct failure, not one per alert, retry or lane.
    fn say(&mut self, why: &anyhow::Error, what: &str) {
        let msg = format!("{why:#}");
        if self.shared.say(&msg) {
            eprintln!("harrier: output {}: {msg} ({what})", self.output);
        }
    }
}

/// Ends the lane's count even if its sink panics, so close() is not kept waiting.
struct Running<'a>(&'a Shared);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.lane_done();
    }
}

/// A lane's thread: batches until the queue is closed and empty (or the
/// deadline passes), a loss notice whenever one is due.
pub(crate) fn run(
    shared: Arc<Shared>,
    mut sink: Box<dyn Sink>,
    output: String,
    host: Arc<str>,
    batch_max: usize,
) {
    let lines = sink.lines();
    let _running = Running(&shared);
    let mut batch = Vec::with_capacity(batch_max);
    let mut lane = Lane::new(&shared, &output);
    while shared.pop(&mut batch, batch_max) {
        lane.rejected = Losses::default();
        let handled = sink.send_batch(&batch, &mut lane);
        let due = shared.report(&batch, handled, &lane.rejected);
        // The batch's alerts are freed here, outside the queue's lock.
        batch.clear();
        if lane.troubled && handled > 0 && !lane.stopping() {
            lane.troubled = false;
            if shared.say_recovered() {
                eprintln!("harrier: output {output}: delivering again");
            }
        }
        if let Some(losses) = due {
            notice(&mut *sink, lines, &mut lane, &losses, &host);
        }
    }
    if let Some(losses) = shared.last_losses() {
        notice(&mut *sink, lines, &mut lane, &losses, &host);
    }
}

fn notice(
    sink: &mut dyn Sink,
    lines: Option<crate::LineFormat>,
    lane: &mut Lane,
    losses: &Losses,
    host: &str,
) {
    let alert = crate::notice::alert(lane.output, losses, host);
    let (rank, time_ns) = (crate::rank(alert.priority), alert.time_ns);
    let item = match lines {
        Some(format) => {
            let mut line = Vec::new();
            alert.write_line(format, &mut line);
            Item::Line(line.into())
        }
        None => Item::Alert(Arc::new(alert)),
    };
    let batch = [Queued { rank, time_ns, item }];
    lane.rejected = Losses::default();
    let handled = sink.send_batch(&batch, lane);
    lane.shared.noticed(handled == 1 && lane.rejected.by_priority.total() == 0);
}
