//! What benchmarks and tests read of a running session's BPF state: the
//! step clocks, the stash slots, the page-table walk of entry copies.

use super::Session;
use crate::uread::{UserReads, WalkState};
use anyhow::{anyhow, Result};
use libbpf_rs::{MapCore, MapFlags};

/// Entries of the step_ns map (HR_STEPS).
const STEPS: u32 = 16;

impl Session {
    /// With Config::step_clock: per step (bpf/include/steps.h's numbering),
    /// the ns summed over every CPU and the marks counted.
    pub fn step_sums(&self) -> Result<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        for step in 0..STEPS {
            let v = self
                .skel
                .maps
                .step_ns
                .lookup_percpu(&step.to_ne_bytes(), MapFlags::ANY)?
                .ok_or_else(|| anyhow!("step clock {step} missing"))?;
            let word = |b: &[u8], i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
            out.push(v.iter().take(self.ncpus).fold((0, 0), |(ns, n), b| (ns + word(b, 0), n + word(b, 1))));
        }
        Ok(out)
    }

    /// The thread holding stash slot `slot` (0: none); tests look.
    pub fn stash_slot_owner(&self, slot: u32) -> Result<u64> {
        let v = self
            .skel
            .maps
            .stash_slots
            .lookup(&slot.to_ne_bytes(), MapFlags::ANY)?
            .ok_or_else(|| anyhow!("stash slot {slot} missing"))?;
        // struct hr_stash: nr, path_len, extra_len, then the owner.
        Ok(u64::from_ne_bytes(v[8..16].try_into()?))
    }

    /// How entry copies read user memory (chosen at the start).
    pub fn user_reads(&self) -> &UserReads {
        &self.user_reads
    }

    /// What the programs made of the walk so far (bpf/include/uread.h).
    pub fn walk_state(&self) -> WalkState {
        let Some(bss) = self.skel.maps.bss_data.as_deref() else { return WalkState::Unused };
        let (state, checked) = unsafe {
            (std::ptr::read_volatile(&bss.uread_state), std::ptr::read_volatile(&bss.uread_checks))
        };
        match state {
            1 => WalkState::On { checked },
            2 => WalkState::Off { checked },
            _ => WalkState::Unused,
        }
    }

    /// The stats' line: the choice, and what became of it.
    pub(super) fn user_reads_report(&self) -> String {
        let now = match self.walk_state() {
            WalkState::On { checked } => format!(": on, {checked} copies checked"),
            WalkState::Off { checked } => {
                format!(": off, no direct map found or the helper disagreed after {checked} checks")
            }
            WalkState::Unused => String::new(),
        };
        format!("{}{now}", self.user_reads.describe())
    }
}
