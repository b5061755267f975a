//! The clocks behind event times: events carry CLOCK_MONOTONIC (what
//! bpf_ktime_get_ns reads), alerts and files show CLOCK_REALTIME.

fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC now, in ns (the clock event timestamps use).
pub fn monotonic_now() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME now, in ns since the epoch (snapshots, plugin events).
pub fn realtime_now() -> u64 {
    read(libc::CLOCK_REALTIME)
}

/// One realtime read between two monotonic ones: (realtime - the monotonic
/// midpoint, the span of the two monotonic reads).
fn bracketed() -> (u64, u64) {
    let m1 = read(libc::CLOCK_MONOTONIC);
    let r = read(libc::CLOCK_REALTIME);
    let m2 = read(libc::CLOCK_MONOTONIC);
    let span = m2.saturating_sub(m1);
    (r.saturating_sub(m1 + span / 2), span)
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC, for wall-clock event times: the read of
/// the narrowest bracket of a few. Two plain reads put every event time of a
/// run early by however long the thread was preempted between them: up to
/// 0.4 ms on an idle emulated guest, enough to give an event of one test
/// behaviour the time of the one before.
pub fn epoch_offset() -> u64 {
    epoch_offset_within().0
}

/// The offset and the span of the bracket it was read in (its uncertainty).
fn epoch_offset_within() -> (u64, u64) {
    let mut best = bracketed();
    for _ in 0..31 {
        let b = bracketed();
        if b.1 < best.1 {
            best = b;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offset agrees with independent bracketed reads, each within its
    /// own span plus the offset's: a realtime read taken at either end of a
    /// preempted pair (the old reading) is off by the preemption.
    #[test]
    fn the_offset_agrees_with_bracketed_reads() {
        let (off, unc) = epoch_offset_within();
        assert!(unc < 1_000_000, "some bracket of 32 is under 1 ms wide: {unc} ns");
        for _ in 0..1000 {
            let (o, span) = bracketed();
            let gap = o.abs_diff(off);
            assert!(gap <= span / 2 + unc / 2 + 1, "offset {off} (±{unc}) vs {o} (±{span}): {gap} ns apart");
        }
    }
}
