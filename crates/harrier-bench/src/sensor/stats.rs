//! A sensor's counters: the JSON lines of its stats file while it runs
//! (`harrier run --stats-file`, Falco's `metrics.output_file`) and its final
//! summary on exit.

use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// Cumulative kernel counters from the newest stats line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// Syscalls of captured types seen in the kernel, before any kernel-side
    /// filter (`cur.syscalls` when harrier writes it, else `cur.events`;
    /// Falco: `scap.n_evts`).
    pub syscalls: u64,
    /// Events sent to user space (harrier `cur.events`, Falco `scap.n_evts`).
    pub events: u64,
    /// Events lost in the kernel (harrier `cur.drops`, Falco `scap.n_drops`).
    pub drops: u64,
}

/// The counters of one stats line, in either sensor's shape:
/// harrier `{"sample":N,"cur":{"events":..,"drops":..[,"syscalls":..]}}`,
/// Falco 0.44 `{"sample":N,"output_fields":{"scap.n_evts":..,"scap.n_drops":..}}`
/// (both always written, even when zero). The bool: a pre-filter
/// `syscalls` counter was present.
pub fn parse_line(line: &str) -> Option<(Counters, bool)> {
    let v: Value = serde_json::from_str(line).ok()?;
    if let Some(cur) = v.get("cur") {
        let get = |k: &str| cur.get(k).and_then(Value::as_u64);
        let events = get("events")?;
        let syscalls = get("syscalls");
        let c = Counters { syscalls: syscalls.unwrap_or(events), events, drops: get("drops").unwrap_or(0) };
        return Some((c, syscalls.is_some()));
    }
    let f = v.get("output_fields")?;
    let get = |k: &str| f.get(k).and_then(Value::as_u64);
    let events = get("scap.n_evts")?;
    Some((Counters { syscalls: events, events, drops: get("scap.n_drops").unwrap_or(0) }, false))
}

/// Follows a stats file, keeping the newest complete line's counters.
pub struct StatsTail {
    pub path: PathBuf,
    offset: u64,
    partial: String,
    last: Counters,
    /// Lines read so far (0: the sensor has not written one yet).
    pub lines: u64,
    /// Whether the lines carry a pre-filter `syscalls` counter.
    pub has_syscalls: bool,
}

impl StatsTail {
    pub fn new(path: PathBuf) -> StatsTail {
        StatsTail {
            path,
            offset: 0,
            partial: String::new(),
            last: Counters::default(),
            lines: 0,
            has_syscalls: false,
        }
    }

    pub fn poll(&mut self) -> Counters {
        let Ok(mut f) = std::fs::File::open(&self.path) else { return self.last };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return self.last;
        }
        let mut s = String::new();
        if let Ok(n) = f.read_to_string(&mut s) {
            self.offset += n as u64;
        }
        self.partial.push_str(&s);
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            if let Some((c, pre_filter)) = parse_line(&line) {
                self.last = c;
                self.has_syscalls |= pre_filter;
                self.lines += 1;
            }
        }
        self.last
    }
}

/// The line of a sensor's output that carries its final kernel counters.
pub fn is_final_stats_line(line: &str) -> bool {
    // harrier: "harrier: N events, .. dropped in the kernel, .."; Falco -v:
    // "Driver Drops:N" (after "Driver Events:N", before its rule counts).
    line.contains(" dropped in the kernel") || line.starts_with("Driver Drops:")
}

