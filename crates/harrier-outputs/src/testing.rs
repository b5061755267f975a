//! Alerts shaped as Falco's stable rules raise them, for the tests and
//! `harrier-bench outputs`: their size is what a queue's byte limit meets.

use crate::alert::Alert;
use serde_json::{Map, Value};
use std::sync::Arc;

/// The rule a Critical alert here is from (a binary run from a memfd).
pub const CRITICAL_RULE: &str = "Fileless execution via memfd_create";
/// The rule every other alert here is from (a read of /etc/shadow).
pub const RULE: &str = "Read sensitive file untrusted";

/// Alert number `seq` (in proc.pid; its event time is `seq` µs after a fixed
/// start), with "Read sensitive file untrusted"'s output and fields and tags,
/// at `priority`; a Critical is "Fileless execution via memfd_create".
pub fn falco_sized(seq: u64, priority: &'static str) -> Arc<Alert> {
    let mut f = Map::with_capacity(14);
    let s = |v: &str| Value::String(v.to_string());
    f.insert("evt.type".into(), s("openat"));
    f.insert("fd.name".into(), s("/etc/shadow"));
    f.insert("proc.aname[2]".into(), s("bash"));
    f.insert("proc.aname[3]".into(), s("sshd"));
    f.insert("proc.aname[4]".into(), s("systemd"));
    f.insert("proc.cmdline".into(), s("harrier-bench outputs-case --count 200000"));
    f.insert("proc.exepath".into(), s("/usr/local/bin/harrier-bench"));
    f.insert("proc.name".into(), s("harrier-bench"));
    f.insert("proc.pid".into(), seq.into());
    f.insert("proc.pname".into(), s("bash"));
    f.insert("proc.tty".into(), 34816.into());
    f.insert("user.loginuid".into(), 0.into());
    f.insert("user.name".into(), s("root"));
    f.insert("user.uid".into(), 0.into());
    let mut output = format!(
        "Sensitive file opened for reading by non-trusted program | file=/etc/shadow gparent=bash \
         ggparent=sshd gggparent=systemd evt_type=openat user=root user_uid=0 user_loginuid=0 \
         process=harrier-bench proc_exepath=/usr/local/bin/harrier-bench parent=bash \
         command=harrier-bench outputs-case --count 200000 pid={seq} terminal=34816"
    );
    output.shrink_to_fit(); // as the engine keeps it
    let rule = if priority == "Critical" { CRITICAL_RULE } else { RULE };
    Arc::new(Alert {
        time_ns: 1_795_392_538_000_000_000 + seq * 1000,
        rule: rule.into(),
        priority,
        output,
        output_fields: f,
        tags: ["maturity_stable", "host", "container", "filesystem", "mitre_credential_access", "T1555"]
            .map(String::from)
            .to_vec(),
        source: "syscall".into(),
        hostname: "host".into(),
        uuid: crate::new_uuid(),
    })
}

/// The number [`falco_sized`] put in proc.pid (u64::MAX for other alerts).
pub fn seq(a: &Alert) -> u64 {
    a.output_fields.get("proc.pid").and_then(Value::as_u64).unwrap_or(u64::MAX)
}
