//! Alert-producing actions, named as Falco's event-generator names them: the
//! rule name with non-alphanumerics removed ([`crate::normalise`]). Each
//! runs one behaviour that one rule of Falco's stable set or Harrier's
//! default set alerts on once. Cheap ones run in this process, as
//! event-generator's do; the ones about a program's name or parent exec a
//! renamed copy of /bin/true, /bin/cat or /bin/dash.

use crate::behaviour as b;
use crate::kit::{copy_executable, run, Scratch};
use anyhow::Result;
use std::cell::Cell;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// What the actions need, made once: renamed binaries, scratch directories
/// (one in /etc, for hard links to /etc/pam.conf), a log file, a memfd.
pub struct Kit {
    dir: Scratch,
    etc: Scratch,
    /// What the hard links point at (see `link_source`).
    hard_src: PathBuf,
    /// Holds `hard_src` when it is a file of ours under /etc/pam.d.
    pam: Option<Scratch>,
    nginx: PathBuf,
    find: PathBuf,
    shred: PathBuf,
    cat: PathBuf,
    shm_true: PathBuf,
    log: PathBuf,
    bin_file: PathBuf,
    memfd: OwnedFd,
    seq: Cell<u64>,
}

impl Kit {
    pub fn new() -> Result<Kit> {
        let dir = Scratch::new("actions")?;
        let etc = Scratch::under("/etc", "actions")?;
        let pid = std::process::id();
        let shm_true = copy_executable("/bin/true", Path::new(&format!("/dev/shm/harrier-true-{pid}")))?;
        let log = PathBuf::from(format!("/var/log/harrier-actions-{pid}.log"));
        std::fs::write(&log, "line\n")?;
        let (hard_src, pam) = link_source(&etc)?;
        Ok(Kit {
            hard_src,
            pam,
            nginx: dir.tool("/bin/dash", "nginx")?,
            find: dir.tool("/bin/true", "find")?,
            shred: dir.tool("/bin/true", "shred")?,
            cat: dir.tool("/bin/cat", "hrcat")?,
            bin_file: PathBuf::from(format!("/usr/local/bin/.harrier-actions-{pid}")),
            memfd: b::memfd_copy("/bin/true")?,
            dir,
            etc,
            shm_true,
            log,
            seq: Cell::new(0),
        })
    }

    /// A fresh name in `dir` (links must not exist yet).
    fn fresh(&self, dir: &Path, tag: &str) -> PathBuf {
        let n = self.seq.get() + 1;
        self.seq.set(n);
        dir.join(format!("{tag}-{n}"))
    }
}

/// /etc/pam.conf, which Falco's and Harrier's rules both count as sensitive,
/// when it can be hard-linked here; else (the kernel-matrix guest's /etc is
/// an overlay that refuses) a file of ours in /etc/pam.d, which Harrier's
/// rules cover and Falco's stable rules do not.
fn link_source(etc: &Scratch) -> Result<(PathBuf, Option<Scratch>)> {
    let pam_conf = PathBuf::from("/etc/pam.conf");
    let probe = etc.path().join("probe");
    if b::hard_link(&pam_conf, &probe).is_ok() {
        std::fs::remove_file(&probe)?;
        return Ok((pam_conf, None));
    }
    let dir = Scratch::under("/etc/pam.d", "actions")?;
    let file = dir.path().join("pam-file");
    std::fs::write(&file, "# harrier actions\n")?;
    Ok((file, Some(dir)))
}

impl Drop for Kit {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.shm_true);
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_file(&self.bin_file);
    }
}

pub struct Action {
    /// event-generator's name: the rule name, letters and digits only.
    pub name: &'static str,
    pub run: fn(&Kit) -> Result<()>,
    /// Why it is left out unless asked for (event-generator's disabled actions).
    pub disabled: Option<&'static str>,
}

fn read_sensitive_file_untrusted(_: &Kit) -> Result<()> {
    b::open_read("/etc/shadow")
}

fn directory_traversal(k: &Kit) -> Result<()> {
    // In a child: the rule spares programs whose parent is a shell, which
    // this process's parent may well be.
    run(&k.cat, &["/etc/../etc/../etc/hostname"])
}

