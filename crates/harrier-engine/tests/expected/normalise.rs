//! What differs from run to run in an alert of the battery, and so is not
//! compared as a value: every such rule is here, named, with why. Both the
//! recorded (Falco's) alerts and Harrier's pass through the same rules, each
//! with its own run's facts (the pid of the process running the battery...).

use serde_json::Value;

/// What a run's normalisation needs to know of that run.
pub struct Run {
    /// The process that runs the battery (harrier-bench when recorded, this test here).
    pub pid: u64,
    /// The name of its session leader (proc.sname of its children).
    pub session: String,
    /// Its working directory as Falco renders proc.cwd (a trailing `/`).
    pub cwd: String,
    /// The machine's /usr is an overlay (the test guests'): binaries in it run
    /// from a lower layer.
    pub usr_overlay: bool,
    /// The machine's cgroups are v2 (the test guests'): runc loads a BPF device
    /// filter for each container.
    pub cgroup2: bool,
    /// Its proc.name, proc.exepath and proc.cmdline values (one per thread that
    /// raised an alert), as its own alerts show them (learned: [`Run::learn`]).
    pub own: Vec<(String, Value)>,
}

impl Run {
    /// An alert of this machine the recording one could not have raised, and why.
    pub fn only_here(&self, rule: &str, fields: &serde_json::Map<String, Value>) -> Option<&'static str> {
        let name = fields.get("proc.name").and_then(|v| v.as_str());
        (self.cgroup2 && rule == "BPF Program Not Profiled" && name == Some("runc"))
            .then_some("runc's BPF device filter (cgroup v2 only)")
    }

    /// Learns the runner's own process fields from an alert it raised itself.
    pub fn learn<'a>(&mut self, alerts: impl IntoIterator<Item = &'a serde_json::Map<String, Value>>) {
        for f in alerts {
            if Lineage::of(f, self).runner_level == Some(0) {
                for k in ["proc.name", "proc.exepath", "proc.cmdline"] {
                    // Each thread has a name of its own: every one seen is the runner's.
                    if let Some(v) = f.get(k).filter(|v| !self.own.iter().any(|(o, ov)| o == k && ov == *v)) {
                        self.own.push((k.to_string(), v.clone()));
                    }
                }
            }
        }
    }
}

/// One normalisation: its name, why the value varies, and what it does to a
/// field's value (given the alert's fields and the run).
pub struct Rule {
    pub name: &'static str,
    pub why: &'static str,
    apply: fn(&Run, &Lineage, &str, Value) -> Value,
}

/// Behaviours that retry until a listener answers (nc in a loop) raise an
/// alert per try, and how many tries it takes varies: an alert equal in every
/// normalised field to a matched one of the same rule and behaviour is a repeat.
pub const REPEATS: &str = "repeat (a behaviour's retries)";

/// An alert's other fields, for rules that depend on them.
pub struct Lineage {
    /// 0: the alerting process is the runner, 1: its child...; None: not ours.
    pub runner_level: Option<usize>,
    /// proc.exepath of the alerting process.
    exepath: String,
    /// Not in a container (whose processes have sessions of their own).
    on_host: bool,
}

