//! What the battery's behaviours share: event-generator's actions and their
//! kit, a scratch directory of renamed programs, and a list of what a
//! behaviour made outside the scratch directory, removed on drop.

use crate::actions::{Kit, ACTIONS};
use crate::kit::{copy_executable, Scratch};
use anyhow::{bail, Context, Result};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct Tools {
    pub kit: Kit,
    pub scratch: Scratch,
    /// Files and (empty) directories made elsewhere: removed on drop, last first.
    made: RefCell<Vec<PathBuf>>,
    /// Users made with useradd: removed on drop.
    users: RefCell<Vec<String>>,
    /// Called when a container's behaviour is done and the container still exists.
    on_ready: RefCell<Option<Box<dyn FnMut()>>>,
}

impl Tools {
    pub fn new() -> Result<Tools> {
        let scratch = Scratch::new("battery")?;
        // Readable by the unprivileged users some behaviours run as.
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(scratch.path(), mode).context("chmod of the scratch directory")?;
        Ok(Tools {
            kit: Kit::new()?,
            scratch,
            made: RefCell::default(),
            users: RefCell::default(),
            on_ready: RefCell::default(),
        })
    }

    /// Has `f` called each time a container's behaviour is done, before the
    /// container goes: a test in-process has its sensor read the events then,
    /// while the runtime's state of the container exists (as a live sensor does).
    pub fn on_container_ready(&self, f: Box<dyn FnMut()>) {
        *self.on_ready.borrow_mut() = Some(f);
    }

    pub(super) fn container_ready(&self) {
        if let Some(f) = self.on_ready.borrow_mut().as_mut() {
            f();
        }
    }

    /// event-generator's action of this name (crate::actions).
    pub fn action(&self, name: &str) -> Result<()> {
        let Some(a) = ACTIONS.iter().find(|a| a.name == name) else { bail!("no action {name}") };
        (a.run)(&self.kit)
    }

    /// A copy of `bin` named `name` in the scratch directory (made once).
    pub fn tool(&self, bin: &str, name: &str) -> Result<PathBuf> {
        let p = self.scratch.path().join(name);
        if p.exists() {
            return Ok(p);
        }
        copy_executable(bin, &p)
    }

    /// A path in the scratch directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }

    /// Remembers `p` (made outside the scratch directory) for removal.
    pub fn made(&self, p: impl Into<PathBuf>) -> PathBuf {
        let p = p.into();
        self.made.borrow_mut().push(p.clone());
        p
    }

    /// A name unique to this run, for files made outside the scratch directory.
    pub fn unique(&self, tag: &str) -> String {
        format!(".harrier-battery-{tag}-{}", std::process::id())
    }

    /// Runs `prog args` with extra environment variables; its status is the
    /// behaviour's business, not ours (only failing to start is an error).
    pub fn run_env(&self, prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<()> {
        let st = Command::new(prog)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .with_context(|| format!("running {}", prog.display()))?;
        anyhow::ensure!(st.code().is_some(), "{} was killed by a signal", prog.display());
        Ok(())
    }

    pub fn run(&self, prog: &Path, args: &[&str]) -> Result<()> {
        self.run_env(prog, args, &[])
    }

    /// `/bin/sh -c script`.
    pub fn sh(&self, script: &str) -> Result<()> {
        self.run(Path::new("/bin/sh"), &["-c", script])
    }

    /// A user made with useradd (`system`: a system uid), removed on drop.
    pub fn user(&self, tag: &str, system: bool) -> Result<String> {
        let name = format!("hr{tag}{}", std::process::id() % 100_000);
        let _ = Command::new("userdel").arg(&name).output();
        let mut args = vec!["-M", "-s", "/usr/sbin/nologin"];
        if system {
            args.push("-r");
        }
        args.push(&name);
        let out = Command::new("useradd").args(&args).output().context("useradd")?;
        anyhow::ensure!(out.status.success(), "useradd {name}: {}", String::from_utf8_lossy(&out.stderr));
        self.users.borrow_mut().push(name.clone());
        Ok(name)
    }
}

impl Drop for Tools {
    fn drop(&mut self) {
        for p in self.made.borrow().iter().rev() {
            if p.is_dir() {
                let _ = std::fs::remove_dir(p);
            } else {
                let _ = std::fs::remove_file(p);
            }
        }
        for u in self.users.borrow().iter() {
            let _ = Command::new("userdel").arg(u).output();
        }
    }
}
