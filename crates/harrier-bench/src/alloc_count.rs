//! The watcher processes of the file-system benchmarks report the bytes and
//! allocations their reader made per event (harrier-alloc-count's allocator).

#[global_allocator]
static A: harrier_alloc_count::Counting = harrier_alloc_count::Counting;

/// (bytes, allocations) asked for by the whole process so far.
pub fn totals() -> (u64, u64) {
    let t = harrier_alloc_count::process();
    (t.bytes, t.allocations)
}