/// Every normalisation, applied in this order.
pub const RULES: &[Rule] = &[
    Rule {
        name: "runner",
        why: "fields of the process running the battery and of its ancestors are harrier-bench's and its shell's when recorded, this test's and cargo's here",
        apply: runner,
    },
    Rule {
        name: "runner-copy",
        why: "a child the runner forked that did not exec has the runner's name, exe and command line",
        apply: |r, _, f, v| if r.own.iter().any(|(k, o)| k == f && *o == v) { "<runner>".into() } else { v },
    },
    Rule {
        name: "fexecve",
        why: "a program run from a memfd through /proc/self/fd/N is named N, the fd's number in the runner",
        apply: |_, l, f, v| match v.as_str() {
            Some(s) if (f == "proc.name" || f == "proc.cmdline")
                && l.exepath.starts_with("memfd:")
                && !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_digit()) =>
            {
                "<fd number>".into()
            }
            _ => v,
        },
    },
    Rule {
        name: "runner-session",
        why: "proc.sname of the runner's children on the host is the runner's session leader (bash when recorded)",
        apply: |r, l, f, v| {
            if f == "proc.sname" && l.on_host && v == r.session.as_str() {
                "<runner session>".into()
            } else {
                v
            }
        },
    },
    Rule {
        name: "runner-cwd",
        why: "children inherit the runner's working directory",
        apply: |r, _, f, v| if f == "proc.cwd" && v == r.cwd.as_str() { "<runner cwd>".into() } else { v },
    },
    Rule {
        name: "env",
        why: "proc.env is the runner's environment (the recording machine's) plus the battery's variables: only those are compared",
        apply: env,
    },
    Rule {
        name: "time",
        why: "times and durations of a run (the harness compares them within a slack); present or null is still compared",
        apply: |_, _, f, v| if is_time(f) && v.is_number() { "<time>".into() } else { v },
    },
    Rule {
        name: "tty",
        why: "a pseudo-terminal's number is whichever was free",
        apply: |_, _, f, v| if f == "proc.tty" && v.as_u64().is_some_and(|t| t != 0) { "<tty>".into() } else { v },
    },
    Rule {
        name: "overlay-usr",
        why: "where /usr is an overlay (the test guests, not the recording host) its binaries run from a lower layer: EXE_LOWER_LAYER",
        apply: |r, _, f, v| match v.as_str() {
            Some(s) if r.usr_overlay && f == "evt.arg.flags" && s.contains("EXE_LOWER_LAYER") => {
                let kept: Vec<&str> = s.split('|').filter(|t| *t != "EXE_LOWER_LAYER").collect();
                if kept.is_empty() { "0".into() } else { kept.join("|").into() }
            }
            _ => v,
        },
    },
    Rule { name: "ephemeral-port", why: "the kernel picks a client's port (32768 and up)", apply: ports },
    Rule {
        name: "pid",
        why: "scratch paths, files, users and containers the battery makes carry the runner's pid (users its last five digits, container ids its hex, a 15-character process name its first digits)",
        apply: pids,
    },
];

impl Lineage {
    pub fn of(fields: &serde_json::Map<String, Value>, run: &Run) -> Lineage {
        let runner_level = harrier_actions::battery::LINEAGE_FIELDS
            .iter()
            .map(|k| fields.get(*k).and_then(|v| v.as_u64()))
            .position(|p| p == Some(run.pid));
        let exepath = fields.get("proc.exepath").and_then(|v| v.as_str()).unwrap_or("").to_string();
        let on_host = fields.get("container.id").and_then(|v| v.as_str()).is_none_or(|id| id == "host");
        Lineage { runner_level, exepath, on_host }
    }
}

/// Every field of `fields` (lineage fields dropped) through every rule.
pub fn normalise(run: &Run, fields: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    let lineage = Lineage::of(fields, run);
    fields
        .iter()
        .filter(|(k, _)| !harrier_actions::battery::LINEAGE_FIELDS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), RULES.iter().fold(v.clone(), |v, r| (r.apply)(run, &lineage, k, v))))
        .collect()
}

/// Which process of the lineage a field describes: 0 the alerting process,
/// 1 its parent, k its k-th ancestor; None for fields of no process.
fn level(field: &str) -> Option<usize> {
    const PARENT: [&str; 6] =
        ["proc.pname", "proc.pexe", "proc.pexepath", "proc.pcmdline", "proc.ppid.ts", "proc.ppid.duration"];
    if PARENT.contains(&field) {
        return Some(1);
    }
    if let Some(rest) = field.strip_prefix("proc.a") {
        let k = rest.split_once('[').and_then(|(_, n)| n.trim_end_matches(']').parse().ok());
        return k.or(Some(1));
    }
    // The session leader is no level of the lineage (runner-session).
    (field.starts_with("proc.") && field != "proc.sname").then_some(0)
}

fn runner(_: &Run, l: &Lineage, field: &str, v: Value) -> Value {
    match (level(field), l.runner_level) {
        (Some(k), Some(r)) if k == r => "<runner>".into(),
        (Some(k), Some(r)) if k > r => "<above the runner>".into(),
        _ => v,
    }
}

fn env(_: &Run, _: &Lineage, field: &str, v: Value) -> Value {
    let Some(s) = v.as_str().filter(|_| field == "proc.env") else { return v };
    let set = harrier_actions::battery::ENV_SET;
    let kept: Vec<&str> =
        s.split(' ').filter(|kv| kv.split_once('=').is_some_and(|(k, _)| set.contains(&k))).collect();
    kept.join(" ").into()
}

