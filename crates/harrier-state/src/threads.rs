//! The thread table `harrier capture --json` uses for pid and comm: tid → (pid, comm).

use harrier_schema::decode::Meta;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub pid: u32,
    pub comm: String,
}

#[derive(Default)]
pub struct ThreadTable {
    threads: HashMap<u32, Thread>,
    /// Exited threads are forgotten one batch late: events from other CPUs'
    /// rings that predate the exit may still be in the current batch.
    exited: Vec<u32>,
    exited_last_batch: Vec<u32>,
}

impl ThreadTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies a life-cycle event from thread `tid`.
    pub fn apply(&mut self, tid: u32, meta: &Meta) {
        match meta {
            Meta::Fork { child_tid, child_pid, comm, .. } => {
                self.threads.insert(*child_tid, Thread { pid: *child_pid, comm: comm.clone() });
            }
            Meta::Exec { old_tid, comm, .. } => {
                // A non-leader thread that execs takes over the leader's tid.
                if *old_tid != tid {
                    self.threads.remove(old_tid);
                }
                self.threads.insert(tid, Thread { pid: tid, comm: comm.clone() });
            }
            Meta::Exit { .. } => self.exited.push(tid),
            Meta::Comm { comm } => {
                if let Some(t) = self.lookup(tid) {
                    let pid = t.pid;
                    self.threads.insert(tid, Thread { pid, comm: comm.clone() });
                }
            }
        }
    }

    /// Reads the threads already running (of process `pid`, or all) from
    /// /proc. Call once the sensor is attached: resolving a thread only at its
    /// first event would be too late if it has exec'd since (earlier events
    /// would get the new comm) or exited (no pid, no comm).
    pub fn scan_proc(&mut self, pid: Option<u32>) {
        let numbered = |dir: String| -> Vec<u32> {
            std::fs::read_dir(dir)
                .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
                .unwrap_or_default()
        };
        let procs = pid.map_or_else(|| numbered("/proc".into()), |p| vec![p]);
        for p in procs {
            for tid in numbered(format!("/proc/{p}/task")) {
                self.lookup(tid);
            }
        }
    }

    /// Call after each drained batch of events.
    pub fn end_batch(&mut self) {
        for tid in self.exited_last_batch.drain(..) {
            self.threads.remove(&tid);
        }
        std::mem::swap(&mut self.exited, &mut self.exited_last_batch);
    }

    /// The thread's pid and comm, asking /proc the first time a thread is seen.
    pub fn lookup(&mut self, tid: u32) -> Option<&Thread> {
        match self.threads.entry(tid) {
            std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
            std::collections::hash_map::Entry::Vacant(e) => Some(e.insert(from_proc(tid)?)),
        }
    }

    pub fn len(&self) -> usize {
        self.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }
}

/// /proc/TID/status works for any thread id, listed or not.
fn from_proc(tid: u32) -> Option<Thread> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
    Some(Thread { pid: field("Tgid:")?.parse().ok()?, comm: field("Name:")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_exec_comm_exit() {
        let mut t = ThreadTable::new();
        t.apply(
            1,
            &Meta::Fork {
                child_tid: 4_000_001,
                child_pid: 4_000_001,
                comm: "sh".into(),
                child_vpid: 0,
                flags: 0,
            },
        );
        assert_eq!(t.lookup(4_000_001).unwrap().comm, "sh");
        t.apply(4_000_001, &Meta::Exec { old_tid: 4_000_001, comm: "ls".into(), cgroup: String::new() });
        t.apply(4_000_001, &Meta::Comm { comm: "renamed".into() });
        assert_eq!(t.lookup(4_000_001), Some(&Thread { pid: 4_000_001, comm: "renamed".into() }));
        t.apply(4_000_001, &Meta::Exit { pid: 4_000_001 });
        t.end_batch();
        assert!(t.lookup(4_000_001).is_some(), "kept for one more batch");
        t.end_batch();
        assert!(t.lookup(4_000_001).is_none());
    }

    #[test]
    fn a_scan_finds_this_process_threads() {
        let mut t = ThreadTable::new();
        t.scan_proc(Some(std::process::id()));
        assert!(!t.is_empty());
    }

    #[test]
    fn unknown_threads_come_from_proc() {
        let me = std::process::id();
        let mut t = ThreadTable::new();
        assert_eq!(t.lookup(me).unwrap().pid, me);
    }
}
