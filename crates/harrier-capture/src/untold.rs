//! Which processes' fds the consumer follows, for the kernel filter's untold
//! closes (bpf/include/untold.h): a close is kept back only in a process the
//! consumer said it follows, of an fd whose open was kept back since.

use anyhow::Result;
use libbpf_rs::{MapCore, MapFlags, MapHandle};

/// `struct hr_untold`: its process's start time and fd table, then one bit per fd.
const RECORD: usize = 16 + 16 * 8;
const BITS_AT: usize = 16;

/// A handle on the session's `untold` map; it outlives the borrow of the
/// session (the consumer's tables keep it).
pub struct UntoldFds {
    map: MapHandle,
}

impl UntoldFds {
    pub(crate) fn new(map: &libbpf_rs::Map) -> Result<UntoldFds> {
        Ok(UntoldFds { map: MapHandle::try_from(map)? })
    }

    /// The consumer's table of process `pid` is made: the kernel may keep
    /// back closes of fds kept back from now on. The record written is empty,
    /// so that no fd the table already holds (from /proc, say) is one.
    /// False: not written (the map is full); that process's closes are all sent.
    pub fn follow(&self, pid: u32) -> bool {
        self.map.update(&pid.to_ne_bytes(), &[0u8; RECORD], MapFlags::ANY).is_ok()
    }

    /// The consumer freed its table of `pid`.
    pub fn forget(&self, pid: u32) {
        let _ = self.map.delete(&pid.to_ne_bytes());
    }

    /// Whether the kernel holds that `fd` of `pid` was never told (tests).
    pub fn is_untold(&self, pid: u32, fd: u32) -> bool {
        let Ok(Some(v)) = self.map.lookup(&pid.to_ne_bytes(), MapFlags::ANY) else { return false };
        let at = BITS_AT + (fd as usize / 64) * 8;
        fd < 1024 && u64::from_ne_bytes(v[at..at + 8].try_into().unwrap()) >> (fd % 64) & 1 == 1
    }
}
