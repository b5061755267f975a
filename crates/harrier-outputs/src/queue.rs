//! One output's queue: bounded by alerts and by bytes, shed by priority when
//! full, shared by the engine (push) and the output's lanes (pop, report).
//!
//! Alerts wait in one deque per priority, each in arrival order; a sequence
//! number restores the arrival order across them when lanes pop. When an
//! alert does not fit, the newest alert of the lowest priority present (the
//! incoming one included) is shed: a Warning flood never pushes out a queued
//! Critical, and the alerts lost at one priority are its latest ones, a span
//! of time a reader can be told about.

use crate::alert::{Alert, PRIORITIES};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A count per priority, indexed by rank (see [`PRIORITIES`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByPriority(pub [u64; 8]);

impl ByPriority {
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    pub fn get(&self, priority: &str) -> u64 {
        self.0[crate::alert::rank(priority)]
    }

    /// (priority name, count) for the counts that are not zero, most severe first.
    pub fn nonzero(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        PRIORITIES.iter().zip(self.0).filter(|(_, n)| *n > 0).map(|(p, n)| (*p, n))
    }

    fn add(&mut self, other: &ByPriority) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

/// How much one output's queue may hold, and what it keeps when full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Alerts (Falco's outputs_queue.capacity); 0: no limit on the count.
    pub capacity: usize,
    /// Heap bytes of what is queued (lines, or alerts for sinks that take
    /// them; see [`Queued::bytes`]); 0: no limit.
    pub max_bytes: usize,
    /// Alerts of this rank or more severe (default 2, Critical) are never
    /// shed while a less severe one is queued (none is), and when only such
    /// alerts are left they may use a reserve of a quarter beyond both limits.
    pub keep_rank: usize,
}

/// Default byte limit per output: ~30,000 queued JSON lines of Falco's
/// stable rules' size (a 20,000-alert burst fits while the output delivers
/// nothing), and a dead output grows the process by well under 64 MB.
pub const DEFAULT_MAX_BYTES: usize = 32 << 20;

impl Default for Limits {
    fn default() -> Limits {
        Limits { capacity: 0, max_bytes: DEFAULT_MAX_BYTES, keep_rank: 2 }
    }
}

impl Limits {
    /// The (count, bytes) bounds for an alert of `rank`, with the reserve if
    /// it may use it; usize::MAX: none.
    fn bounds(&self, rank: usize, reserve: bool) -> (usize, usize) {
        let bound = |n: usize| match n {
            0 => usize::MAX,
            n if reserve && rank <= self.keep_rank => n.saturating_add(n / 4),
            n => n,
        };
        (bound(self.capacity), bound(self.max_bytes))
    }
}

/// Alerts lost and not yet told about in the stream (see crate::notice).
#[derive(Debug, Clone, Copy, Default)]
pub struct Losses {
    pub by_priority: ByPriority,
    /// Event times of the first and last alert lost, ns since the epoch.
    pub first_ns: u64,
    pub last_ns: u64,
    /// When the first of them was lost (for the periodic notice under
    /// unending pressure).
    since: Option<Instant>,
}

impl Losses {
    pub fn add(&mut self, rank: usize, time_ns: u64) {
        if self.by_priority.total() == 0 {
            self.first_ns = time_ns;
            self.last_ns = time_ns;
            self.since = Some(Instant::now());
        }
        self.by_priority.0[rank] += 1;
        self.first_ns = self.first_ns.min(time_ns);
        self.last_ns = self.last_ns.max(time_ns);
    }

    fn merge(&mut self, other: &Losses) {
        if other.by_priority.total() == 0 {
            return;
        }
        if self.by_priority.total() == 0 {
            *self = *other;
            return;
        }
        self.by_priority.add(&other.by_priority);
        self.first_ns = self.first_ns.min(other.first_ns);
        self.last_ns = self.last_ns.max(other.last_ns);
    }
}

/// What happened to one output's alerts, cumulative.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub sent: ByPriority,
    /// Shed: the queue was full and these were the least severe.
    pub shed: ByPriority,
    /// Given up: the receiver refused them (HTTP 4xx, 5xx after retries),
    /// or they were still queued when the exit deadline passed.
    pub failed: ByPriority,
    /// Loss notices written into the stream.
    pub notices: u64,
    /// Delivery attempts that failed (a write error such as a full disk, a
    /// receiver down, refusing or timing out): each retry counts, so a
    /// destination that fails for a while shows here before any alert is lost.
    pub errors: u64,
}

/// What an output's queue holds for one alert: the alert itself, or (for
/// an output that writes lines and has a backlog) its line, rendered once at
/// emit for every such output writing the same line. A line takes a third of
/// an alert's memory or less, so a queue holds three times as many.
#[derive(Clone)]
pub enum Item {
    Alert(Arc<Alert>),
    Line(Arc<[u8]>),
}

/// One queued alert as a lane gets it.
#[derive(Clone)]
pub struct Queued {
    pub rank: usize,
    /// The alert's event time, ns since the epoch.
    pub time_ns: u64,
    pub item: Item,
}

impl Queued {
    pub fn alert(&self) -> Option<&Arc<Alert>> {
        match &self.item {
            Item::Alert(a) => Some(a),
            Item::Line(_) => None,
        }
    }

    /// The line, with its newline.
    pub fn line(&self) -> Option<&[u8]> {
        match &self.item {
            Item::Line(l) => Some(l),
            Item::Alert(_) => None,
        }
    }

    /// Heap bytes it holds queued: the alert's (see [`Alert::heap_bytes`]) or
    /// the line's, with the queue's own entry.
    pub fn bytes(&self) -> usize {
        let entry = std::mem::size_of::<Entry>();
        match &self.item {
            Item::Alert(a) => entry + a.heap_bytes(),
            Item::Line(l) => entry + l.len() + 2 * std::mem::size_of::<usize>() + 16,
        }
    }
}

struct Entry {
    seq: u64,
    bytes: usize,
    q: Queued,
}

#[derive(Default)]
struct State {
    buckets: [VecDeque<Entry>; 8],
    bucket_bytes: [usize; 8],
    len: usize,
    bytes: usize,
    peak_bytes: usize,
    seq: u64,
    /// No more alerts will come: lanes deliver what is queued, then end.
    closed: bool,
    /// The exit deadline passed: lanes end now and their results no longer count.
    abandoned: bool,
    waiting: usize,
    running: usize,
    in_flight: ByPriority,
    counts: Counts,
    unreported: Losses,
}

/// The queue and counters of one output, shared by the engine and its lanes.
pub struct Shared {
    state: Mutex<State>,
    /// The queue's length as of its last change, read without the lock.
    backlog: AtomicUsize,
    /// The last failure the lanes printed (None: delivering).
    said: Mutex<Option<String>>,
    /// Lanes waiting for alerts.
    ready: Condvar,
    /// Lanes pausing before a retry (woken early when abandoned).
    pause: Condvar,
    /// The last lane ended.
    done: Condvar,
}

/// A snapshot of the queue's fill.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fill {
    pub alerts: usize,
    pub bytes: usize,
    pub peak_bytes: usize,
}

