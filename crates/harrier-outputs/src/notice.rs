//! The loss notice: once an output's pressure ends (its queue has emptied),
//! one alert in its own stream says how many alerts of which priority it
//! lost and between which event times, so a reader of the alerts sees the
//! gap. Shaped as Falco's own internal alerts ("Falco internal: syscall
//! event drop"): source "internal", the rule name leading the output, the
//! figures in output_fields.

use crate::alert::{new_uuid, Alert, Rfc3339, PRIORITIES};
use crate::queue::Losses;
use serde_json::{Map, Value};

pub const RULE: &str = "Falco internal: outputs queue drop";

/// The notice for `losses` of output `output`. Its priority is that of the
/// most severe alert lost, so every route a lost alert would have taken
/// (e.g. Falcosidekick's minimumpriority) carries the notice too.
pub fn alert(output: &str, losses: &Losses, host: &str) -> Alert {
    let n = losses.by_priority;
    let worst = n.0.iter().position(|&c| c > 0).unwrap_or(PRIORITIES.len() - 1);
    let (first, last) = (Rfc3339(losses.first_ns).to_string(), Rfc3339(losses.last_ns).to_string());
    let mut fields = Map::new();
    fields.insert("output_name".into(), output.into());
    fields.insert("n_drops".into(), n.total().into());
    for (p, c) in PRIORITIES.iter().zip(n.0) {
        fields.insert(format!("n_drops_{}", p.to_ascii_lowercase()), c.into());
    }
    fields.insert("first_drop_time".into(), Value::String(first.clone()));
    fields.insert("last_drop_time".into(), Value::String(last.clone()));
    let each: Vec<String> = n.nonzero().map(|(p, c)| format!("{p} {c}")).collect();
    let output = format!(
        "{RULE}. {} alerts dropped by output {output} between {first} and {last} ({}).",
        n.total(),
        each.join(", ")
    );
    Alert {
        time_ns: now_ns(),
        rule: RULE.into(),
        priority: PRIORITIES[worst],
        output,
        output_fields: fields,
        tags: Vec::new(),
        source: "internal".into(),
        hostname: host.into(),
        uuid: new_uuid(),
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_names_counts_per_priority_and_the_span() {
        let mut l = Losses::default();
        l.add(4, 2_000_000_000);
        l.add(4, 1_000_000_000);
        l.add(6, 3_000_000_000);
        let a = alert("file", &l, "h");
        assert_eq!((a.rule.as_str(), a.priority, a.source.as_str()), (RULE, "Warning", "internal"));
        let f = &a.output_fields;
        assert_eq!((f["n_drops"].as_u64(), f["n_drops_warning"].as_u64()), (Some(3), Some(2)));
        assert_eq!((f["n_drops_informational"].as_u64(), f["n_drops_critical"].as_u64()), (Some(1), Some(0)));
        assert_eq!(f["first_drop_time"], "1970-01-01T00:00:01.000000000Z");
        assert_eq!(f["last_drop_time"], "1970-01-01T00:00:03.000000000Z");
        assert_eq!(f["output_name"], "file");
        assert_eq!(
            a.output,
            "Falco internal: outputs queue drop. 3 alerts dropped by output file between \
             1970-01-01T00:00:01.000000000Z and 1970-01-01T00:00:03.000000000Z (Warning 2, Informational 1)."
        );
    }
}
