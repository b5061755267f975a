//! Which processes' fds the consumer follows, for the kernel filter's untold
//! closes (bpf/include/untold.h): a close is kept back only in a process the
//! consumer said it follows, of an fd whose open was kept back since.

use anyhow::Result;
use libbpf_rs::{MapCore, MapFlags, MapHandle};

/// `struct hr_untold`: the process (tgid, pad), its start time and fd table,
/// then one bit per fd.
const RECORD: usize = 24 + 16 * 8;
const BITS_AT: usize = 24;

/// A handle on the session's `untold` map; it outlives the borrow of the
/// session (the consumer's tables keep it).
pub struct UntoldFds {
    map: MapHandle,
}

impl UntoldFds {
    /// The array's slots (pid_max's default): process `pid` has slot
    /// `pid % SLOTS`, and is not followed while another followed process holds it.
    pub const SLOTS: u32 = 32768;

    pub(crate) fn new(map: &libbpf_rs::Map) -> Result<UntoldFds> {
        Ok(UntoldFds { map: MapHandle::try_from(map)? })
    }

    fn slot(pid: u32) -> [u8; 4] {
        (pid % Self::SLOTS).to_ne_bytes()
    }

    /// `pid`'s slot: the process holding it (0: free) and its record.
    fn slot_record(&self, pid: u32) -> Option<(u32, Vec<u8>)> {
        let v = self.map.lookup(&Self::slot(pid), MapFlags::ANY).ok()??;
        Some((u32::from_ne_bytes(v[..4].try_into().unwrap()), v))
    }

    fn holder(&self, pid: u32) -> Option<u32> {
        self.slot_record(pid).map(|(t, _)| t).filter(|&t| t != 0)
    }

    /// The consumer's table of process `pid` is made: the kernel may keep
    /// back closes of fds kept back from now on. The record written is empty,
    /// so that no fd the table already holds (from /proc, say) is one.
    /// False: not written (another followed process holds its slot); that
    /// process's closes are all sent.
    pub fn follow(&self, pid: u32) -> bool {
        if pid == 0 || self.holder(pid).is_some_and(|t| t != pid) {
            return false;
        }
        let mut rec = [0u8; RECORD];
        rec[..4].copy_from_slice(&pid.to_ne_bytes());
        self.map.update(&Self::slot(pid), &rec, MapFlags::ANY).is_ok()
    }

    /// The consumer freed its table of `pid`.
    pub fn forget(&self, pid: u32) {
        if self.holder(pid) == Some(pid) {
            let _ = self.map.update(&Self::slot(pid), &[0u8; RECORD], MapFlags::ANY);
        }
    }

    /// Whether the kernel holds that `fd` of `pid` was never told (tests).
    pub fn is_untold(&self, pid: u32, fd: u32) -> bool {
        let Some((_, v)) = self.slot_record(pid).filter(|(t, _)| *t == pid) else { return false };
        let at = BITS_AT + (fd as usize / 64) * 8;
        fd < 1024 && u64::from_ne_bytes(v[at..at + 8].try_into().unwrap()) >> (fd % 64) & 1 == 1
    }
}
