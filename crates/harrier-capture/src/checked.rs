//! A faster way the programs read something, checked against the helper's
//! answer for its first uses (uread.h's page-table walk, current.h's per-CPU
//! slot): what they made of it once they ran. Both keep a state word (0 not
//! yet, 1 on, 2 off) and a count of checks in .bss.

/// The programs' verdict on a checked way of reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Not used yet (nothing checked), or not chosen.
    Unused,
    /// In use: every check agreed.
    On { checked: u64 },
    /// Off: the way could not be set up, or the helper read something else.
    Off { checked: u64 },
}

impl Checked {
    /// From the programs' state word and check count.
    pub fn from_bss(state: u32, checked: u64) -> Checked {
        match state {
            1 => Checked::On { checked },
            2 => Checked::Off { checked },
            _ => Checked::Unused,
        }
    }

    /// Checks made (0 if unused).
    pub fn checked(self) -> u64 {
        match self {
            Checked::On { checked } | Checked::Off { checked } => checked,
            Checked::Unused => 0,
        }
    }

    /// The stats line's tail: `what` names the checks ("copies", "reads"),
    /// `off` says why a way turns off.
    pub fn describe(self, what: &str, off: &str) -> String {
        match self {
            Checked::On { checked } => format!(": on, {checked} {what} checked"),
            Checked::Off { checked } => format!(": off, {off} after {checked} checks"),
            Checked::Unused => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Checked;

    #[test]
    fn states_read_as_the_programs_write_them() {
        assert_eq!(Checked::from_bss(0, 3), Checked::Unused);
        assert_eq!(Checked::from_bss(1, 16), Checked::On { checked: 16 });
        assert_eq!(Checked::from_bss(2, 1), Checked::Off { checked: 1 });
        assert_eq!(Checked::from_bss(7, 1), Checked::Unused);
        assert_eq!(Checked::Off { checked: 4 }.checked(), 4);
        assert_eq!(Checked::On { checked: 2 }.describe("reads", "why"), ": on, 2 reads checked");
        assert_eq!(Checked::Off { checked: 2 }.describe("reads", "why"), ": off, why after 2 checks");
        assert_eq!(Checked::Unused.describe("reads", "why"), "");
    }
}
