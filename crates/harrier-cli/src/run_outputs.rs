//! `harrier run`'s outputs: built from the config, closed at the stop with
//! a deadline, and their figures in the exit summary.

use anyhow::Result;
use harrier_falco::config::RunConfig;
use harrier_outputs::sinks::{FileSink, Http, Program, Stdout, Syslog, IN_FLIGHT};
use harrier_outputs::{ByPriority, JsonShape, OutputStats, Outputs};
use std::time::{Duration, Instant};

/// From SIGINT/SIGTERM to the outputs' close deadline: what they have queued
/// is delivered by then unless they are dead (an output still delivering is
/// given longer, see [`Outputs::close`]), and the final stats follow at once.
pub const STOP_BUDGET: Duration = Duration::from_millis(800);

pub fn outputs(c: &RunConfig) -> Result<Outputs> {
    let shape = JsonShape {
        include_output: c.json_include_output_property,
        include_tags: c.json_include_tags_property,
        include_message: c.json_include_message_property,
        include_output_fields: c.json_include_output_fields_property,
    };
    harrier_outputs::set_time_format_iso_8601(c.time_format_iso_8601);
    let json = c.json_output.then_some(shape);
    let mut o = Outputs::new(c.outputs_queue);
    if c.stdout_output {
        o.add("stdout", Box::new(Stdout::new(json)?));
    }
    if let Some(f) = &c.file_output {
        o.add("file", Box::new(FileSink::open(f, json)?));
    }
    if c.syslog_output {
        o.add("syslog", Box::new(Syslog::new(json)));
    }
    if let Some((program, keep_alive)) = &c.program_output {
        o.add("program", Box::new(Program::new(program, *keep_alive, json)?));
    }
    if let Some(u) = &c.http_output {
        o.add_lanes("http", Http::with_options(u, shape, c.http_options.clone())?.lanes(IN_FLIGHT));
    }
    Ok(o)
}

/// The webserver's settings: its address, health endpoint and TLS (ssl_certificate read
/// here: a missing or keyless file is an error naming the key and the file).
pub fn webserver(c: &RunConfig, addr: &str) -> Result<harrier_engine::metrics::WebServer> {
    let tls = match &c.webserver_ssl {
        Some(pem) => Some(harrier_outputs::tls::server_config(pem, "webserver.ssl_certificate")?),
        None => None,
    };
    Ok(harrier_engine::metrics::WebServer { addr: addr.to_string(), healthz: c.healthz.clone(), tls })
}

/// metrics' snapshots, if the config asks for them (output_rule or output_file). The
/// alert goes out only where the rules' priority lets Informational through, as in Falco.
pub fn snapshots(c: &RunConfig) -> Result<Option<harrier_engine::snapshot::Snapshotter>> {
    let Some(mut policy) = c.metrics.clone() else { return Ok(None) };
    if policy.output_rule
        && harrier_outputs::rank(c.priority.as_str()) < harrier_outputs::rank("Informational")
    {
        say!(
            "harrier: warning: metrics.output_rule needs priority informational or debug (it is {}): no metrics snapshot alerts",
            c.priority.as_str().to_ascii_lowercase()
        );
        policy.output_rule = false;
    }
    let version = format!("{}+harrier.{}", crate::falco::FALCO_VERSION, env!("CARGO_PKG_VERSION"));
    Ok(Some(harrier_engine::snapshot::Snapshotter::new(policy, &version)?))
}

/// The close deadline for a stop asked for at `stopped`: the rest of the
/// budget, and never less than a moment for outputs that keep up.
pub fn deadline(stopped: Instant) -> Duration {
    STOP_BUDGET.saturating_sub(stopped.elapsed()).max(Duration::from_millis(100))
}

/// "Warning 12, Notice 3".
fn each(b: &ByPriority) -> String {
    b.nonzero().map(|(p, n)| format!("{p} {n}")).collect::<Vec<_>>().join(", ")
}

/// One exit-summary line per output.
pub fn summary(o: &OutputStats) -> String {
    let mut s = format!("harrier: output {}: {} sent, {} lost", o.name, o.sent.total(), o.lost());
    if o.shed.total() > 0 {
        s += &format!("; shed from a full queue: {}", each(&o.shed));
    }
    if o.failed.total() > 0 {
        s += &format!("; failed: {}", each(&o.failed));
    }
    if o.notices > 0 {
        s += &format!("; {} loss notice(s) in its stream", o.notices);
    }
    if o.errors > 0 {
        s += &format!("; {} failed attempt(s), retries included", o.errors);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_losses_per_priority() {
        let o = OutputStats {
            name: "http".into(),
            sent: ByPriority([0, 0, 3, 0, 10, 0, 0, 0]),
            shed: ByPriority([0, 0, 0, 0, 5, 2, 0, 0]),
            failed: ByPriority([0, 0, 1, 0, 0, 0, 0, 0]),
            notices: 1,
            errors: 9,
            queued: 0,
            queued_bytes: 0,
            peak_bytes: 0,
        };
        assert_eq!(
            summary(&o),
            "harrier: output http: 13 sent, 8 lost; shed from a full queue: Warning 5, Notice 2; \
             failed: Critical 1; 1 loss notice(s) in its stream; 9 failed attempt(s), retries included"
        );
    }
}
