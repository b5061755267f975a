//! What benchmarks and tests read of a running session's BPF state: the
//! step clocks, the stash slots, the page-table walk of entry copies, the
//! current task's per-CPU slot (and where it is).

use super::{skel, CaptureSkel, Session};
use crate::checked::Checked;
use crate::current::{CurrentReads, CurrentState};
use crate::uread::{UserReads, WalkState};
use crate::Config;
use anyhow::{anyhow, Result};
use libbpf_rs::{MapCore, MapFlags};
use std::os::fd::AsFd;

/// Loaded, never attached: current.rs reads it for cpu_number's address.
pub(super) const CPU_NUMBER: &str = "hr_cpu_number";

/// How entry copies read user memory, with its checks' settings.
pub(super) fn choose_user_reads(rodata: &mut skel::types::rodata, cfg: &Config) -> UserReads {
    let user_reads = UserReads::choose(cfg.user_reads && !cfg.empty_programs);
    (rodata.uread_levels, rodata.uread_ram_end, rodata.uread_pfn_mask) = user_reads.rodata();
    rodata.uread_check_skew = cfg.user_read_check_skew;
    rodata.uread_check_limit = cfg.user_read_checks.unwrap_or(rodata.uread_check_limit);
    rodata.cur_check_skew = cfg.current_check_skew;
    user_reads
}

/// Where the programs read the current task from, written to their .bss
/// before anything is attached.
pub(super) fn choose_current(skel: &mut CaptureSkel, asked: bool) -> CurrentReads {
    let current = CurrentReads::choose(asked, skel.progs.hr_cpu_number.as_fd());
    skel.maps.bss_data.as_deref_mut().expect("the programs have a .bss").cur_slot = current.slot();
    current
}

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
        self.bss_checked(|b| (&b.uread_state, &b.uread_checks))
    }

    /// The stats' line: the choice, and what became of it.
    pub(super) fn user_reads_report(&self) -> String {
        let now = self.walk_state().describe("copies", "no direct map found or the helper disagreed");
        format!("{}{now}", self.user_reads.describe())
    }

    /// How the programs learn the current task (chosen at the start).
    pub fn current_reads(&self) -> &CurrentReads {
        &self.current
    }

    /// What the programs made of the per-CPU slot so far (bpf/include/current.h).
    pub fn current_state(&self) -> CurrentState {
        self.bss_checked(|b| (&b.cur_state, &b.cur_checks))
    }

    /// The stats' line: the choice, and what became of it.
    pub(super) fn current_report(&self) -> String {
        let now = self.current_state().describe("reads", "the helper disagreed");
        format!("{}{now}", self.current.describe())
    }

    /// A checked way's state and check count, as the programs left them.
    fn bss_checked(&self, fields: impl Fn(&skel::types::bss) -> (&u32, &u64)) -> Checked {
        let Some(bss) = self.skel.maps.bss_data.as_deref() else { return Checked::Unused };
        let (state, checks) = fields(bss);
        // SAFETY: the fields live in the mmapped .bss the programs write.
        unsafe { Checked::from_bss(std::ptr::read_volatile(state), std::ptr::read_volatile(checks)) }
    }
}
