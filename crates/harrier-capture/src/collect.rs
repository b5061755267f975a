//! What each typed event collects in the kernel. By default everything
//! schema/events.tbl lists, with entry copies for the TOCTOU-sensitive
//! syscalls (`harrier capture`, capture files). A consumer that knows what it
//! reads (`harrier run`, from its rules, outputs and state) narrows it:
//!
//! - a parameter nobody reads is not collected: no copy, no walk, and it is
//!   absent on the wire (`VAR_ABSENT`);
//! - a parameter needed only when the call failed (an open's path names a
//!   file that was not opened; a successful open has the kernel's `fullpath`)
//!   is collected only then;
//! - a syscall whose pointer arguments nobody needs as they were at entry is
//!   read at exit instead: no sys_enter tracepoint is attached for it (an
//!   event with an argument read at exit says so: `args_at_exit`).
//!
//! The BPF side gets these as constants (bpf/capture.bpf.c: skip_params,
//! skip_params_ok, no_entry), so the verifier drops the code they rule out.

use anyhow::{anyhow, bail, Result};
use harrier_schema::{syscall_by_name, SyscallInfo, Wire};

/// Parameters per event a mask can name (`__u32` in BPF).
pub const MAX_PARAMS: usize = 32;

/// Exec replaces the caller's memory and registers: after a successful one,
/// only an entry copy still has its pointer arguments. The mask of those.
fn lost_on_exec(s: &SyscallInfo) -> u32 {
    if !matches!(s.name, "execve" | "execveat") {
        return 0;
    }
    let params = s.params.unwrap_or_default().iter().enumerate().take(MAX_PARAMS);
    params.filter(|(_, p)| p.at_enter && p.wire == Wire::Bytes).fold(0, |m, (i, _)| m | 1 << i)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collect {
    /// Per syscall number: bit i set = parameter i (wire order) not collected.
    skip: Vec<u32>,
    /// Bit i set = parameter i not collected when the call succeeded.
    skip_on_success: Vec<u32>,
    /// Entry copies not attached: pointer arguments read at exit.
    no_entry: Vec<bool>,
}

impl Default for Collect {
    fn default() -> Collect {
        Collect::all()
    }
}

impl Collect {
    /// Everything, with entry copies.
    pub fn all() -> Collect {
        Collect {
            skip: vec![0; crate::NR_SLOTS],
            skip_on_success: vec![0; crate::NR_SLOTS],
            no_entry: vec![false; crate::NR_SLOTS],
        }
    }

    pub fn is_all(&self) -> bool {
        *self == Collect::all()
    }

    fn param(syscall: &str, param: &str) -> Result<(&'static SyscallInfo, usize)> {
        let s = syscall_by_name(syscall).ok_or_else(|| anyhow!("unknown syscall '{syscall}'"))?;
        let params = s.params.ok_or_else(|| anyhow!("{syscall} has no typed event"))?;
        let i = params
            .iter()
            .position(|p| p.name == param)
            .ok_or_else(|| anyhow!("{syscall} has no parameter '{param}'"))?;
        if params[i].wire != Wire::Bytes {
            bail!("{syscall}.{param} is fixed-size: always collected");
        }
        if i >= MAX_PARAMS {
            bail!("{syscall}.{param} is parameter {i}: at most {MAX_PARAMS} can be left out");
        }
        Ok((s, i))
    }

    /// Never collect `syscall`'s variable parameter `param`.
    pub fn skip(&mut self, syscall: &str, param: &str) -> Result<()> {
        let (s, i) = Self::param(syscall, param)?;
        self.skip[s.nr as usize] |= 1 << i;
        Ok(())
    }

    /// Collect `syscall`'s variable parameter `param` only when the call failed.
    pub fn skip_on_success(&mut self, syscall: &str, param: &str) -> Result<()> {
        let (s, i) = Self::param(syscall, param)?;
        self.skip_on_success[s.nr as usize] |= 1 << i;
        Ok(())
    }

    /// Read `syscall`'s pointer arguments at exit instead of copying them at
    /// entry. After a successful exec they are gone, so an exec's copied
    /// pointer parameters are then collected on failure only, and a
    /// successful execveat reports as execve (as Falco's exit events do).
    pub fn read_at_exit(&mut self, syscall: &str) -> Result<()> {
        let s = syscall_by_name(syscall).ok_or_else(|| anyhow!("unknown syscall '{syscall}'"))?;
        let params = s.params.unwrap_or_default();
        if !params.iter().any(|p| p.at_enter) {
            bail!("{syscall} has no entry copies");
        }
        self.no_entry[s.nr as usize] = true;
        Ok(())
    }

    pub fn skipped(&self, nr: u32) -> u32 {
        self.skip.get(nr as usize).copied().unwrap_or(0)
    }

    pub fn skipped_on_success(&self, nr: u32) -> u32 {
        let own = self.skip_on_success.get(nr as usize).copied().unwrap_or(0);
        let lost = match self.reads_at_exit(nr) {
            true => harrier_schema::syscall_by_nr(nr).map_or(0, lost_on_exec),
            false => 0,
        };
        own | lost
    }

    /// Whether syscall nr's entry copies are left out.
    pub fn reads_at_exit(&self, nr: u32) -> bool {
        self.no_entry.get(nr as usize).copied().unwrap_or(false)
    }

    /// Entry copies kept for a syscall whose exit another one's tracepoint
    /// may report (execveat's success exits as execve) when that other one is
    /// not attached: only the copy then tells the two apart.
    pub(crate) fn keep_entry(&mut self, nr: u32) {
        if let Some(v) = self.no_entry.get_mut(nr as usize) {
            *v = false;
        }
    }

    /// One line for a start message: what is left out, by syscall.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for s in harrier_schema::SYSCALLS {
            let Some(params) = s.params else { continue };
            let nr = s.nr as usize;
            let mut what: Vec<String> = Vec::new();
            for (i, p) in params.iter().enumerate().take(MAX_PARAMS) {
                if self.skip[nr] & (1 << i) != 0 {
                    what.push(format!("no {}", p.name));
                } else if self.skipped_on_success(s.nr) & (1 << i) != 0 {
                    what.push(format!("{} on failure only", p.name));
                }
            }
            if self.no_entry[nr] {
                what.push("read at exit".into());
            }
            if !what.is_empty() {
                parts.push(format!("{} ({})", s.name, what.join(", ")));
            }
        }
        if parts.is_empty() {
            "every parameter".into()
        } else {
            parts.join("; ")
        }
    }

    /// What `needed` collects that this leaves out ("openat.path", "openat
    /// entry copies"): a running session cannot change what it collects.
    pub fn lacks(&self, needed: &Collect) -> Vec<String> {
        let mut out = Vec::new();
        for s in harrier_schema::SYSCALLS {
            let nr = s.nr;
            let gone = (self.skipped(nr) & !needed.skipped(nr))
                | (self.skipped_on_success(nr) & !needed.skipped_on_success(nr) & !needed.skipped(nr));
            for (i, p) in s.params.unwrap_or_default().iter().enumerate().take(MAX_PARAMS) {
                if gone & (1 << i) != 0 {
                    out.push(format!("{}.{}", s.name, p.name));
                }
            }
            if self.reads_at_exit(nr) && !needed.reads_at_exit(nr) {
                out.push(format!("{} entry copies", s.name));
            }
        }
        out
    }

    pub(crate) fn write(&self, skip: &mut [u32], skip_ok: &mut [u32], no_entry: &mut [u8]) {
        skip.copy_from_slice(&self.skip);
        for (nr, d) in skip_ok.iter_mut().enumerate() {
            *d = self.skipped_on_success(nr as u32);
        }
        for (d, &s) in no_entry.iter_mut().zip(&self.no_entry) {
            *d = s as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_variable_parameters_can_be_left_out() {
        let mut c = Collect::all();
        c.skip("openat", "path").unwrap();
        assert!(c.skip("openat", "flags").unwrap_err().to_string().contains("fixed-size"));
        assert!(c.skip("openat", "nope").unwrap_err().to_string().contains("no parameter 'nope'"));
        assert!(c.skip("nosuch", "path").unwrap_err().to_string().contains("unknown syscall"));
        assert!(!c.is_all());
    }

    #[test]
    fn an_exec_read_at_exit_keeps_its_filename_for_failures_only() {
        let mut c = Collect::all();
        c.read_at_exit("execve").unwrap();
        let s = syscall_by_name("execve").unwrap();
        let i = s.params.unwrap().iter().position(|p| p.name == "filename").unwrap();
        assert_eq!(c.skipped_on_success(s.nr), 1 << i);
        assert!(c.reads_at_exit(s.nr));
        assert!(c.read_at_exit("read").unwrap_err().to_string().contains("no entry copies"));
        assert_eq!(c.summary(), "execve (filename on failure only, read at exit)");
        assert_eq!(c.lacks(&Collect::all()), ["execve.filename", "execve entry copies"]);
        assert!(Collect::all().lacks(&c).is_empty());
    }
}
