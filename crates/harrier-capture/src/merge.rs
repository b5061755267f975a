//! One stream in time order out of many rings. Each per-CPU ring is in time
//! order on its own, but a sink needs the order across CPUs too: a process
//! may open a file on one CPU and exec on another, and the open must be seen
//! under the old name. A drain copies each ring's batch out (the rings are
//! released at once) and merges the runs by timestamp.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Default)]
pub struct Merger {
    arena: Vec<u8>,
    /// (ts, start, len) per record, run after run.
    records: Vec<(u64, usize, usize)>,
    /// Where each run ends in `records`.
    run_ends: Vec<usize>,
}

impl Merger {
    /// Adds a record, stamped `ts`, to the current run.
    pub fn push(&mut self, ts: u64, rec: &[u8]) {
        self.records.push((ts, self.arena.len(), rec.len()));
        self.arena.extend_from_slice(rec);
    }

    /// Closes the current run (one ring's batch).
    pub fn end_run(&mut self) {
        if self.run_ends.last() != Some(&self.records.len()) {
            self.run_ends.push(self.records.len());
        }
    }

    /// Hands every record to `f`, oldest first (ties: run order), and empties
    /// the merger. A run that is not sorted itself (a ring shared by CPUs)
    /// comes out in nearly, not strictly, time order.
    pub fn drain(&mut self, f: &mut impl FnMut(&[u8])) {
        self.end_run();
        let mut heap = BinaryHeap::with_capacity(self.run_ends.len());
        let mut start = 0;
        for (run, &end) in self.run_ends.iter().enumerate() {
            if start < end {
                heap.push(Reverse((self.records[start].0, run, start, end)));
            }
            start = end;
        }
        while let Some(Reverse((_, run, at, end))) = heap.pop() {
            let (_, off, len) = self.records[at];
            f(&self.arena[off..off + len]);
            if at + 1 < end {
                heap.push(Reverse((self.records[at + 1].0, run, at + 1, end)));
            }
        }
        self.arena.clear();
        self.records.clear();
        self.run_ends.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::Merger;

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
        m.drain(&mut |r| out.push(r[0]));
        assert_eq!(out, b"axbycz");
        m.drain(&mut |_| panic!("drained twice"));
    }
}
