//! A global allocator that counts what it is asked for, per thread and per
//! process, for the tests that assert a hot path allocates nothing and the
//! benchmarks that report bytes per event. A binary opts in with
//!
//! ```ignore
//! #[global_allocator]
//! static A: harrier_alloc_count::Counting = harrier_alloc_count::Counting;
//! ```
//!
//! Per-thread figures let a test measure its own work while the test harness
//! runs other tests on other threads. Cost: a thread-local add and two
//! relaxed atomic adds per allocation, nothing next to the allocation itself.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What was asked of the allocator. A grown buffer (`realloc`) counts its
/// new size as one allocation: what the caller asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub bytes: u64,
    pub allocations: u64,
    /// The largest single request since the last [`reset_largest`] (per thread)
    /// or since the start (per process).
    pub largest: u64,
}

static BYTES: AtomicU64 = AtomicU64::new(0);
static COUNT: AtomicU64 = AtomicU64::new(0);
static LARGEST: AtomicU64 = AtomicU64::new(0);

thread_local! {
    // const, destructor-free thread locals: reading them never allocates, and
    // try_with fails quietly while a thread is being torn down.
    static T_BYTES: Cell<u64> = const { Cell::new(0) };
    static T_COUNT: Cell<u64> = const { Cell::new(0) };
    static T_LARGEST: Cell<u64> = const { Cell::new(0) };
}

fn count(n: usize) {
    let n = n as u64;
    BYTES.fetch_add(n, Relaxed);
    COUNT.fetch_add(1, Relaxed);
    LARGEST.fetch_max(n, Relaxed);
    let _ = T_BYTES.try_with(|c| c.set(c.get() + n));
    let _ = T_COUNT.try_with(|c| c.set(c.get() + 1));
    let _ = T_LARGEST.try_with(|c| c.set(c.get().max(n)));
}

/// The counting allocator: the system allocator plus [`count`].
pub struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count(l.size());
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count(new);
        unsafe { System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

/// What this thread has asked for so far.
pub fn this_thread() -> Totals {
    Totals {
        bytes: T_BYTES.with(Cell::get),
        allocations: T_COUNT.with(Cell::get),
        largest: T_LARGEST.with(Cell::get),
    }
}

/// What the whole process has asked for so far.
pub fn process() -> Totals {
    Totals { bytes: BYTES.load(Relaxed), allocations: COUNT.load(Relaxed), largest: LARGEST.load(Relaxed) }
}

/// Starts this thread's `largest` afresh.
pub fn reset_largest() {
    T_LARGEST.with(|c| c.set(0));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static A: Counting = Counting;

    #[test]
    fn counts_this_thread_and_the_process() {
        reset_largest();
        let (t0, p0) = (this_thread(), process());
        let v = std::hint::black_box(vec![0u8; 1000]);
        let (t1, p1) = (this_thread(), process());
        drop(v);
        assert!(t1.bytes - t0.bytes >= 1000 && t1.allocations > t0.allocations, "{t0:?} -> {t1:?}");
        assert!(p1.bytes - p0.bytes >= 1000 && p1.allocations > p0.allocations, "{p0:?} -> {p1:?}");
        assert!(t1.largest >= 1000 && p1.largest >= 1000, "{t1:?} {p1:?}");
    }

    #[test]
    fn another_threads_allocations_are_not_this_threads() {
        let before = this_thread();
        std::thread::spawn(|| std::hint::black_box(vec![0u8; 1 << 20])).join().unwrap();
        let after = this_thread();
        assert!(after.largest < 1 << 20, "{after:?}");
        assert!(after.bytes - before.bytes < 1 << 20, "{before:?} -> {after:?}");
    }
}
