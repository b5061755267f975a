//! Every top-level key of Falco 0.44.1's falco.yaml (and `rules`, which Falco reads though its
//! default file leaves it out), with what Harrier does with it. docs/falco-config.md is this
//! table; a test keeps the two, and the shipped falco.yaml, in step.

/// What Harrier does with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Falco's meaning.
    Honoured,
    /// Falco's meaning for the part named; the rest as said.
    Partly,
    /// Read and accepted; it changes nothing here, for the reason given.
    NoEffect,
}

pub struct Key {
    pub name: &'static str,
    pub used: Use,
    pub what: &'static str,
}

const fn k(name: &'static str, used: Use, what: &'static str) -> Key {
    Key { name, used, what }
}

use Use::*;

pub const KEYS: &[Key] = &[
    k("config_files", Honoured, "files and folders merged after the main file with Falco's strategies (append, override, add-only); missing paths skipped; no nesting"),
    k("watch_config_files", Honoured, "a change to a config or rules file (polled each second) reloads as SIGHUP does, without detaching: the configuration is read again, what shapes the rules (rules_files, rules, priority, rule_matching, append_output) applies in place, and any other key that changed is named as applied at the next start; a broken edit keeps the running configuration and rules and says why"),
    k("rules_files", Honoured, "files and folders of *.yaml/*.yml in order; with `falco`, missing paths are skipped as Falco skips them"),
    k("rules", Honoured, "enable/disable entries by rule name (wildcards) or tag, applied in order after loading (`-o rules[].disable.rule=*`)"),
    k("engine", Partly, "kind modern_ebpf, ebpf, kmod: Harrier's live eBPF sensor, buf_size_preset as its ring size per CPU; replay: engine.replay.capture_file (legacy .scap or Harrier capture); nodriver: no syscall source (rules loaded, outputs, webserver and metrics snapshots up, until -M or a signal); gvisor is refused; cpus_for_each_buffer and drop_failed_exit are not read"),
    k("capture", Honoured, "live runs: from an alert of a rule with `capture: true` (mode rules) or of any rule (all_rules), the events for `capture_duration` (else default_duration) ms go to `<path_prefix>_<ns>_<event>.hrcap`, a Harrier capture file (`harrier read`, replay); every parameter is collected while capture is on; the kernel filter still applies"),
    k("load_plugins", Honoured, "the plugins to load, in order (crates/harrier-plugin hosts Falco's plugin API 3.12 unmodified: k8saudit, cloudtrail, json...); `container` is Harrier's own container engine, no library loaded"),
    k("plugins", Honoured, "name, library_path (relative: under /usr/share/falco/plugins), init_config (a mapping is passed as JSON; empty is \"{}\" for a plugin with a schema), open_params; each plugin source runs on a thread of its own with its own plugin states and rules; state tables, async events and event parsing are not offered"),
    k("plugins_hostinfo", NoEffect, "host info is offered through state tables, which Harrier's plugin host does not offer"),
    k("priority", Honoured, "rules less severe are not evaluated"),
    k("json_output", Honoured, "alerts as Falco's JSON"),
    k("json_include_output_property", Honoured, ""),
    k("json_include_message_property", Honoured, "`message`: the output without the time and priority"),
    k("json_include_output_fields_property", Honoured, ""),
    k("json_include_tags_property", Honoured, ""),
    k("time_format_iso_8601", Honoured, "text lines start with the ISO 8601 time; output_fields carry evt.time.iso8601"),
    k("buffer_format_base64", NoEffect, "no rule output of Harrier's renders data buffers yet"),
    k("buffered_outputs", NoEffect, "each output's lane writes whole batches as they come; lines are never held back"),
    k("rule_matching", Honoured, "first or all"),
    k("outputs_queue", Honoured, "capacity; Harrier adds max_bytes and keep_priority"),
    k("append_output", Honoured, "match (source, tags, rule), extra_output, extra_fields, suggested_output"),
    k("stdout_output", Honoured, ""),
    k("syslog_output", Honoured, "to /dev/log as `falco: <line>`, the priority as the syslog level"),
    k("file_output", Partly, "filename; the file is kept open (keep_alive's true)"),
    k("http_output", Honoured, "url (http:// or https://, rustls), user_agent, insecure, ca_cert, else ca_bundle, else ca_path (a folder of PEM files), mtls with client_cert and client_key, echo (answers to stdout), max_consecutive_timeouts (an alert fails after that many timeouts in a row); compress_uploads gzips the body (Content-Encoding: gzip; Falco's libcurl only asks for compressed answers); keep_alive reuses connections, false opens one per alert (Falco's libcurl reuses them either way and sets TCP keep-alive); one JSON alert per POST, 4 in flight, retried while the receiver is down"),
    k("program_output", Honoured, "each line to the program's standard input through `sh -c`"),
    k("webserver", Partly, "listen_address, listen_port, k8s_healthz_endpoint (`{\"status\": \"ok\"}`), ssl_enabled with ssl_certificate (one PEM file: key and certificate; https with rustls); every other path serves the Prometheus metrics, whatever prometheus_metrics_enabled says; no /versions; threadiness not read (one thread)"),
    k("log_stderr", NoEffect, "Harrier's own messages always go to stderr"),
    k("log_syslog", NoEffect, "Harrier's own messages are not sent to syslog"),
    k("log_level", NoEffect, "Harrier prints its notices and errors whatever the level"),
    k("libs_logger", NoEffect, "there are no Falco libs in Harrier"),
    k("output_timeout", NoEffect, "outputs run on lanes of their own and never block the rules"),
    k("syscall_event_timeouts", NoEffect, "Harrier's rings are polled on a timer; a quiet machine is not an error"),
    k("syscall_event_drops", Honoured, "once a second: drops over events against threshold; actions log, alert (\"Falco internal: syscall event drop\"), exit, ignore, limited by rate and max_burst; simulate_drops; Falco's closing lines on stderr"),
    k("metrics", Partly, "enabled, interval (Prometheus durations or ms; at least 100 ms), output_rule (\"Falco internal: metrics snapshot\", Informational, source internal, when priority lets Informational through), output_file (one JSON line per snapshot: sample, output_fields); Falco's names where Harrier has the figure: falco.version, start_ts, duration_sec, kernel_release, host_num_cpus, num_evts, evts_rate_sec, outputs_queue_num_drops, cpu_usage_perc, memory_rss/vsz (mb or kb: convert_memory_to_mb), rules.matches_total and falco.rules.<rule> (rules_counters_enabled, include_empty_values), scap.n_evts, n_drops, rates and n_drops_perc (kernel_event_counters_enabled); state, libbpf, plugins, jemalloc and per-CPU counters are not given; Prometheus is always served on the webserver"),
    k("base_syscalls", NoEffect, "Harrier captures the syscalls its rules and state tables need"),
    k("falco_libs", NoEffect, "snaplen and thread table sizes belong to Falco's libs"),
];

