//! The default rules against real behaviour: each test performs the action
//! a rule is about under a live sensor and asserts the alert (or its absence
//! for trusted programs). Alerts are picked by a name or path unique to the
//! test, so other activity on the machine cannot make a test pass or fail.

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_capture::Stats;
use harrier_outputs::Alert;
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Runs `work` under a live sensor with the default rules; returns every alert.
fn alerts_during(work: impl FnOnce()) -> Vec<Alert> {
    run_default(work).0
}

/// As `harrier run` does: the default rules, and the kernel filter they imply.
fn run_default(work: impl FnOnce()) -> (Vec<Alert>, Stats) {
    let opts = LoadOptions { supported: Arc::new(harrier_engine::source::supported), ..Default::default() };
    let rules = RuleSet::load(&[("harrier_rules.yaml", harrier_rules::DEFAULT_RULES)], &opts).unwrap();
    run_live(rules, RuleMatching::First, true, |_| work())
}

/// A scratch directory (removed on drop) and renamed tools: shared with the
/// benchmark's action generator (harrier-actions).
struct Scratch(harrier_actions::kit::Scratch);
impl Scratch {
    fn new(tag: &str) -> Scratch {
        Scratch(harrier_actions::kit::Scratch::new(tag).unwrap())
    }
    fn under(parent: &str, tag: &str) -> Scratch {
        Scratch(harrier_actions::kit::Scratch::under(parent, tag).unwrap())
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn tool(&self, bin: &str, name: &str) -> PathBuf {
        self.0.tool(bin, name).unwrap()
    }
}

fn run(prog: &Path, args: &[&str]) {
    harrier_actions::kit::run(prog, args).unwrap();
}

#[test]
fn reading_shadow_alerts_for_an_untrusted_program_only() {
    if !bpf_available() {
        return;
    }
    let dir = Scratch::new("shadow");
    let untrusted = dir.tool("/bin/cat", "hrcat-untrusted");
    let trusted_dir = Scratch::new("shadow-trusted");
    let trusted = trusted_dir.tool("/bin/cat", "passwd");
    let alerts = alerts_during(|| {
        run(&untrusted, &["/etc/shadow"]);
        run(&trusted, &["/etc/shadow"]);
    });
    let hit = by(&alerts, "Read sensitive file untrusted", "proc.name", "hrcat-untrusted");
    assert_eq!(hit.len(), 1, "{alerts:#?}");
    assert_eq!(hit[0].priority, "Warning");
    assert_eq!(field(hit[0], "fd.name"), "/etc/shadow");
    assert_eq!(field(hit[0], "proc.exepath"), untrusted.to_str().unwrap());
    let parent = std::fs::read_to_string("/proc/self/comm").unwrap();
    assert_eq!(field(hit[0], "proc.pname"), parent.trim(), "the test process is the parent");
    assert!(
        by(&alerts, "Read sensitive file untrusted", "proc.name", "passwd").is_empty(),
        "account tools are trusted"
    );
}

#[test]
fn opens_no_rule_can_use_stay_in_the_kernel() {
    if !bpf_available() {
        return;
    }
    let dir = Scratch::new("kfilter");
    let untrusted = dir.tool("/bin/cat", "hrcat-kfilter");
    let (alerts, stats) = run_default(|| {
        for _ in 0..20 {
            run(&untrusted, &["/etc/hostname", "/nonexistent/harrier"]);
        }
        run(&untrusted, &["/etc/shadow"]);
    });
    // 20 reads of a file no rule watches and 20 failed opens, at least.
    assert!(stats.kernel_total().filtered >= 40, "filtered: {}", stats.kernel_total().filtered);
    let hit = by(&alerts, "Read sensitive file untrusted", "proc.name", "hrcat-kfilter");
    assert_eq!(hit.len(), 1, "the watched read still reaches the rules: {alerts:#?}");
}

#[test]
fn a_file_created_below_a_binary_dir_alerts() {
    if !bpf_available() {
        return;
    }
    let dir = Scratch::new("bindir");
    let touch = dir.tool("/usr/bin/touch", "hrtouch");
    let target = format!("/usr/local/bin/harrier-live-{}", std::process::id());
    let alerts = alerts_during(|| {
        run(&touch, &[&target]);
        std::fs::remove_file(&target).unwrap();
    });
    let hit = by(&alerts, "Write below binary dir", "fd.name", &target);
    assert_eq!(hit.len(), 1, "{alerts:#?}");
    assert_eq!((hit[0].priority, field(hit[0], "proc.name")), ("Error", "hrtouch"));
}

#[test]
fn a_shell_under_a_server_process_alerts() {
    if !bpf_available() {
        return;
    }
    let dir = Scratch::new("webshell");
    let server = dir.tool("/bin/dash", "nginx");
    let alerts = alerts_during(|| run(&server, &["-c", "/bin/sh -c true"]));
    let hit: Vec<_> = by(&alerts, "Run shell untrusted", "proc.pname", "nginx");
    assert!(!hit.is_empty(), "{alerts:#?}");
    assert_eq!(hit[0].priority, "Notice");
}

#[test]
fn ptrace_attach_and_traceme_alert() {
    if !bpf_available() {
        return;
    }
    let alerts = alerts_during(|| {
        harrier_actions::behaviour::ptrace_traceme().unwrap();
        harrier_actions::behaviour::ptrace_attach().unwrap();
    });
    let exe = std::env::current_exe().unwrap().display().to_string();
    let mine = |rule: &str, request: &str| {
        alerts
            .iter()
            .filter(|a| {
                a.rule == rule && field(a, "proc.exepath") == exe && field(a, "evt.arg.request") == request
            })
            .count()
    };
    assert_eq!(mine("PTRACE attached to process", "PTRACE_ATTACH"), 1, "{alerts:#?}");
    assert_eq!(mine("PTRACE anti-debug attempt", "PTRACE_TRACEME"), 1, "{alerts:#?}");
}

#[test]
fn running_from_dev_shm_alerts() {
    if !bpf_available() {
        return;
    }
    let path = format!("/dev/shm/hr-true-{}", std::process::id());
    std::fs::copy("/bin/true", &path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let alerts = alerts_during(|| run(Path::new(&path), &[]));
    std::fs::remove_file(&path).unwrap();
    let hit = by(&alerts, "Execution from /dev/shm", "proc.exepath", &path);
    assert_eq!(hit.len(), 1, "{alerts:#?}");
}

#[test]
fn truncating_a_log_alerts_unless_a_rotator_does_it() {
    if !bpf_available() {
        return;
    }
    let log = format!("/var/log/harrier-live-{}.log", std::process::id());
    std::fs::write(&log, "line\n").unwrap();
    // A shell's `: > file` opens with O_TRUNC.
    let dir = Scratch::new("logs");
    let truncate = dir.tool("/bin/dash", "hrtruncate");
    let rotator_dir = Scratch::new("logs-rot");
    let rotator = rotator_dir.tool("/bin/dash", "logrotate");
    let alerts = alerts_during(|| {
        run(&truncate, &["-c", &format!(": > {log}")]);
        run(&rotator, &["-c", &format!(": > {log}")]);
    });
    std::fs::remove_file(&log).unwrap();
    let hits: Vec<_> =
        alerts.iter().filter(|a| a.rule == "Clear Log Activities" && a.output.contains(&log)).collect();
    assert_eq!(hits.len(), 1, "only the non-rotator: {alerts:#?}");
    assert_eq!(field(hits[0], "proc.name"), "hrtruncate");
}

#[test]
fn links_to_credential_files_alert() {
    if !bpf_available() {
        return;
    }
    // A symlink to /etc/shadow, and a hard link to a file inside a sensitive
    // directory (/etc/pam.d): linking /etc/shadow itself fails across the
    // overlays of the kernel-matrix guest, and needs no test of its own.
    let dir = Scratch::under("/etc/pam.d", "links");
    let sym = dir.path().join("shadow-sym");
    let pam = dir.path().join("pam-file");
    std::fs::write(&pam, "# test\n").unwrap();
    let hard = dir.path().join("pam-hard");
    let alerts = alerts_during(|| {
        harrier_actions::behaviour::symlink("/etc/shadow", &sym).unwrap();
        harrier_actions::behaviour::hard_link(&pam, &hard).unwrap();
    });
    let mine = |rule: &str| {
        alerts.iter().filter(|a| a.rule == rule && a.output.contains(dir.path().to_str().unwrap())).count()
    };
    assert_eq!(mine("Create Symlink Over Sensitive Files"), 1, "{alerts:#?}");
    assert_eq!(mine("Create Hardlink Over Sensitive Files"), 1, "{alerts:#?}");
}
