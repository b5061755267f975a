//! Harrier's state engine: the process table (Falco's main-thread model),
//! per-process descriptor tables, users/groups and containers, seeded from
//! /proc at start and kept current from the event stream.
//!
//! ```text
//! let mut st = State::new();
//! st.scan_proc(None);              // after the sensor attached, before draining
//! for ev in batch { st.apply(&ev) } // events in timestamp order
//! st.end_batch();                  // frees what exited a batch ago
//! st.process(tid)?.exepath; st.fd(tid, fd)?.name; st.ancestors(tid).nth(1)
//! ```
//!
//! See ARCHITECTURE-state.md for which events update what.
//!
//! # Memory
//!
//! Measured by `cargo test --release -p harrier-state --test memory -- --ignored --nocapture`
//! (10,000 processes with 10 fds each, built from events): see ARCHITECTURE-state.md.
//! 16.5 MiB RSS: ~900 bytes per process, ~83 bytes per fd. Per process: the
//! 208-byte `Process` plus its map slots (tid → pid, pid → process) and its
//! strings (exe, exepath, args, cwd: Arc'd, so forked children share their
//! parent's until they exec). Per fd: a 32-byte `Fd` plus its hash slot and
//! its name (an Arc shared by dup'd and inherited copies); inet sockets add a
//! boxed 38-byte tuple.

pub mod container;
pub mod fd;
mod names;
pub mod process;
mod procfs;
pub mod snapshot;
mod state;
pub mod testing;
mod threads;
pub mod users;

pub use container::{Container, Containers, Mount};
pub use fd::{Fd, FdTable, FdType, Tuple, L4};
pub use process::{Comm, Process};
pub use snapshot::Snapshot;
pub use state::{Ancestors, ProcessWatcher, State, StateStats, STATE_SYSCALLS};
pub use threads::{Thread, ThreadTable};
pub use users::{User, Users};

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hasher for integer keys (tids, pids, fds): one multiply instead of SipHash.
/// The keys come from the kernel, not from an attacker choosing collisions
/// cheaply (a process can pick its fd numbers, but only its own table suffers).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (n as u64 ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_i32(&mut self, n: i32) {
        self.write_u32(n as u32);
    }
}

pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    /// The sizes ARCHITECTURE-state.md quotes; a change should update them.
    #[test]
    fn entry_sizes_stay_as_documented() {
        use std::mem::size_of;
        let (p, f, t) = (size_of::<crate::Process>(), size_of::<crate::Fd>(), size_of::<crate::Tuple>());
        eprintln!("Process {p} B, Fd {f} B, Tuple {t} B");
        assert!(p <= 240, "Process is {p} bytes");
        assert!(f <= 32, "Fd is {f} bytes");
        assert!(t <= 48, "Tuple is {t} bytes");
    }

    #[test]
    fn every_state_syscall_is_typed() {
        for name in crate::STATE_SYSCALLS {
            let s = harrier_schema::syscall_by_name(name).unwrap_or_else(|| panic!("{name} unknown"));
            assert!(s.params.is_some(), "{name} has no typed event");
        }
    }
}
