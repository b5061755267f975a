//! Behaviours inside a real container: runc (Debian's package) runs an OCI
//! bundle made from busybox-static. The container's script says when its
//! behaviour is done and then waits on stdin, so that the sensor reads the
//! runtime's state while the container still exists. The container's name,
//! cgroup path and annotations are the caller's (shaped like docker's,
//! containerd's or plain runc's), so the sensor's container lookup sees what
//! it would see under those runtimes. Everything runc leaves is removed on
//! drop: the container, the bundle, the cgroup directories that were made.

use anyhow::{ensure, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Every capability this kernel knows (docker's --privileged grants them all)
/// but CAP_SYS_RESOURCE, which this machine's root lacks (runc could not give it):
/// 40 still makes the container privileged as Harrier reads it (at least 38 with
/// CAP_SYS_ADMIN).
pub const ALL_CAPS: [&str; 40] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// A bundle, run once with [`Runc::run`].
pub struct Runc {
    pub name: String,
    pub bundle: PathBuf,
    cgroup: String,
    spec: Value,
    /// cgroup directories (per hierarchy) that did not exist before.
    new_dirs: Vec<PathBuf>,
    child: Option<Child>,
    lines: Option<mpsc::Receiver<String>>,
}

impl Runc {
    /// A bundle whose rootfs holds busybox as /bin/busybox and /bin/sh, to
    /// run `script` with /bin/sh. `annotations` go into config.json (where
    /// containerd and cri-o write the pod's CRI metadata).
    pub fn new(name: &str, cgroup: &str, script: &str, annotations: Value) -> Result<Runc> {
        let bundle = std::env::temp_dir().join(format!("harrier-runc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&bundle);
        let bin = bundle.join("rootfs/bin");
        std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
        for to in ["busybox", "sh"] {
            crate::kit::copy_executable("/bin/busybox", &bin.join(to))
                .context("busybox-static (scripts/deps.sh)")?;
        }
        let st = Command::new("runc")
            .arg("spec")
            .current_dir(&bundle)
            .status()
            .context("running runc spec (runc: scripts/deps.sh)")?;
        ensure!(st.success(), "runc spec failed");
        let path = bundle.join("config.json");
        let mut spec: Value =
            serde_json::from_slice(&std::fs::read(&path)?).context("runc spec's config.json")?;
        spec["process"]["terminal"] = json!(false);
        spec["process"]["args"] = json!(["/bin/sh", "-c", script]);
        // Rlimits fail on these machines (FINDINGS.md).
        if let Some(p) = spec["process"].as_object_mut() {
            p.remove("rlimits");
        }
        spec["linux"]["cgroupsPath"] = json!(cgroup);
        spec["annotations"] = annotations;
        Ok(Runc {
            name: name.into(),
            bundle,
            cgroup: cgroup.into(),
            spec,
            new_dirs: Vec::new(),
            child: None,
            lines: None,
        })
    }

    /// Gives the container's process a terminal (runc makes a pty; runc
    /// itself then needs one, see [`Runc::run`]).
    pub fn terminal(mut self) -> Runc {
        self.spec["process"]["terminal"] = json!(true);
        self
    }

    /// Adds a capability to every set of the container's process.
    pub fn cap(mut self, cap: &str) -> Runc {
        for set in ["bounding", "effective", "permitted"] {
            if let Some(a) = self.spec["process"]["capabilities"][set].as_array_mut() {
                a.push(json!(cap));
            }
        }
        self
    }

    /// Bind-mounts a host path into the container (a volume, as
    /// container.mount* see it), read-only if `ro`.
    pub fn bind(mut self, source: &str, dest: &str, ro: bool) -> Runc {
        let mut options = vec!["rbind", "rprivate"];
        if ro {
            options.push("ro");
        }
        if let Some(m) = self.spec["mounts"].as_array_mut() {
            m.push(json!({"destination": dest, "type": "bind", "source": source, "options": options}));
        }
        self
    }

    /// Starts the container in the background. With a terminal, runc runs
    /// under util-linux's `script`, so that it has one to proxy.
    pub fn start(&mut self) -> Result<()> {
        self.new_dirs = missing_cgroup_dirs(&self.cgroup);
        std::fs::write(self.bundle.join("config.json"), serde_json::to_vec_pretty(&self.spec)?)?;
        let bundle = self.bundle.to_str().context("bundle path")?;
        let mut cmd = if self.spec["process"]["terminal"] == json!(true) {
            let mut c = Command::new("script");
            c.args(["-qec", &format!("runc run --bundle {bundle} {}", self.name), "/dev/null"]);
            c
        } else {
            let mut c = Command::new("runc");
            c.args(["run", "--bundle", bundle, &self.name]);
            c
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("running runc run")?;
        let stdout = child.stdout.take().context("runc's stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        self.child = Some(child);
        self.lines = Some(rx);
        Ok(())
    }

    /// What the container printed up to a line containing `word` (bounded:
    /// a runc that hangs fails with a message instead of stalling the suite).
    pub fn wait_for(&mut self, word: &str) -> Result<String> {
        let rx = self.lines.as_ref().context("not started")?;
        let mut out = String::new();
        loop {
            let line = rx.recv_timeout(Duration::from_secs(120)).map_err(|_| {
                anyhow::anyhow!("runc run {}: no {word:?} within 120 s; got {out:?}", self.name)
            })?;
            out.push_str(&line);
            out.push('\n');
            if line.contains(word) {
                return Ok(out);
            }
        }
    }

    /// Lets a container waiting on its stdin (`busybox head -n 1`) end; waits for it.
    pub fn finish(&mut self) -> Result<()> {
        let mut child = self.child.take().context("not started")?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = writeln!(stdin, "done");
        }
        let st = child.wait()?;
        ensure!(st.success(), "runc run {}: {st}", self.name);
        Ok(())
    }
}

impl Drop for Runc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("runc").args(["kill", &self.name, "KILL"]).stderr(Stdio::null()).status();
            drop(c.stdin.take());
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("runc").args(["delete", "--force", &self.name]).stderr(Stdio::null()).status();
        // Deepest first: runc removes the container's own, not the parents it made.
        for d in self.new_dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
        let _ = std::fs::remove_dir_all(&self.bundle);
    }
}

/// Directories a cgroup path would create under each hierarchy, that are not there yet.
fn missing_cgroup_dirs(cgroup: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let hierarchies = std::fs::read_dir("/sys/fs/cgroup")
        .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default();
    for h in hierarchies.iter().chain(std::iter::once(&PathBuf::from("/sys/fs/cgroup"))) {
        let mut p = h.clone();
        for comp in cgroup.split('/').filter(|c| !c.is_empty()) {
            p = p.join(comp);
            if !p.exists() {
                out.push(p.clone());
            }
        }
    }
    out
}
