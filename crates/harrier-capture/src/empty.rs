//! [`Config::empty_programs`](crate::Config::empty_programs) (`harrier run
//! --empty-programs`, hidden): the floor of the attach plan. Wherever the
//! session links one of its programs, an empty program of the same program
//! type (bpf/empty.bpf.c) is linked at the same place instead, so the floor
//! follows whatever the plan attaches. What remains is the cost of being
//! attached there at all: the kernel's slow syscall path and the
//! tracepoint or tp_btf call.

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, ProgramAttachType, ProgramMut, ProgramType};
use std::mem::MaybeUninit;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/empty.skel.rs"));
}
use skel::{EmptySkel, EmptySkelBuilder};

/// The loaded empty programs: objects for tracepoints and raw tracepoints
/// (another one where the plan links two programs to one tracepoint: the
/// kernel takes a program once per tracepoint), one per tp_btf target (its
/// target is fixed at load).
#[derive(Default)]
pub struct EmptyPrograms {
    /// Each with the perf tracepoints its `hr_empty_tp` is linked to.
    common: Vec<(EmptySkel<'static>, Vec<u64>)>,
    btf: Vec<EmptySkel<'static>>,
}

/// Opens the empty object; `btf_target`: load only `hr_empty_btf` for it.
fn load(btf_target: Option<&str>) -> Result<EmptySkel<'static>> {
    // Tiny, leaked once per object (as the session's own object).
    let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
    let mut open = EmptySkelBuilder::default().open(storage).context("opening the empty programs")?;
    match btf_target {
        Some(t) => {
            open.progs.hr_empty_tp.set_autoload(false);
            open.progs.hr_empty_raw.set_autoload(false);
            open.progs.hr_empty_btf.set_attach_target(0, Some(t.to_string()))?;
        }
        None => open.progs.hr_empty_btf.set_autoload(false),
    }
    open.load().context("loading the empty programs")
}

/// "PREFIX/REST" of a program's section, for the prefixes given.
fn section_target<'a>(section: &'a str, prefixes: &[&str]) -> Option<&'a str> {
    prefixes.iter().find_map(|p| section.strip_prefix(p)?.strip_prefix('/'))
}

impl EmptyPrograms {
    /// An object whose tracepoint program is not yet linked at `tracepoint`.
    fn common(&mut self, tracepoint: Option<u64>) -> Result<&mut (EmptySkel<'static>, Vec<u64>)> {
        let free = |(_, ids): &(EmptySkel, Vec<u64>)| tracepoint.is_none_or(|id| !ids.contains(&id));
        let i = match self.common.iter().position(free) {
            Some(i) => i,
            None => {
                self.common.push((load(None)?, Vec::new()));
                self.common.len() - 1
            }
        };
        Ok(&mut self.common[i])
    }

    /// Links an empty program of `real`'s type where `real` would go: at the
    /// perf tracepoint `tracepoint` when given, else at the attach point its
    /// section names.
    pub fn link_like(&mut self, real: &ProgramMut, tracepoint: Option<u64>) -> Result<Link> {
        let section = real.section().to_string_lossy().into_owned();
        let name = real.name().to_string_lossy().into_owned();
        match (real.prog_type(), tracepoint) {
            (ProgramType::Tracepoint, tp) => {
                let id = match tp {
                    Some(id) => id,
                    None => {
                        let (cat, tp) = section_target(&section, &["tracepoint", "tp"])
                            .and_then(|t| t.split_once('/'))
                            .ok_or_else(|| anyhow!("{name}: no tracepoint in its section '{section}'"))?;
                        crate::tracefs::tracepoint_ids(cat, &[tp.to_string()])?[0]
                            .ok_or_else(|| anyhow!("no tracepoint {cat}:{tp}"))?
                    }
                };
                let fd = crate::tracefs::open_tracepoint_event(id)?;
                let (skel, ids) = self.common(Some(id))?;
                let link = skel.progs.hr_empty_tp.attach_perf_event(fd)?;
                ids.push(id);
                Ok(link)
            }
            (ProgramType::RawTracepoint, None) => {
                let tp = section_target(&section, &["raw_tp", "raw_tracepoint"])
                    .ok_or_else(|| anyhow!("{name}: no raw tracepoint in its section '{section}'"))?;
                Ok(self.common(None)?.0.progs.hr_empty_raw.attach_raw_tracepoint(tp)?)
            }
            (ProgramType::Tracing, None) if matches!(real.attach_type(), ProgramAttachType::TraceRawTp) => {
                let target = section_target(&section, &["tp_btf"])
                    .ok_or_else(|| anyhow!("{name}: no tp_btf target in its section '{section}'"))?;
                let skel = load(Some(target))?;
                let link = skel.progs.hr_empty_btf.attach()?;
                self.btf.push(skel);
                Ok(link)
            }
            (t, tp) => bail!(
                "--empty-programs has no empty counterpart for {name} ({t:?}{}): add one to bpf/empty.bpf.c",
                if tp.is_some() { " on a perf tracepoint" } else { "" }
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn section_targets() {
        use super::section_target;
        assert_eq!(section_target("tp_btf/sys_exit", &["tp_btf"]), Some("sys_exit"));
        assert_eq!(
            section_target("tracepoint/syscalls/sys_enter_openat", &["tracepoint", "tp"]),
            Some("syscalls/sys_enter_openat")
        );
        assert_eq!(section_target("tp/a/b", &["tracepoint", "tp"]), Some("a/b"));
        assert_eq!(section_target("tracepoint", &["tracepoint"]), None);
        assert_eq!(section_target("tp_btfx/y", &["tp_btf"]), None);
    }
}
