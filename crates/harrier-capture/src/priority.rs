//! The ring reserve's priority table (capture.bpf.c's `priority`): per
//! syscall number, how far into the reserve its events may go. The backlog
//! keeps the same syscalls when full (any non-zero tier).

use crate::session::CaptureSkel;

/// capture.bpf.c's tiers: a severe rule's syscall may use the ring reserve
/// but its last half, which is the process life cycle's (exec, whose event
/// names the process in every later alert).
const PRIO_SEVERE: u8 = 1;
const PRIO_EXEC: u8 = 2;
const EXEC_SYSCALLS: [&str; 2] = ["execve", "execveat"];

/// By syscall number, its tier: exec's, or severe if it is in `nrs`.
pub(crate) fn table(nrs: &[u32]) -> Vec<u8> {
    let mut t = vec![0; crate::NR_SLOTS];
    let exec = EXEC_SYSCALLS.iter().filter_map(|n| harrier_schema::syscall_by_name(n)).map(|s| s.nr);
    for (nr, tier) in nrs.iter().map(|&nr| (nr, PRIO_SEVERE)).chain(exec.map(|nr| (nr, PRIO_EXEC))) {
        if let Some(p) = t.get_mut(nr as usize) {
            *p = (*p).max(tier);
        }
    }
    t
}

/// Writes the table through the .bss mapping (the programs read it per
/// event; a byte store is atomic).
pub(crate) fn write(skel: &mut CaptureSkel, table: &[u8]) {
    let Some(bss) = skel.maps.bss_data.as_deref_mut() else { return };
    for (p, &tier) in bss.priority.iter_mut().zip(table) {
        unsafe { std::ptr::write_volatile(p, tier) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harrier_schema::syscall_by_name;

    #[test]
    fn exec_always_has_the_whole_reserve_and_the_severe_syscalls_its_first_half() {
        let nr = |n: &str| syscall_by_name(n).unwrap().nr;
        let t = table(&[nr("openat"), nr("execve")]);
        assert_eq!((t[nr("execve") as usize], t[nr("execveat") as usize]), (PRIO_EXEC, PRIO_EXEC));
        assert_eq!(t[nr("openat") as usize], PRIO_SEVERE);
        assert_eq!(t.iter().filter(|&&p| p != 0).count(), 3, "nothing else");
    }
}
