//! What a capture reports when it ends, in the spirit of Falco's scap-open:
//! kernel events and drops per CPU and reason, per-program BPF run time,
//! user-space throughput and a per-syscall histogram.

use harrier_schema::wire::{CpuStats, Header, DROP_REASONS};
use harrier_schema::{syscall_by_nr, MAX_SYSCALL_NR};
use serde::Serialize;
use serde_json::json;
use std::fmt::Write;
use std::time::Duration;

/// Counted in the ring callback for every event: kept to a few additions.
#[derive(Debug, Clone, Serialize)]
pub struct UserCounters {
    pub events: u64,
    pub bytes: u64,
    /// Process life-cycle events (not syscalls), included in `events`.
    pub meta_events: u64,
    /// Copies made with the backlog full (only priority events kept).
    pub backlog_full: u64,
    /// The most bytes copied out of the rings and not yet handed to the sink.
    pub backlog_peak: u64,
    /// Ordinary events copied out of the rings while the backlog was full
    /// and not kept (the life cycle and priority syscalls always are);
    /// counted in `events` too.
    pub backlog_shed: u64,
    #[serde(skip)]
    pub per_syscall: Vec<u64>,
}

impl Default for UserCounters {
    fn default() -> Self {
        UserCounters {
            events: 0,
            bytes: 0,
            meta_events: 0,
            backlog_full: 0,
            backlog_peak: 0,
            backlog_shed: 0,
            per_syscall: vec![0; MAX_SYSCALL_NR as usize + 1],
        }
    }
}

impl UserCounters {
    #[inline]
    pub fn count(&mut self, h: &Header, len: usize) {
        self.events += 1;
        self.bytes += len as u64;
        match self.per_syscall.get_mut(h.kind as usize) {
            Some(n) => *n += 1,
            None => self.meta_events += 1,
        }
    }

    /// (syscall name, count), most frequent first.
    pub fn histogram(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<_> = self
            .per_syscall
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(nr, &n)| (syscall_by_nr(nr as u32).map_or("?", |s| s.name), n))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProgStats {
    pub name: String,
    pub run_cnt: u64,
    pub run_time_ns: u64,
    pub recursion_misses: u64,
}

impl ProgStats {
    pub fn avg_ns(&self) -> f64 {
        if self.run_cnt == 0 {
            0.0
        } else {
            self.run_time_ns as f64 / self.run_cnt as f64
        }
    }
}

#[derive(Debug, Clone)]
pub struct Stats {
    pub duration: Duration,
    pub per_cpu: Vec<CpuStats>,
    pub programs: Vec<ProgStats>,
    pub run_time_stats: bool,
    /// "per-syscall" or "dispatcher".
    pub attach_mode: String,
    /// "path cache: on (its hooks)", or off and why (crate::dircache).
    pub dir_cache: String,
    /// How entry copies read user memory, and what became of it (crate::uread).
    pub user_reads: String,
    /// How the programs learn the current task, and what became of it (crate::current).
    pub current_task: String,
    pub user: UserCounters,
}

impl Stats {
    pub fn kernel_total(&self) -> CpuStats {
        let mut t = CpuStats::default();
        self.per_cpu.iter().for_each(|c| t.add(c));
        t
    }

    /// Events lost anywhere: dropped in the kernel (ring full, no ring,
    /// shed), a program that could not run, or shed by a full backlog.
    pub fn total_drops(&self) -> u64 {
        self.kernel_total().dropped()
            + self.programs.iter().map(|p| p.recursion_misses).sum::<u64>()
            + self.user.backlog_shed
    }

    fn per_sec(&self, n: u64) -> f64 {
        n as f64 / self.duration.as_secs_f64().max(1e-9)
    }

