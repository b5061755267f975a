//! `--stats-file F --stats-interval MS`: JSON lines as Falco's `-s` wrote
//! them, cumulative and delta events and drops per interval, plus each
//! output's alerts: sent, and lost per priority (shed from a full queue, or
//! failed), and its failed delivery attempts (errors), cumulative.

use harrier_outputs::{ByPriority, OutputStats};
use serde_json::{json, Map, Value};
use std::io::Write;

#[derive(Default)]
pub struct StatsFile {
    sample: u64,
    last: (u64, u64),
    /// Rule reloads so far (set by the caller before each line).
    pub reloads: u64,
}

/// {"Warning": 12, ...}: the priorities with a count.
fn by_priority(b: &ByPriority) -> Value {
    Value::Object(b.nonzero().map(|(p, n)| (p.to_string(), n.into())).collect())
}

fn outputs(outs: &[OutputStats]) -> Value {
    let mut m = Map::new();
    for o in outs {
        let v = json!({
            "sent": o.sent.total(),
            "lost": o.lost(),
            "shed": by_priority(&o.shed),
            "failed": by_priority(&o.failed),
            "queued": o.queued,
            "notices": o.notices,
            "errors": o.errors,
        });
        m.insert(o.name.clone(), v);
    }
    Value::Object(m)
}

impl StatsFile {
    /// One line for cumulative `events` and `drops` and the outputs' figures.
    pub fn line(&mut self, events: u64, drops: u64, outs: &[OutputStats]) -> String {
        self.sample += 1;
        let (de, dd) = (events.saturating_sub(self.last.0), drops.saturating_sub(self.last.1));
        self.last = (events, drops);
        let pct = if de + dd == 0 { 0.0 } else { dd as f64 * 100.0 / (de + dd) as f64 };
        json!({
            "sample": self.sample,
            "cur": {"events": events, "drops": drops, "preemptions": 0},
            "delta": {"events": de, "drops": dd, "preemptions": 0},
            "drop_pct": pct,
            "reloads": self.reloads,
            "outputs": outputs(outs),
        })
        .to_string()
    }

    pub fn write(
        &mut self,
        out: &mut impl Write,
        events: u64,
        drops: u64,
        outs: &[OutputStats],
    ) -> std::io::Result<()> {
        let l = self.line(events, drops, outs);
        writeln!(out, "{l}")?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use harrier_outputs::{ByPriority, OutputStats};

    #[test]
    fn lines_carry_cumulative_and_delta_figures_and_losses_per_output_and_priority() {
        let mut s = super::StatsFile::default();
        let _ = s.line(100, 0, &[]);
        let file = OutputStats {
            name: "file".into(),
            sent: ByPriority([0, 0, 1, 0, 90, 0, 0, 0]),
            shed: ByPriority([0, 0, 0, 0, 7, 2, 0, 0]),
            failed: ByPriority::default(),
            notices: 1,
            errors: 4,
            queued: 3,
            queued_bytes: 9000,
            peak_bytes: 9000,
        };
        let l: serde_json::Value = serde_json::from_str(&s.line(250, 50, &[file])).unwrap();
        assert_eq!(l["sample"], 2);
        assert_eq!(l["cur"]["events"], 250);
        assert_eq!(l["delta"]["events"], 150);
        assert_eq!(l["delta"]["drops"], 50);
        assert_eq!(l["drop_pct"], 25.0);
        let f = &l["outputs"]["file"];
        assert_eq!(
            (f["sent"].as_u64(), f["lost"].as_u64(), f["queued"].as_u64()),
            (Some(91), Some(9), Some(3))
        );
        assert_eq!(f["shed"], serde_json::json!({"Warning": 7, "Notice": 2}));
        assert_eq!(f["failed"], serde_json::json!({}));
        assert_eq!(f["errors"], 4, "failed writes, retries included");
    }
}