/// A notice is due when losses wait and the queue has emptied, or when they
/// have waited this long under pressure that does not end (Falco's drop
/// alert comes at most once per 30 s too).
pub const NOTICE_EVERY: Duration = Duration::from_secs(30);

impl Shared {
    pub fn new(lanes: usize) -> Shared {
        let state = State { running: lanes, ..Default::default() };
        Shared {
            state: Mutex::new(state),
            backlog: AtomicUsize::new(0),
            said: Mutex::new(None),
            ready: Condvar::new(),
            pause: Condvar::new(),
            done: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking lane must not take the engine down with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `q` (costing `bytes`), shedding by priority if it does not fit.
    pub fn push(&self, q: Queued, bytes: usize, limits: &Limits) {
        let rank = q.rank;
        let mut s = self.lock();
        if s.abandoned {
            s.counts.failed.0[rank] += 1;
            return;
        }
        let fits = |s: &State, (max_len, max_bytes): (usize, usize)| {
            s.len == 0 || (s.len < max_len && s.bytes.saturating_add(bytes) <= max_bytes)
        };
        let mut bounds = limits.bounds(rank, false);
        if !fits(&s, bounds) {
            // Only less severe alerts may make room. If all of them would not, a
            // kept alert may use the reserve; else the incoming alert is the one
            // to shed (and nothing is evicted in vain).
            let (lower_len, lower_bytes) =
                (rank + 1..8).fold((0, 0), |(l, b), r| (l + s.buckets[r].len(), b + s.bucket_bytes[r]));
            let room = |(max_len, max_bytes): (usize, usize)| {
                s.len - lower_len < max_len && (s.bytes - lower_bytes).saturating_add(bytes) <= max_bytes
            };
            if !room(bounds) {
                bounds = limits.bounds(rank, true);
            }
            if !room(bounds) {
                s.counts.shed.0[rank] += 1;
                s.unreported.add(rank, q.time_ns);
                return;
            }
            while !fits(&s, bounds) {
                let r = (rank + 1..8).rev().find(|&r| !s.buckets[r].is_empty()).expect("room was counted");
                let victim = s.buckets[r].pop_back().expect("not empty");
                s.len -= 1;
                s.bytes -= victim.bytes;
                s.bucket_bytes[r] -= victim.bytes;
                s.counts.shed.0[r] += 1;
                s.unreported.add(r, victim.q.time_ns);
            }
        }
        s.seq += 1;
        let seq = s.seq;
        s.buckets[rank].push_back(Entry { seq, bytes, q });
        s.bucket_bytes[rank] += bytes;
        s.len += 1;
        s.bytes += bytes;
        s.peak_bytes = s.peak_bytes.max(s.bytes);
        self.backlog.store(s.len, Ordering::Relaxed);
        let wake = s.waiting > 0;
        drop(s);
        if wake {
            self.ready.notify_one();
        }
    }

    /// Moves up to `max` alerts, oldest first, into `batch`, waiting for one
    /// if none is queued. False: the lane is to end (closed and empty, or abandoned).
    pub fn pop(&self, batch: &mut Vec<Queued>, max: usize) -> bool {
        let mut s = self.lock();
        while s.len == 0 && !s.closed && !s.abandoned {
            s.waiting += 1;
            s = self.ready.wait(s).unwrap_or_else(|e| e.into_inner());
            s.waiting -= 1;
        }
        if s.abandoned || s.len == 0 {
            return false;
        }
        while batch.len() < max && s.len > 0 {
            let r = (0..8)
                .filter(|&r| !s.buckets[r].is_empty())
                .min_by_key(|&r| s.buckets[r][0].seq)
                .expect("len > 0");
            let e = s.buckets[r].pop_front().expect("not empty");
            s.len -= 1;
            s.bytes -= e.bytes;
            s.bucket_bytes[r] -= e.bytes;
            s.in_flight.0[r] += 1;
            batch.push(e.q);
        }
        self.backlog.store(s.len, Ordering::Relaxed);
        true
    }

    /// A lane's result for a popped batch: the first `handled` were delivered
    /// or `rejected`; the rest (the lane gave up at the deadline) failed. Returns
    /// the losses to tell about when a notice is due.
    pub fn report(&self, batch: &[Queued], handled: usize, rejected: &Losses) -> Option<Losses> {
        let mut s = self.lock();
        if s.abandoned {
            return None; // already counted as failed
        }
        let handled = handled.min(batch.len());
        for (i, q) in batch.iter().enumerate() {
            let r = q.rank;
            s.in_flight.0[r] -= 1;
            if i >= handled {
                s.counts.failed.0[r] += 1;
            } else {
                s.counts.sent.0[r] += 1;
            }
        }
        // Rejected alerts were counted as sent above: move them.
        for r in 0..8 {
            s.counts.sent.0[r] -= rejected.by_priority.0[r];
        }
        s.counts.failed.add(&rejected.by_priority);
        s.unreported.merge(rejected);
        Self::due(&mut s, false)
    }

    /// Takes the unreported losses if a notice is due (queue empty, or
    /// [`NOTICE_EVERY`] passed; `closing`: whatever is left).
    fn due(s: &mut State, closing: bool) -> Option<Losses> {
        let waited = s.unreported.since.is_some_and(|t| t.elapsed() >= NOTICE_EVERY);
        if s.unreported.by_priority.total() == 0 || !(s.len == 0 || waited || closing) {
            return None;
        }
        Some(std::mem::take(&mut s.unreported))
    }

    /// At a lane's end: the losses no notice has told about yet.
    pub fn last_losses(&self) -> Option<Losses> {
        let mut s = self.lock();
        if s.abandoned {
            return None;
        }
        Self::due(&mut s, true)
    }

    /// A delivery attempt failed (see [`Counts::errors`]).
    pub fn error(&self) {
        self.lock().counts.errors += 1;
    }

    /// A notice was written (or could not be).
    pub fn noticed(&self, delivered: bool) {
        if delivered {
            self.lock().counts.notices += 1;
        }
    }

    /// No more alerts: lanes deliver the rest and end.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// The deadline passed: what is queued or in flight is counted as failed
    /// and the lanes are told to give up.
    pub fn abandon(&self) {
        let mut s = self.lock();
        if !s.abandoned {
            s.abandoned = true;
            let mut left = s.in_flight;
            for r in 0..8 {
                left.0[r] += s.buckets[r].len() as u64;
                s.buckets[r].clear();
                s.bucket_bytes[r] = 0;
            }
            s.len = 0;
            s.bytes = 0;
            self.backlog.store(0, Ordering::Relaxed);
            s.in_flight = ByPriority::default();
            s.counts.failed.add(&left);
        }
        drop(s);
        self.ready.notify_all();
        self.pause.notify_all();
    }

    pub fn abandoned(&self) -> bool {
        self.lock().abandoned
    }

    /// Sleeps up to `d`, less if abandoned meanwhile. False: abandoned.
    pub fn pause(&self, d: Duration) -> bool {
        let s = self.lock();
        let (s, _) = self.pause.wait_timeout_while(s, d, |s| !s.abandoned).unwrap_or_else(|e| e.into_inner());
        !s.abandoned
    }

    /// A lane ended.
    pub fn lane_done(&self) {
        let mut s = self.lock();
        s.running -= 1;
        if s.running == 0 {
            self.done.notify_all();
        }
    }

    /// Waits until every lane ended or `until`; whether they all did.
    pub fn wait_lanes(&self, until: Instant) -> bool {
        let mut s = self.lock();
        while s.running > 0 {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            s = self.done.wait_timeout(s, until - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }

    /// Whether `msg` is a failure the lanes have not printed last.
    pub fn say(&self, msg: &str) -> bool {
        let mut said = self.said.lock().unwrap_or_else(|e| e.into_inner());
        let new = said.as_deref() != Some(msg);
        if new {
            *said = Some(msg.to_string());
        }
        new
    }

    /// Whether a lane is the first to deliver again after a printed failure.
    pub fn say_recovered(&self) -> bool {
        self.said.lock().unwrap_or_else(|e| e.into_inner()).take().is_some()
    }

    /// Alerts queued, as of the last push or pop (no lock taken).
    pub fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Relaxed)
    }

    /// Alerts handled so far (delivered or given up on): whether a lane is moving.
    pub fn progress(&self) -> u64 {
        let s = self.lock();
        s.counts.sent.total() + s.counts.failed.total() + s.counts.notices
    }

    pub fn counts(&self) -> Counts {
        self.lock().counts.clone()
    }

    pub fn fill(&self) -> Fill {
        let s = self.lock();
        Fill { alerts: s.len, bytes: s.bytes, peak_bytes: s.peak_bytes }
    }
}
