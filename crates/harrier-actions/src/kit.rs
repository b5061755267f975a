//! Scratch directories and renamed copies of system binaries: what the
//! behaviours need to look like the programs the rules are about (a shell
//! whose parent is called nginx, a `find` searching for keys...).

use anyhow::{Context, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A scratch directory, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// Under /var/tmp (on the root file system, not a tmpfs the rules may treat apart).
    pub fn new(tag: &str) -> Result<Scratch> {
        Scratch::under("/var/tmp", tag)
    }

    /// In `parent` (e.g. beside a file a hard link must share a file system with).
    pub fn under(parent: &str, tag: &str) -> Result<Scratch> {
        let p = PathBuf::from(format!("{parent}/.harrier-live-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(Scratch(p))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A copy of `bin` named `name` (the process's comm), executable.
    pub fn tool(&self, bin: &str, name: &str) -> Result<PathBuf> {
        copy_executable(bin, &self.0.join(name))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies `bin` to `to` with mode 0755.
pub fn copy_executable(bin: &str, to: &Path) -> Result<PathBuf> {
    std::fs::copy(bin, to).with_context(|| format!("copying {bin} to {}", to.display()))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", to.display()))?;
    Ok(to.to_path_buf())
}

/// Runs `prog args` to completion, stdout discarded; an error only if it could
/// not run (its exit status is the behaviour's business, not ours).
pub fn run(prog: &Path, args: &[&str]) -> Result<()> {
    let st = Command::new(prog)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {}", prog.display()))?;
    anyhow::ensure!(st.code().is_some(), "{} was killed by a signal", prog.display());
    Ok(())
}
