//! Alerts out of the engine: Falco's text and JSON shapes, to stdout, a
//! file and HTTP. The engine never waits for an output: each has a bounded
//! queue and a worker thread; an alert that finds the queue full is dropped
//! and counted, and so is one its sink fails to deliver.
//!
//! ```no_run
//! use harrier_outputs::{Outputs, sinks::Stdout};
//! let mut outs = Outputs::new(1024);
//! outs.add("stdout", Box::new(Stdout::new(None)));
//! // outs.emit(std::sync::Arc::new(alert));
//! let report = outs.close(std::time::Duration::from_secs(2));
//! ```

pub mod alert;
pub mod sinks;

pub use alert::{hostname, new_uuid, Alert, JsonShape};

use sinks::Sink;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Counters of one output (cumulative).
#[derive(Debug, Default)]
pub struct OutputCounters {
    pub sent: AtomicU64,
    /// The queue was full: the output is slower than the alerts.
    pub dropped_queue_full: AtomicU64,
    /// The sink gave up (after its retries) or the close deadline passed.
    pub failed: AtomicU64,
}

/// A snapshot of one output's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputStats {
    pub name: String,
    pub sent: u64,
    pub dropped_queue_full: u64,
    pub failed: u64,
}

impl OutputStats {
    pub fn lost(&self) -> u64 {
        self.dropped_queue_full + self.failed
    }
}

struct Worker {
    name: String,
    queue: Option<SyncSender<Arc<Alert>>>,
    counters: Arc<OutputCounters>,
    /// Alerts queued and not yet handled: what a deadline at close loses.
    pending: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

/// Every configured output.
pub struct Outputs {
    queue_size: usize,
    workers: Vec<Worker>,
}

impl Outputs {
    /// `queue_size`: alerts each output may hold before dropping (Falco's
    /// outputs_queue.capacity).
    pub fn new(queue_size: usize) -> Outputs {
        Outputs { queue_size: queue_size.max(1), workers: Vec::new() }
    }

    pub fn add(&mut self, name: &str, mut sink: Box<dyn Sink>) {
        let (tx, rx) = sync_channel::<Arc<Alert>>(self.queue_size);
        let counters = Arc::new(OutputCounters::default());
        let pending = Arc::new(AtomicU64::new(0));
        let (c, p, label) = (counters.clone(), pending.clone(), name.to_string());
        let thread = std::thread::Builder::new()
            .name(format!("out-{name}"))
            .spawn(move || {
                let mut last_error: Option<String> = None;
                for alert in rx {
                    match sink.send(&alert) {
                        Ok(()) => c.sent.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            // One line per distinct failure, not one per alert.
                            let msg = format!("{e:#}");
                            if last_error.as_deref() != Some(msg.as_str()) {
                                eprintln!("harrier: output {label}: {msg} (alerts counted as lost)");
                                last_error = Some(msg);
                            }
                            c.failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                    p.fetch_sub(1, Ordering::Relaxed);
                }
                let _ = sink.flush();
            })
            .expect("spawning an output thread");
        self.workers.push(Worker {
            name: name.to_string(),
            queue: Some(tx),
            counters,
            pending,
            thread: Some(thread),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Hands an alert to every output without waiting.
    pub fn emit(&self, alert: Arc<Alert>) {
        for w in &self.workers {
            let Some(q) = &w.queue else { continue };
            w.pending.fetch_add(1, Ordering::Relaxed);
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = q.try_send(alert.clone()) {
                w.pending.fetch_sub(1, Ordering::Relaxed);
                w.counters.dropped_queue_full.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn stats(&self) -> Vec<OutputStats> {
        self.workers
            .iter()
            .map(|w| OutputStats {
                name: w.name.clone(),
                sent: w.counters.sent.load(Ordering::Relaxed),
                dropped_queue_full: w.counters.dropped_queue_full.load(Ordering::Relaxed),
                failed: w.counters.failed.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Lets each output deliver what it has queued, for at most `deadline`
    /// in all; what is still queued then is counted as failed (a dead HTTP
    /// receiver must not hold up the exit).
    pub fn close(mut self, deadline: Duration) -> Vec<OutputStats> {
        let end = Instant::now() + deadline;
        for w in &mut self.workers {
            w.queue.take(); // the worker ends once the queue is empty
        }
        for w in &mut self.workers {
            while !w.thread.as_ref().is_some_and(|t| t.is_finished()) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(5));
            }
            match w.thread.take() {
                Some(t) if t.is_finished() => {
                    let _ = t.join();
                }
                // Still busy: leave it detached; its queue is lost.
                _ => {
                    let left = w.pending.swap(0, Ordering::Relaxed);
                    w.counters.failed.fetch_add(left, Ordering::Relaxed);
                }
            }
        }
        self.stats()
    }
}
