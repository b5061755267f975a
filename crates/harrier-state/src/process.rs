//! One process (thread group): what every thread of it shares, Falco's
//! main-thread model.

use crate::container::Container;
use crate::fd::FdTable;
use std::sync::Arc;

/// Bit of [`Process::exe_flags`]: the executable is on an overlayfs upper layer.
pub const EXE_UPPER_LAYER: u32 = 1;
/// Bit of [`Process::exe_flags`]: the executable is a memfd.
pub const EXE_MEMFD: u32 = 2;
/// Bit of [`Process::exe_flags`]: the process could write its executable (Falco's
/// EXE_WRITABLE: owner, mode bits, CAP_DAC_OVERRIDE/CAP_FOWNER; never on a read-only mount).
pub const EXE_WRITABLE: u32 = 4;
/// Bit of [`Process::exe_flags`]: the executable is on an overlayfs lower layer.
pub const EXE_LOWER_LAYER: u32 = 8;

/// A comm is at most 15 bytes: kept inline, so renaming never allocates.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Comm {
    len: u8,
    bytes: [u8; 16],
}

impl Comm {
    pub fn new(s: &str) -> Comm {
        let mut c = Comm::default();
        let mut n = s.len().min(15);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        c.bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
        c.len = n as u8;
        c
    }
    /// The bytes: always valid UTF-8 (cut on a character boundary), so no check.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Text shared between a parent and its forked children until one execs.
pub type Shared = Arc<str>;

/// Bytes of environment kept per process: what the kernel side copies at
/// exec (bpf/include/task.h HR_ENV_MAX), and what is read from /proc.
pub const ENV_MAX: usize = 4096;

#[derive(Debug, Clone)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    /// pid and process group as the process's own pid namespace sees them.
    pub vpid: u32,
    pub vpgid: u32,
    pub sid: u32,
    pub comm: Comm,
    /// argv[0] (Falco's proc.exe).
    pub exe: Shared,
    /// The executable's absolute path as the kernel resolved it (proc.exepath).
    pub exepath: Shared,
    /// The argument block after argv[0]: NUL-separated arguments.
    pub args: Shared,
    pub cwd: Shared,
    /// The environment block (NUL-separated VAR=value), only when the state
    /// keeps it ([`crate::State::keep_env`]); empty otherwise. Shared with
    /// forked children until they exec.
    pub env: Arc<[u8]>,
    pub uid: u32,
    pub gid: u32,
    pub euid: u32,
    pub egid: u32,
    /// u32::MAX: not set.
    pub loginuid: u32,
    /// Controlling terminal device number, 0 for none.
    pub tty: u32,
    pub cap_effective: u64,
    pub cap_permitted: u64,
    pub cap_inheritable: u64,
    /// CLOCK_MONOTONIC ns of the fork (from /proc: derived from the boot-relative start).
    pub start_ts: u64,
    pub exe_ctime: u64,
    pub exe_mtime: u64,
    /// [`EXE_UPPER_LAYER`] | [`EXE_MEMFD`] | [`EXE_WRITABLE`] | [`EXE_LOWER_LAYER`].
    pub exe_flags: u32,
    /// None: a host process.
    pub container: Option<Arc<Container>>,
    pub fds: FdTable,
    /// Threads known alive; the process is dropped when the last one goes.
    pub(crate) threads: u32,
}

impl Process {
    /// A process known only by its pid (its parent was not seen).
    pub fn new(pid: u32) -> Process {
        let empty: Shared = Arc::from("");
        Process {
            pid,
            ppid: 0,
            vpid: pid,
            vpgid: 0,
            sid: 0,
            comm: Comm::default(),
            exe: empty.clone(),
            exepath: empty.clone(),
            args: empty.clone(),
            cwd: empty,
            env: Arc::from(&b""[..]),
            uid: 0,
            gid: 0,
            euid: 0,
            egid: 0,
            loginuid: u32::MAX,
            tty: 0,
            cap_effective: 0,
            cap_permitted: 0,
            cap_inheritable: 0,
            start_ts: 0,
            exe_ctime: 0,
            exe_mtime: 0,
            exe_flags: 0,
            container: None,
            fds: FdTable::default(),
            threads: 0,
        }
    }