fn is_time(f: &str) -> bool {
    f == "evt.time"
        || f == "evt.rawtime"
        || f.ends_with(".ts")
        || f.ends_with("_ts")
        || f.contains("duration")
        || f.starts_with("proc.exe_ino.")
}

fn ephemeral(p: u64) -> bool {
    (32768..=65535).contains(&p)
}

fn ports(_: &Run, _: &Lineage, field: &str, v: Value) -> Value {
    if field.starts_with("fd.") && field.ends_with("port") && v.as_u64().is_some_and(ephemeral) {
        return "<ephemeral port>".into();
    }
    let Some(s) = v.as_str().filter(|_| field == "fd.name") else { return v };
    let end = |e: &str| match e.rsplit_once(':') {
        Some((a, p)) if p.parse().is_ok_and(ephemeral) => format!("{a}:<ephemeral port>"),
        _ => e.to_string(),
    };
    s.split("->").map(end).collect::<Vec<_>>().join("->").into()
}

fn pids(r: &Run, _: &Lineage, field: &str, v: Value) -> Value {
    let Some(s) = v.as_str() else { return v };
    let (dec, short, hex) = (r.pid.to_string(), (r.pid % 100_000).to_string(), format!("{:08x}", r.pid));
    // Digit runs equal to the pid (or its last five digits: user names) are replaced whole;
    // not one inside an address (169.254.169.254 when the pid is 254, as in a freshly booted
    // guest; a port: stratum+tcp://127.0.0.1:3333 when it is 3333), where the battery never
    // puts its pid.
    // A process name cut at 15 characters (the kernel's comm) in the pid's digits, in the
    // fields of a process (its name, and command lines that start with it).
    let tail = s.trim_end_matches(|c: char| c.is_ascii_digit());
    if field.starts_with("proc.") && s.len() == 15 && tail.len() < 15 && dec.starts_with(&s[tail.len()..]) {
        return format!("{tail}<pid>").into();
    }
    let mut out = String::new();
    let mut rest = s.replace(&hex, "<runner pid, hex>");
    while let Some(i) = rest.find(|c: char| c.is_ascii_digit()) {
        let n = rest[i..].find(|c: char| !c.is_ascii_digit()).map_or(rest.len(), |j| i + j);
        let run = &rest[i..n];
        out.push_str(&rest[..i]);
        let before = out.strip_suffix('.').is_some_and(|o| o.ends_with(|c: char| c.is_ascii_digit()));
        let after = rest[n..].strip_prefix('.').is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
        // An address's port (127.0.0.1:3333, [::1]:3333) when the pid happens to equal it.
        let port =
            out.strip_suffix(':').is_some_and(|o| o.ends_with(|c: char| c.is_ascii_digit() || c == ']'));
        let in_address = before || after || port;
        out.push_str(if !in_address && (run == dec || run == short) { "<pid>" } else { run });
        rest = rest[n..].to_string();
    }
    out.push_str(&rest);
    out.into()
}

#[test]
fn a_pid_is_replaced_in_the_batterys_names_not_inside_an_address() {
    let run = Run {
        pid: 254,
        session: String::new(),
        cwd: String::new(),
        usr_overlay: false,
        cgroup2: false,
        own: Vec::new(),
    };
    let l = Lineage { runner_level: None, exepath: String::new(), on_host: true };
    assert_eq!(pids(&run, &l, "fd.sip", "169.254.169.254".into()), Value::from("169.254.169.254"));
    let miner = "hrminer -o stratum+tcp://127.0.0.1:254";
    assert_eq!(pids(&run, &l, "proc.cmdline", miner.into()), Value::from(miner), "a port");
    assert_eq!(pids(&run, &l, "fd.name", "[::1]:254->[::1]:80".into()), Value::from("[::1]:254->[::1]:80"));
    let named = pids(&run, &l, "fd.name", "/tmp/.harrier-battery-x-254/f".into());
    assert_eq!(named, Value::from("/tmp/.harrier-battery-x-<pid>/f"));
    let log = pids(&run, &l, "fd.name", "/var/log/harrier-actions-254.log".into());
    assert_eq!(log, Value::from("/var/log/harrier-actions-<pid>.log"));
    let comm = pids(&run, &l, "proc.name", "hrsetuidcopyx25".into());
    assert_eq!(comm, Value::from("hrsetuidcopyx<pid>"), "a name cut at 15 characters");
}