/// Falco keys that need no reading beyond being known (see [`KEYS`]).
pub fn accepted(name: &str) -> bool {
    KEYS.iter().any(|k| k.name == name)
}

/// docs/falco-config.md's table.
pub fn markdown() -> String {
    let mut s = String::from("| key | used | what Harrier does |\n|---|---|---|\n");
    for k in KEYS {
        let used = match k.used {
            Honoured => "yes",
            Partly => "partly",
            NoEffect => "no effect",
        };
        s += &format!("| `{}` | {used} | {} |\n", k.name, k.what);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(path: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
    }

    #[test]
    fn every_key_of_falcos_default_file_is_known_and_documented() {
        let doc = std::fs::read_to_string(repo("docs/falco-config.md")).unwrap();
        assert!(
            doc.contains(&markdown()),
            "docs/falco-config.md's table differs from keys.rs:\n{}",
            markdown()
        );
        // Above the checkout, else where the project's machines keep it.
        let falco = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .chain([std::path::Path::new("/work")])
            .map(|d| d.join("shared/data/falco-config/falco-0.44.1.yaml"))
            .find(|p| p.exists());
        let Some(text) = falco.map(|f| std::fs::read_to_string(f).unwrap()) else {
            assert!(std::env::var("CI").is_err(), "shared/data/falco-config/falco-0.44.1.yaml is missing");
            return;
        };
        let top: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once(':').map(|(k, _)| k))
            .filter(|k| {
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            })
            .collect();
        assert_eq!(top.len(), 36, "{top:?}");
        for key in top {
            assert!(accepted(key), "Falco's key '{key}' is not in keys.rs");
        }
    }
}
