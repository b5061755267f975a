//! A counting global allocator: bench-fs's watcher processes report the
//! bytes and allocations their reader made per event. One relaxed atomic
//! add per allocation: nothing next to the allocation itself.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static BYTES: AtomicU64 = AtomicU64::new(0);
static COUNT: AtomicU64 = AtomicU64::new(0);

struct Counting;

fn count(n: usize) {
    BYTES.fetch_add(n as u64, Relaxed);
    COUNT.fetch_add(1, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count(l.size());
        unsafe { System.alloc_zeroed(l) }
    }
    /// A grown buffer counts its new size: what the reader asked for.
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count(new);
        unsafe { System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// (bytes, allocations) asked for by the whole process so far.
pub fn totals() -> (u64, u64) {
    (BYTES.load(Relaxed), COUNT.load(Relaxed))
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_this_process_allocations() {
        let (b0, n0) = super::totals();
        let v = std::hint::black_box(vec![0u8; 1000]);
        let (b1, n1) = super::totals();
        drop(v);
        assert!(b1 - b0 >= 1000 && n1 > n0, "{b0}->{b1} bytes, {n0}->{n1} allocations");
    }
}
