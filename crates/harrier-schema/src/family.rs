//! Syscall families that per-event code asks about, by syscall number: one
//! table read instead of comparing the syscall's name with strings on every
//! event. Built once from the syscall table.

use std::sync::OnceLock;

/// The families one syscall belongs to (a bit set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Family(u8);

impl Family {
    /// open, openat, openat2, creat: flags (and mode) of a file open.
    pub const OPEN: Family = Family(1);
    /// The fd the event is about is its return value (opens, socket, accept*, dup*).
    pub const RETURNS_FD: Family = Family(1 << 1);
    /// sendto, sendmsg: may carry a destination address.
    pub const SEND: Family = Family(1 << 2);
    /// execve, execveat.
    pub const EXEC: Family = Family(1 << 3);
    /// setuid, setresuid, setreuid: change the process's user.
    pub const SETUID: Family = Family(1 << 4);

    pub fn contains(self, f: Family) -> bool {
        self.0 & f.0 == f.0 && f.0 != 0
    }
}

const MEMBERS: [(Family, &[&str]); 5] = [
    (Family::OPEN, &["open", "openat", "openat2", "creat"]),
    (
        Family::RETURNS_FD,
        &["open", "openat", "openat2", "creat", "socket", "accept", "accept4", "dup", "dup2", "dup3"],
    ),
    (Family::SEND, &["sendto", "sendmsg"]),
    (Family::EXEC, &["execve", "execveat"]),
    (Family::SETUID, &["setuid", "setresuid", "setreuid"]),
];

fn table() -> &'static [Family] {
    static T: OnceLock<Box<[Family]>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = vec![Family::default(); crate::MAX_SYSCALL_NR as usize + 1];
        for (fam, names) in MEMBERS {
            for s in names.iter().filter_map(|n| crate::syscall_by_name(n)) {
                t[s.nr as usize].0 |= fam.0;
            }
        }
        t.into_boxed_slice()
    })
}

/// The families of syscall `nr` (none for an unknown number).
pub fn of(nr: u32) -> Family {
    table().get(nr as usize).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nr(name: &str) -> u32 {
        crate::syscall_by_name(name).unwrap_or_else(|| panic!("{name} not in the table")).nr
    }

    #[test]
    fn every_member_is_in_the_syscall_table() {
        for (_, names) in MEMBERS {
            for n in names {
                assert!(crate::syscall_by_name(n).is_some(), "{n} is not in the syscall table");
            }
        }
    }

    #[test]
    fn families_by_number() {
        assert!(of(nr("openat")).contains(Family::OPEN));
        assert!(of(nr("openat")).contains(Family::RETURNS_FD));
        assert!(!of(nr("socket")).contains(Family::OPEN));
        assert!(of(nr("socket")).contains(Family::RETURNS_FD));
        assert!(of(nr("sendmsg")).contains(Family::SEND));
        assert!(of(nr("execveat")).contains(Family::EXEC));
        assert!(of(nr("setresuid")).contains(Family::SETUID));
        assert_eq!(of(nr("close")), Family::default());
        assert_eq!(of(u32::MAX), Family::default());
    }
}
