//! What the conversion did with each event type: nothing is dropped without
//! a line here.

use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TypeStats {
    /// Harrier typed events written, enter and exit merged.
    pub merged: u64,
    /// Harrier typed events written from an exit whose enter was not in the file.
    pub exit_only: u64,
    /// Generic Harrier events (syscalls Harrier has no typed form for).
    pub generic: u64,
    /// Kept as foreign events (not syscalls, or no x86_64 syscall of that name).
    pub foreign: u64,
    /// Turned into state records: snapshot entries, or (procexit) life-cycle exits.
    pub snapshot: u64,
    /// Parameters Harrier's event has that the legacy events did not carry
    /// (or carried in a form with no faithful translation), written as 0/empty.
    pub params_absent: u64,
    /// Byte fields cut to fit Harrier's 64 KiB record.
    pub truncated: u64,
    /// Legacy events not turned into anything, by reason.
    pub skipped: BTreeMap<&'static str, u64>,
}

impl TypeStats {
    pub fn written(&self) -> u64 {
        self.merged + self.exit_only + self.generic + self.foreign + self.snapshot
    }
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Keyed by the output's name: the syscall's, or the legacy event's.
    pub by_type: BTreeMap<String, TypeStats>,
    /// Legacy event blocks read.
    pub legacy_events: u64,
    /// Enter events merged into their exit's output (of any kind).
    pub enters_merged: u64,
    /// Blocks by kind ("event", "process list v9", ...).
    pub blocks: BTreeMap<String, u64>,
    /// Blocks of a type this reader does not know (skipped whole, as the libs do).
    pub unknown_blocks: u64,
    /// Thread ids above u32::MAX, cut to 32 bits.
    pub tids_truncated: u64,
    /// Fork/exec/exit life-cycle records synthesised from clone and execve
    /// exits and procexit events (procexit is counted as `snapshot`: a state record).
    pub lifecycle: u64,
}

impl Stats {
    pub fn entry(&mut self, name: &str) -> &mut TypeStats {
        if !self.by_type.contains_key(name) {
            self.by_type.insert(name.to_string(), TypeStats::default());
        }
        self.by_type.get_mut(name).unwrap()
    }

    pub fn skip(&mut self, name: &str, reason: &'static str) {
        *self.entry(name).skipped.entry(reason).or_default() += 1;
    }

    pub fn total(&self) -> TypeStats {
        let mut t = TypeStats::default();
        for s in self.by_type.values() {
            t.merged += s.merged;
            t.exit_only += s.exit_only;
            t.generic += s.generic;
            t.foreign += s.foreign;
            t.snapshot += s.snapshot;
            t.params_absent += s.params_absent;
            t.truncated += s.truncated;
            for (r, n) in &s.skipped {
                *t.skipped.entry(r).or_default() += n;
            }
        }
        t
    }

    /// The per-type table `harrier convert --stats` prints.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<20} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7}  skipped (reason)",
            "type", "merged", "exit-only", "generic", "foreign", "snapshot", "absent", "cut"
        );
        let row = |s: &mut String, name: &str, t: &TypeStats| {
            let skipped: Vec<String> = t.skipped.iter().map(|(r, n)| format!("{n} ({r})")).collect();
            let _ = writeln!(
                s,
                "{:<20} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7}  {}",
                name,
                t.merged,
                t.exit_only,
                t.generic,
                t.foreign,
                t.snapshot,
                t.params_absent,
                t.truncated,
                if skipped.is_empty() { "-".to_string() } else { skipped.join(", ") }
            );
        };
        for (name, t) in &self.by_type {
            row(&mut s, name, t);
        }
        row(&mut s, "TOTAL", &self.total());
        let blocks: Vec<String> = self.blocks.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(
            s,
            "legacy events read: {} ({} enters merged into their exits); blocks: {}",
            self.legacy_events,
            self.enters_merged,
            blocks.join(", ")
        );
        if self.lifecycle > 0 {
            let _ = writeln!(s, "fork/exec life-cycle records synthesised: {}", self.lifecycle);
        }
        if self.unknown_blocks > 0 || self.tids_truncated > 0 {
            let _ = writeln!(
                s,
                "unknown blocks skipped: {}; thread ids cut to 32 bits: {}",
                self.unknown_blocks, self.tids_truncated
            );
        }
        s
    }
}
