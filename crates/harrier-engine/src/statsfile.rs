//! `--stats-file F --stats-interval MS`: JSON lines as Falco's `-s` wrote
//! them, cumulative and delta events and drops per interval.

use serde_json::json;
use std::io::Write;

#[derive(Default)]
pub struct StatsFile {
    sample: u64,
    last: (u64, u64),
}

impl StatsFile {
    /// One line for cumulative `events` and `drops`.
    pub fn line(&mut self, events: u64, drops: u64) -> String {
        self.sample += 1;
        let (de, dd) = (events.saturating_sub(self.last.0), drops.saturating_sub(self.last.1));
        self.last = (events, drops);
        let pct = if de + dd == 0 { 0.0 } else { dd as f64 * 100.0 / (de + dd) as f64 };
        json!({
            "sample": self.sample,
            "cur": {"events": events, "drops": drops, "preemptions": 0},
            "delta": {"events": de, "drops": dd, "preemptions": 0},
            "drop_pct": pct,
        })
        .to_string()
    }

    pub fn write(&mut self, out: &mut impl Write, events: u64, drops: u64) -> std::io::Result<()> {
        let l = self.line(events, drops);
        writeln!(out, "{l}")?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lines_carry_cumulative_and_delta_figures() {
        let mut s = super::StatsFile::default();
        let _ = s.line(100, 0);
        let l: serde_json::Value = serde_json::from_str(&s.line(250, 50)).unwrap();
        assert_eq!(l["sample"], 2);
        assert_eq!(l["cur"]["events"], 250);
        assert_eq!(l["delta"]["events"], 150);
        assert_eq!(l["delta"]["drops"], 50);
        assert_eq!(l["drop_pct"], 25.0);
    }
}
