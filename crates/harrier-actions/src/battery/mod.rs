//! The battery: one behaviour for each rule of Falco's stable, incubating and
//! sandbox files that can fire on a host or in a runc container here, plus
//! every behaviour of the live rule tests, each made for real (system calls,
//! programs named as the rules expect, containers shaped like docker's,
//! containerd's and cri-o's). `harrier-bench falco-diff` runs it under Falco
//! and `harrier run` at once and compares their alerts.
//!
//! Everything stays on this machine: network behaviours use loopback or a
//! network namespace of their own. Everything made is removed (files,
//! directories, users, containers), also when a behaviour fails.

mod containers;
mod host;
mod runner;
mod tools;

use anyhow::Result;
pub use runner::Runner;
pub use tools::Tools;

/// Fields appended to every alert when the battery runs under a sensor: the
/// process and its ancestors' pids, which attribute an alert to the process
/// running the battery (harrier-bench falco-diff, or the expected-values test).
pub const LINEAGE_FIELDS: [&str; 9] = [
    "proc.pid",
    "proc.ppid",
    "proc.apid[2]",
    "proc.apid[3]",
    "proc.apid[4]",
    "proc.apid[5]",
    "proc.apid[6]",
    "proc.apid[7]",
    "proc.apid[8]",
];

/// The environment variables behaviours set (the rest of a process's proc.env
/// is the environment of whatever runs the battery).
pub const ENV_SET: [&str; 2] = ["HTTP_PROXY", "GLIBC_TUNABLES"];

/// Where a behaviour runs, as the report groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Host,
    /// A runc container shaped like this runtime's (cgroup path, annotations).
    Docker,
    Containerd,
    Crio,
    /// Plain runc (cgroup /<name>).
    Runc,
}

impl Place {
    pub fn name(self) -> &'static str {
        match self {
            Place::Host => "host",
            Place::Docker => "docker",
            Place::Containerd => "containerd",
            Place::Crio => "cri-o",
            Place::Runc => "runc",
        }
    }
}

/// One behaviour: what it does, the rules it is about (Falco's names; empty
/// for a negative: nothing should fire), and where.
pub struct Behaviour {
    pub name: &'static str,
    pub rules: &'static [&'static str],
    pub place: Place,
    pub run: fn(&Tools) -> Result<()>,
}

/// Every behaviour, hosts first.
pub fn all() -> Vec<&'static Behaviour> {
    host::HOST.iter().chain(containers::CONTAINERS.iter()).collect()
}

/// The behaviours whose name contains `filter` (all for None).
pub fn select(filter: Option<&str>) -> Vec<&'static Behaviour> {
    all().into_iter().filter(|b| filter.is_none_or(|f| b.name.contains(f))).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_unique() {
        let all = super::all();
        for (i, b) in all.iter().enumerate() {
            assert!(all[..i].iter().all(|o| o.name != b.name), "{}", b.name);
        }
        assert!(all.len() > 40, "{}", all.len());
    }
}