/// Final counters from a sensor's exit summary, if it printed them.
pub fn final_counters(lines: &[String]) -> Option<Counters> {
    let num = |l: &str, key: &str| l.strip_prefix(key).and_then(|v| v.trim().parse::<u64>().ok());
    let mut c = None::<Counters>;
    for l in lines {
        if let Some(n) = num(l, "Driver Events:") {
            let e = c.get_or_insert_with(Counters::default);
            e.events = n;
            e.syscalls = n;
        } else if let Some(n) = num(l, "Driver Drops:") {
            c.get_or_insert_with(Counters::default).drops = n;
        } else if let Some(rest) =
            l.strip_prefix("harrier: ").filter(|l| l.contains(" dropped in the kernel"))
        {
            // "N events, F kept back by the kernel filter, D dropped in the kernel,
            // S shed by a full backlog, A alerts, ..": drops are D + S.
            let parts: Vec<&str> = rest.split(", ").collect();
            let lead = |suffix: &str| {
                parts.iter().find_map(|p| p.strip_suffix(suffix)).and_then(|n| n.trim().parse::<u64>().ok())
            };
            let (events, kernel) = (lead(" events")?, lead(" dropped in the kernel")?);
            let drops = kernel + lead(" shed by a full backlog").unwrap_or(0);
            let filtered = lead(" kept back by the kernel filter").unwrap_or(0);
            c = Some(Counters { syscalls: events + filtered, events, drops });
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn both_sensors_stats_lines_parse() {
        let h = r#"{"sample":3,"cur":{"events":30,"drops":3,"syscalls":90}}"#;
        assert_eq!(parse_line(h), Some((Counters { syscalls: 90, events: 30, drops: 3 }, true)));
        let h = r#"{"sample":3,"cur":{"events":30,"drops":0}}"#;
        assert_eq!(parse_line(h), Some((Counters { syscalls: 30, events: 30, drops: 0 }, false)));
        // Falco 0.44's metrics.output_file line (abridged).
        let f = r#"{"sample":2,"output_fields":{"evt.source":"syscall","falco.num_evts":1000,
            "scap.n_evts":123456,"scap.n_drops":7,"scap.n_drops_buffer_total":7,"scap.n_drops_perc":0.0}}"#;
        assert_eq!(parse_line(f), Some((Counters { syscalls: 123456, events: 123456, drops: 7 }, false)));
        assert_eq!(
            parse_line(r#"{"sample":1,"output_fields":{"falco.num_evts":1}}"#),
            None,
            "no kernel counters"
        );
        assert_eq!(parse_line("not json"), None);
    }

    #[test]
    fn the_tail_reads_whole_lines_and_prefers_a_pre_filter_counter() {
        let path = std::env::temp_dir().join(format!("harrier-stats-tail-{}", std::process::id()));
        let line = |e: u64, d: u64| format!("{{\"sample\":1,\"cur\":{{\"events\":{e},\"drops\":{d}}}}}\n");
        std::fs::write(&path, line(10, 1) + &line(20, 2) + "{\"sample\":3,\"cur\"").unwrap();
        let mut t = StatsTail::new(path.clone());
        let c = t.poll();
        assert_eq!(
            (c.syscalls, c.events, c.drops, t.has_syscalls, t.lines),
            (20, 20, 2, false, 2),
            "the partial line waits"
        );
        let rest = ":{\"events\":30,\"drops\":3,\"syscalls\":90}}\n";
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(rest.as_bytes()).unwrap();
        let c = t.poll();
        assert_eq!((c.syscalls, c.events, c.drops, t.has_syscalls), (90, 30, 3, true));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn exit_summaries_give_the_final_counters() {
        let falco: Vec<String> = [
            "SIGINT received, exiting...",
            "Driver Events:98765",
            "Driver Drops:12",
            "Syscall event drop monitoring:",
            "   - event drop detected: 0 occurrences",
            "Events detected: 4",
        ]
        .map(String::from)
        .to_vec();
        assert!(falco.iter().any(|l| is_final_stats_line(l)));
        assert_eq!(final_counters(&falco), Some(Counters { syscalls: 98765, events: 98765, drops: 12 }));
        let harrier = vec![
            "harrier: 1200 rules loaded".to_string(),
            "harrier: 5000 events, 300 kept back by the kernel filter, 2 dropped in the kernel, 1 shed by a full backlog, 9 alerts, 10 events with no candidate rule".to_string(),
        ];
        assert!(is_final_stats_line(&harrier[1]) && !is_final_stats_line(&harrier[0]));
        assert_eq!(final_counters(&harrier), Some(Counters { syscalls: 5300, events: 5000, drops: 3 }));
        assert_eq!(final_counters(&["nothing".to_string()]), None);
    }
}
