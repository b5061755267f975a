//! Harrier's event schema: the syscall table, the wire format and how events
//! decode and render. The tables come from schema/*.tbl via harrier-eventgen,
//! the same source the BPF handlers are generated from.

pub mod decode;
pub mod encode;
pub mod falco;
pub mod falco_params;
pub mod family;
pub mod render;
pub mod sockaddr;
pub mod view;
pub mod wire;

/// How a parameter travels on the wire: the generator's own definition.
pub use harrier_eventgen::table::Wire;

/// How a parameter's value is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    Int,
    Fd,
    Path,
    Data,
    Sockaddr,
    Argv,
}

#[derive(Debug)]
pub struct ParamDesc {
    pub name: &'static str,
    pub wire: Wire,
    pub text: TextKind,
    /// Flag/enum decoder in [`render`].
    pub renderer: Option<&'static str>,
    /// Read at syscall entry and merged at exit (TOCTOU-safe).
    pub at_enter: bool,
    /// A value that stands for "not known" (an upgraded or converted record
    /// that had no such field): decoded as [`decode::Value::Missing`].
    pub unknown: Option<u64>,
    /// The syscall argument (0-5) it is, when it is an integer argument as
    /// passed (the kernel filter reads it from the registers).
    pub arg: Option<u8>,
}

#[derive(Debug)]
pub struct SyscallInfo {
    pub nr: u32,
    pub name: &'static str,
    /// Its syscalls:sys_exit_* tracepoint name.
    pub tracepoint: &'static str,
    /// Typed parameters; None: the generic event (6 raw arguments).
    pub params: Option<&'static [ParamDesc]>,
    /// Never returns (exit, exit_group): its event comes from the entry tracepoint.
    pub noreturn: bool,
    /// Tracepoint name of another syscall whose exit may report this one's
    /// (a successful execveat exits as execve); its handler attaches there too.
    pub exit_also: Option<&'static str>,
}

mod generated {
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/schema.gen.rs"));
}

pub use generated::{MAX_SYSCALL_NR, SCHEMA_VERSION, SYSCALLS};

pub fn syscall_by_name(name: &str) -> Option<&'static SyscallInfo> {
    SYSCALLS.iter().find(|s| s.name == name)
}

pub fn syscall_by_nr(nr: u32) -> Option<&'static SyscallInfo> {
    // Called for every event: one array load, not a search.
    static BY_NR: std::sync::OnceLock<Vec<u16>> = std::sync::OnceLock::new();
    let by_nr = BY_NR.get_or_init(|| {
        let mut t = vec![u16::MAX; MAX_SYSCALL_NR as usize + 1];
        for (i, s) in SYSCALLS.iter().enumerate() {
            t[s.nr as usize] = i as u16;
        }
        t
    });
    by_nr.get(nr as usize).filter(|&&i| i != u16::MAX).map(|&i| &SYSCALLS[i as usize])
}

/// Parameter names of the generic event.
pub const GENERIC_ARGS: [&str; 6] = ["arg0", "arg1", "arg2", "arg3", "arg4", "arg5"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_agree() {
        let openat = syscall_by_name("openat").unwrap();
        assert_eq!(openat.nr, 257);
        assert_eq!(syscall_by_nr(257).unwrap().name, "openat");
        assert_eq!(syscall_by_name("fstat").unwrap().tracepoint, "newfstat");
        assert!(syscall_by_name("getppid").unwrap().params.is_none());
        assert!(SYSCALLS.windows(2).all(|w| w[0].nr < w[1].nr));
    }

    #[test]
    fn every_renderer_in_the_table_exists() {
        for s in SYSCALLS {
            for p in s.params.unwrap_or_default() {
                if let Some(r) = p.renderer {
                    // Harrier's own renderers, or Falco's names (falco.rs).
                    assert!(render::render(r, 0).is_some(), "{}: unknown renderer {r}", s.name);
                }
            }
        }
    }
}