    pub fn to_json(&self) -> serde_json::Value {
        let k = self.kernel_total();
        let drops = |c: &CpuStats| -> serde_json::Map<String, serde_json::Value> {
            DROP_REASONS.iter().zip(c.drops).map(|(r, n)| (r.to_string(), json!(n))).collect()
        };
        json!({
            "duration_s": self.duration.as_secs_f64(),
            "kernel": {
                "events": k.events,
                "drops": k.dropped(),
                "drops_by_reason": drops(&k),
                "toctou_fallbacks": k.toctou_fallbacks,
                "stash_fails": k.stash_fails,
                "stash_in_task": k.stash_in_task,
                "read_faults": k.read_faults,
                "truncated": k.truncated,
                "filtered": k.filtered,
                "dir_cache": {"hits": k.dir_hits, "misses": k.dir_misses, "clear": k.dir_clear},
                "per_cpu": self.per_cpu.iter().enumerate().map(|(i, c)| json!({
                    "cpu": i, "events": c.events, "drops": c.dropped(), "drops_by_reason": drops(c),
                })).collect::<Vec<_>>(),
            },
            "programs": self.programs.iter().filter(|p| p.run_cnt > 0).map(|p| json!({
                "name": p.name, "run_cnt": p.run_cnt, "run_time_ns": p.run_time_ns,
                "avg_ns": p.avg_ns(), "recursion_misses": p.recursion_misses,
            })).collect::<Vec<_>>(),
            "run_time_stats": self.run_time_stats,
            "attach_mode": self.attach_mode,
            "dir_cache": self.dir_cache,
            "user_reads": self.user_reads,
            "current_task": self.current_task,
            "user": {
                "events": self.user.events,
                "meta_events": self.user.meta_events,
                "bytes": self.user.bytes,
                "avg_event_bytes": self.user.bytes as f64 / self.user.events.max(1) as f64,
                "events_per_s": self.per_sec(self.user.events),
            },
            "syscalls": self.user.histogram().into_iter().map(|(n, c)| (n.to_string(), json!(c)))
                .collect::<serde_json::Map<_, _>>(),
        })
    }

    /// The human-readable report printed when a capture ends.
    pub fn report(&self) -> String {
        let k = self.kernel_total();
        let mut s = String::new();
        let _ = writeln!(s, "---------------------- STATS -----------------------");
        let _ = writeln!(s, "Seconds: {:.3}  attach: {}", self.duration.as_secs_f64(), self.attach_mode);
        let _ = writeln!(
            s,
            "[KERNEL] events: {}  drops: {}  ({})",
            k.events,
            k.dropped(),
            DROP_REASONS.iter().zip(k.drops).map(|(r, n)| format!("{r}: {n}")).collect::<Vec<_>>().join(", ")
        );
        for (i, c) in self.per_cpu.iter().enumerate() {
            let _ = writeln!(s, "  cpu {i:>3}: events {:>12}  drops {:>10}", c.events, c.dropped());
        }
        let _ = writeln!(
            s,
            "  toctou fallbacks: {}  stash failures: {}  stashes in task storage: {}  read faults: {}  truncated: {}  \
             filtered in kernel: {}",
            k.toctou_fallbacks, k.stash_fails, k.stash_in_task, k.read_faults, k.truncated, k.filtered
        );
        let _ = writeln!(
            s,
            "  {}: {} hits, {} misses, {} kept back at a directory",
            self.dir_cache, k.dir_hits, k.dir_misses, k.dir_clear
        );
        let _ = writeln!(s, "  {}", self.user_reads);
        let _ = writeln!(s, "  {}", self.current_task);
        if self.run_time_stats {
            let _ = writeln!(
                s,
                "[BPF] {:<26} {:>12} {:>14} {:>8} {:>9}",
                "program", "runs", "run time ns", "avg ns", "rec.miss"
            );
            for p in self.programs.iter().filter(|p| p.run_cnt > 0 || p.recursion_misses > 0) {
                let _ = writeln!(
                    s,
                    "  {:<30} {:>12} {:>14} {:>8.1} {:>9}",
                    p.name,
                    p.run_cnt,
                    p.run_time_ns,
                    p.avg_ns(),
                    p.recursion_misses
                );
            }
        } else {
            let _ = writeln!(s, "[BPF] run-time stats off (--bpf-stats turns them on)");
        }
        let u = &self.user;
        let _ = writeln!(
            s,
            "[USER] events: {} (life-cycle: {})  bytes: {}  avg event: {:.1} B  events/s: {:.0}",
            u.events,
            u.meta_events,
            u.bytes,
            u.bytes as f64 / u.events.max(1) as f64,
            self.per_sec(u.events)
        );
        let _ = writeln!(s, "[SYSCALLS]");
        for (name, n) in u.histogram() {
            let _ = writeln!(s, "  {name:<24} {n:>12}");
        }
        s.push_str("----------------------------------------------------\n");
        s
    }
}
