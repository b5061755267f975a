//! One stream in time order out of many rings. Each per-CPU ring is in time
//! order on its own, but a sink needs the order across CPUs too: a process
//! may open a file on one CPU and exec on another, and the open must be seen
//! under the old name. A drain copies each ring's batch out (the rings are
//! released at once) and merges the runs by timestamp.
//!
//! A flood must not fill the kernel's rings while the sink is busy with a
//! big batch: the [`Backlog`] hands a batch out in slices and copies the
//! rings again between them, into a second generation that is handed out
//! once the first is done (all of its records are newer). Past its limit
//! ([`BACKLOG_BYTES`] by default) it takes only priority records (the
//! session sheds the rest and counts them); past half as much again the
//! rings wait, and what they cannot hold the kernel drops and counts.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The most record bytes the backlog holds (both generations) before it
/// keeps only priority events: about 250,000 open events, a burst's worth,
/// within the sensor's memory target.
pub const BACKLOG_BYTES: usize = 40 << 20;

/// An arena this much larger than what it held is given back when empty.
const KEEP_BYTES: usize = 8 << 20;

#[derive(Default)]
pub struct Merger {
    arena: Vec<u8>,
    /// (ts, start, len) per record, run after run.
    records: Vec<(u64, usize, usize)>,
    /// Where each run ends in `records`.
    run_ends: Vec<usize>,
    /// Per run being handed out: (ts, run, next record, run end).
    heap: BinaryHeap<Reverse<(u64, usize, usize, usize)>>,
    /// The heap is built: the merger is handing out, not filling.
    sealed: bool,
}

impl Merger {
    /// Adds a record, stamped `ts`, to the current run.
    pub fn push(&mut self, ts: u64, rec: &[u8]) {
        debug_assert!(!self.sealed, "push into a merger being handed out");
        self.records.push((ts, self.arena.len(), rec.len()));
        self.arena.extend_from_slice(rec);
    }

    /// Closes the current run (one ring's batch).
    pub fn end_run(&mut self) {
        if self.run_ends.last() != Some(&self.records.len()) {
            self.run_ends.push(self.records.len());
        }
    }

    /// The record bytes it holds.
    pub fn bytes(&self) -> usize {
        self.arena.len()
    }

    /// True when it holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Hands up to `max` records to `f`, oldest first (ties: run order), and
    /// empties the merger once all are out; true then. A run that is not
    /// sorted itself (a ring shared by CPUs) comes out in nearly, not
    /// strictly, time order.
    pub fn take(&mut self, max: usize, f: &mut impl FnMut(&[u8])) -> bool {
        if !self.sealed {
            self.seal();
        }
        for _ in 0..max {
            let Some(Reverse((_, run, at, end))) = self.heap.pop() else { break };
            let (_, off, len) = self.records[at];
            f(&self.arena[off..off + len]);
            if at + 1 < end {
                self.heap.push(Reverse((self.records[at + 1].0, run, at + 1, end)));
            }
        }
        if !self.heap.is_empty() {
            return false;
        }
        self.clear();
        true
    }

    fn seal(&mut self) {
        self.end_run();
        self.heap.clear();
        let mut start = 0;
        for (run, &end) in self.run_ends.iter().enumerate() {
            if start < end {
                self.heap.push(Reverse((self.records[start].0, run, start, end)));
            }
            start = end;
        }
        self.sealed = true;
    }

    fn clear(&mut self) {
        if self.arena.capacity() > KEEP_BYTES {
            self.arena = Vec::new();
            self.records = Vec::new();
        }
        self.arena.clear();
        self.records.clear();
        self.run_ends.clear();
        self.sealed = false;
    }
}

/// Records copied out of the rings and not yet handed to the sink: `out` is
/// being handed out, `fill` takes the next copies.
pub struct Backlog {
    out: Merger,
    fill: Merger,
    /// The bytes it holds before it takes only priority records.
    cap: usize,
}

impl Backlog {
    pub fn new(cap: usize) -> Backlog {
        Backlog { out: Merger::default(), fill: Merger::default(), cap }
    }

    /// Whether ordinary records may still be copied into it.
    pub fn has_room(&self) -> bool {
        self.bytes() < self.cap
    }

    /// Whether priority records may still be copied into it: half the limit
    /// more, so the rings wait (their reserve is for those) and the memory
    /// stays bounded however many there are.
    pub fn has_priority_room(&self) -> bool {
        self.bytes() < self.cap + self.cap / 2
    }

    /// Where the next copies go (close each ring's batch with end_run).
    pub fn filling(&mut self) -> &mut Merger {
        &mut self.fill
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty() && self.fill.is_empty()
    }

    /// The bytes waiting.
    pub fn bytes(&self) -> usize {
        self.out.bytes() + self.fill.bytes()
    }

    /// Hands up to `max` records to `f`, the older generation first; true
    /// when nothing is left.
    pub fn take(&mut self, max: usize, f: &mut impl FnMut(&[u8])) -> bool {
        if self.out.is_empty() {
            std::mem::swap(&mut self.out, &mut self.fill);
        }
        self.out.take(max, f);
        self.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::{Backlog, Merger, BACKLOG_BYTES};

    #[test]
    fn runs_merge_by_timestamp_and_ties_keep_run_order() {
        let mut m = Merger::default();
        m.end_run(); // an empty first ring
        for (ts, tag) in [(1, b'a'), (5, b'b'), (9, b'c')] {
            m.push(ts, &[tag]);
        }
        m.end_run();
        m.end_run(); // an empty ring
        for (ts, tag) in [(2, b'x'), (5, b'y'), (20, b'z')] {
            m.push(ts, &[tag]);
        }
        let mut out = Vec::new();
        assert!(m.take(usize::MAX, &mut |r| out.push(r[0])));
        assert_eq!(out, b"axbycz");
        m.take(usize::MAX, &mut |_| panic!("drained twice"));
    }

    #[test]
    fn a_merger_handed_out_in_slices_keeps_the_order_and_empties_at_the_end() {
        let mut m = Merger::default();
        for (ts, tag) in [(1, b'a'), (5, b'b'), (9, b'c')] {
            m.push(ts, &[tag]);
        }
        m.end_run();
        for (ts, tag) in [(2, b'x'), (6, b'y')] {
            m.push(ts, &[tag]);
        }
        let mut out = Vec::new();
        assert!(!m.take(2, &mut |r| out.push(r[0])));
        assert!(!m.take(2, &mut |r| out.push(r[0])));
        assert!(m.take(2, &mut |r| out.push(r[0])));
        assert_eq!(out, b"axbyc");
        assert!(m.is_empty() && m.bytes() == 0);
    }

    #[test]
    fn copies_made_while_a_batch_is_handed_out_come_after_it() {
        let mut b = Backlog::new(BACKLOG_BYTES);
        for (ts, tag) in [(1, b'a'), (3, b'b'), (5, b'c')] {
            b.filling().push(ts, &[tag]);
        }
        b.filling().end_run();
        let mut out = Vec::new();
        assert!(!b.take(1, &mut |r| out.push(r[0])));
        // The next copy of the rings, taken between slices.
        for (ts, tag) in [(6, b'x'), (7, b'y')] {
            b.filling().push(ts, &[tag]);
        }
        b.filling().end_run();
        // A generation's records keep their room until all are out.
        assert_eq!(b.bytes(), 5);
        while !b.take(1, &mut |r| out.push(r[0])) {}
        assert_eq!(out, b"abcxy");
        assert!(b.is_empty() && b.has_room());
    }
}