    /// Falco's proc.name.
    pub fn name(&self) -> &str {
        self.comm.as_str()
    }

    /// The arguments after argv[0].
    pub fn args(&self) -> impl Iterator<Item = &str> {
        self.args.split('\0').filter(|a| !a.is_empty())
    }

    /// Falco's proc.args (arguments joined by spaces) written into `out`,
    /// which the caller reuses: no allocation once it is large enough.
    pub fn write_args(&self, out: &mut String) {
        out.clear();
        for (i, a) in self.args().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(a);
        }
    }

    /// Falco's proc.cmdline: name and arguments.
    pub fn write_cmdline(&self, out: &mut String) {
        out.clear();
        out.push_str(self.name());
        for a in self.args() {
            out.push(' ');
            out.push_str(a);
        }
    }

    pub fn is_exe_upper_layer(&self) -> bool {
        self.exe_flags & EXE_UPPER_LAYER != 0
    }

    pub fn is_exe_from_memfd(&self) -> bool {
        self.exe_flags & EXE_MEMFD != 0
    }

    pub fn is_exe_writable(&self) -> bool {
        self.exe_flags & EXE_WRITABLE != 0
    }

    pub fn is_exe_lower_layer(&self) -> bool {
        self.exe_flags & EXE_LOWER_LAYER != 0
    }

    /// Falco's container.id: the 12-hex id, or "host".
    pub fn container_id(&self) -> &str {
        self.container.as_ref().map_or("host", |c| &c.id)
    }

    /// The environment variables, NAME=value each.
    pub fn env(&self) -> impl Iterator<Item = &[u8]> {
        self.env.split(|&c| c == 0).filter(|a| !a.is_empty())
    }

    /// Sets the environment from a block; `cut`: the block was cut short, so
    /// its last variable, unless NUL-terminated, is partial and left out
    /// (a half value would be a wrong one).
    pub fn set_env(&mut self, block: &[u8], cut: bool) {
        let mut b = block;
        if cut && !b.ends_with(b"\0") {
            b = b.iter().rposition(|&c| c == 0).map_or(&b""[..], |i| &b[..=i]);
        }
        self.env = Arc::from(b);
    }

    /// Forgets the environment (allocates only if there was one).
    pub(crate) fn clear_env(&mut self) {
        if !self.env.is_empty() {
            self.env = Arc::from(&b""[..]);
        }
    }

    /// Sets exe/args from an argument block (NUL-separated, argv[0] first).
    pub(crate) fn set_argv(&mut self, block: &[u8]) {
        let text = String::from_utf8_lossy(block);
        let text = text.trim_end_matches('\0');
        let (first, rest) = text.split_once('\0').unwrap_or((text, ""));
        self.exe = Arc::from(first);
        self.args = Arc::from(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_is_cut_at_15_bytes_on_a_char_boundary() {
        assert_eq!(Comm::new("0123456789abcdefgh").as_str(), "0123456789abcde");
        assert_eq!(Comm::new("aaaaaaaaaaaaaaé").as_str(), "aaaaaaaaaaaaaa");
    }

    #[test]
    fn a_cut_environment_loses_its_partial_last_variable() {
        let mut p = Process::new(1);
        p.set_env(b"A=1\0B=2\0C=par", true);
        assert_eq!(p.env().collect::<Vec<_>>(), [&b"A=1"[..], b"B=2"]);
        p.set_env(b"A=1\0B=2\0C=par", false);
        assert_eq!(p.env().count(), 3, "a whole block keeps every variable");
        p.set_env(b"A=1\0", true);
        assert_eq!(p.env().count(), 1, "cut right after a NUL: nothing partial");
        p.set_env(b"LONG=xxxx", true);
        assert_eq!(p.env().count(), 0);
    }

    #[test]
    fn args_and_cmdline() {
        let mut p = Process::new(1);
        p.comm = Comm::new("ls");
        p.set_argv(b"/bin/ls\0-l\0/tmp\0");
        let mut s = String::new();
        p.write_args(&mut s);
        assert_eq!(s, "-l /tmp");
        p.write_cmdline(&mut s);
        assert_eq!(s, "ls -l /tmp");
        assert_eq!(&*p.exe, "/bin/ls");
    }
}