fn write_below_binary_dir(k: &Kit) -> Result<()> {
    b::create_and_remove(&k.bin_file)
}

fn change_thread_namespace(_: &Kit) -> Result<()> {
    b::setns_own_uts()
}

fn run_shell_untrusted(k: &Kit) -> Result<()> {
    run(&k.nginx, &["-c", "/bin/sh -c true"])
}

fn ptrace_attached(_: &Kit) -> Result<()> {
    b::ptrace_attach()
}

fn ptrace_anti_debug(_: &Kit) -> Result<()> {
    b::ptrace_traceme()
}

fn execution_from_dev_shm(k: &Kit) -> Result<()> {
    run(&k.shm_true, &[])
}

fn fileless_execution(k: &Kit) -> Result<()> {
    b::exec_memfd(&k.memfd, &[])
}

fn clear_log_activities(k: &Kit) -> Result<()> {
    b::truncate(&k.log)
}

fn symlink_over_sensitive(k: &Kit) -> Result<()> {
    let link = k.fresh(k.dir.path(), "shadow-sym");
    b::symlink("/etc/shadow", &link)?;
    Ok(std::fs::remove_file(&link)?)
}

fn hardlink_over_sensitive(k: &Kit) -> Result<()> {
    // Beside the source: a hard link cannot cross file systems.
    let link = k.fresh(k.pam.as_ref().unwrap_or(&k.etc).path(), "pam-hard");
    b::hard_link(&k.hard_src, &link)?;
    Ok(std::fs::remove_file(&link)?)
}

fn search_private_keys(k: &Kit) -> Result<()> {
    run(&k.find, &["/nonexistent-harrier", "-name", "id_rsa"])
}

fn find_aws_credentials(k: &Kit) -> Result<()> {
    run(&k.find, &["/nonexistent-harrier/.aws/credentials"])
}

fn remove_bulk_data(k: &Kit) -> Result<()> {
    run(&k.shred, &["/nonexistent-harrier"])
}

/// Every action; [`select`] keeps those whose rule is loaded.
pub const ACTIONS: &[Action] = &[
    Action { name: "ReadSensitiveFileUntrusted", run: read_sensitive_file_untrusted, disabled: None },
    Action {
        name: "DirectoryTraversalMonitoredFileRead",
        run: directory_traversal,
        disabled: Some("harrier's fd.nameraw is the resolved name, so '../' never matches"),
    },
    Action { name: "WriteBelowBinaryDir", run: write_below_binary_dir, disabled: None },
    Action { name: "ChangeThreadNamespace", run: change_thread_namespace, disabled: None },
    Action { name: "RunShellUntrusted", run: run_shell_untrusted, disabled: None },
    Action { name: "PTRACEAttachedToProcess", run: ptrace_attached, disabled: None },
    Action { name: "PTRACEAntiDebugAttempt", run: ptrace_anti_debug, disabled: None },
    Action { name: "ExecutionFromDevShm", run: execution_from_dev_shm, disabled: None },
    Action { name: "FilelessExecutionViaMemfdCreate", run: fileless_execution, disabled: None },
    Action { name: "ClearLogActivities", run: clear_log_activities, disabled: None },
    Action { name: "CreateSymlinkOverSensitiveFiles", run: symlink_over_sensitive, disabled: None },
    Action { name: "CreateHardlinkOverSensitiveFiles", run: hardlink_over_sensitive, disabled: None },
    Action { name: "SearchPrivateKeysOrPasswords", run: search_private_keys, disabled: None },
    Action { name: "FindAWSCredentials", run: find_aws_credentials, disabled: None },
    Action { name: "RemoveBulkDataFromDisk", run: remove_bulk_data, disabled: None },
];

/// The actions whose rule is among `rules` (names as loaded), in table
/// order; disabled ones only with `all`.
pub fn select<'a>(rules: impl IntoIterator<Item = &'a str>, all: bool) -> Vec<&'static Action> {
    let loaded: Vec<String> = rules.into_iter().map(crate::normalise).collect();
    ACTIONS
        .iter()
        .filter(|a| all || a.disabled.is_none())
        .filter(|a| loaded.iter().any(|r| r.eq_ignore_ascii_case(a.name)))
        .collect()
}
