//! The config both sensors read, and where the workload runs.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Fields appended to every alert of both sensors (Falco's append_output
/// extra_fields): the process and its ancestors' pids, which attribute an
/// alert to the workload's process tree. They are not compared.
pub use harrier_actions::battery::LINEAGE_FIELDS as HARNESS_FIELDS;

/// The given falco.yaml with one more append_output entry (HARNESS_FIELDS),
/// written to `workdir/falco-diff.yaml`.
pub fn derive(config: &Path, workdir: &Path) -> Result<PathBuf> {
    let text = std::fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let entry: String = std::iter::once("  - extra_fields:\n".to_string())
        .chain(HARNESS_FIELDS.iter().map(|f| format!("      - \"{f}\"\n")))
        .collect();
    let mut out = String::new();
    let mut added = false;
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        if !added && line.trim_end() == "append_output:" {
            out.push_str(&entry);
            added = true;
        }
    }
    if !added {
        out.push_str("append_output:\n");
        out.push_str(&entry);
    }
    let p = workdir.join("falco-diff.yaml");
    std::fs::write(&p, out).with_context(|| format!("writing {}", p.display()))?;
    Ok(p)
}

/// This process in the root of every cgroup v1 hierarchy it is not at the
/// root of (this VM puts processes in memory:/process_api/<id>, which Falco's
/// container plugin takes for a containerd container); put back on drop.
pub struct HostCgroups {
    moved: Vec<(PathBuf, String)>,
}

impl HostCgroups {
    pub fn enter() -> Result<HostCgroups> {
        let me = std::process::id().to_string();
        let mut moved = Vec::new();
        let cg = std::fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
        for line in cg.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) =
                (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
            if controllers.is_empty() || path == "/" {
                continue;
            }
            let name = controllers.strip_prefix("name=").unwrap_or(controllers);
            let mount = PathBuf::from("/sys/fs/cgroup").join(name.split(',').next().unwrap_or(name));
            std::fs::write(mount.join("cgroup.procs"), &me)
                .with_context(|| format!("moving this process to the root of {}", mount.display()))?;
            moved.push((mount.join(path.trim_start_matches('/')), me.clone()));
        }
        Ok(HostCgroups { moved })
    }
}

impl Drop for HostCgroups {
    fn drop(&mut self) {
        for (dir, pid) in &self.moved {
            let _ = std::fs::write(dir.join("cgroup.procs"), pid);
        }
    }
}
