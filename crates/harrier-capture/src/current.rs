//! `current` read from its per-CPU slot (bpf/include/current.h) instead of
//! by bpf_get_current_task_btf, a call every syscall's exit makes. Here:
//! where the slot is. The verifier inlines bpf_get_smp_processor_id (6.10+,
//! x86-64) as a load of the per-CPU `cpu_number` whose address it writes
//! into the program; `current_task` lies a fixed distance from it, which the
//! kernel's BTF gives (`.data..percpu`'s variables).

use crate::kernel::RDONLY_CAST;
use libbpf_rs::btf::types::{Composite, DataSec, MemberAttr, Var};
use libbpf_rs::btf::Btf;
use std::os::fd::{AsRawFd, BorrowedFd};

/// How a session's programs learn the current task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CurrentReads {
    /// From the per-CPU slot at this address.
    Slot(u64),
    /// By the helper, and why.
    Helper(String),
}

/// What the programs say of the slot once they ran (current.h's state).
pub type CurrentState = crate::checked::Checked;

impl CurrentReads {
    /// Where the slot is, from `probe`: a loaded program whose only call is
    /// bpf_get_smp_processor_id (capture.bpf.c's hr_cpu_number).
    pub fn choose(asked: bool, probe: BorrowedFd) -> CurrentReads {
        if !asked {
            return CurrentReads::Helper("turned off".into());
        }
        if let Some(why) = RDONLY_CAST.missing() {
            return CurrentReads::Helper(why);
        }
        let Some(cpu_number) = xlated(probe).and_then(|x| cpu_number_address(&x)) else {
            return CurrentReads::Helper(
                "the verifier does not inline bpf_get_smp_processor_id here (x86-64, Linux 6.10+)".into(),
            );
        };
        let Some(distance) = Btf::from_vmlinux().ok().and_then(|b| current_from_cpu_number(&b)) else {
            return CurrentReads::Helper("the kernel's BTF places no current_task and cpu_number".into());
        };
        CurrentReads::Slot(cpu_number.wrapping_add_signed(distance))
    }

    /// The programs' cur_slot (0: the helper).
    pub fn slot(&self) -> u64 {
        match *self {
            CurrentReads::Slot(a) => a,
            CurrentReads::Helper(_) => 0,
        }
    }

    /// One line for the start of a session.
    pub fn describe(&self) -> String {
        match self {
            CurrentReads::Slot(_) => {
                "current task: read from its per-CPU slot, checked against the helper first".into()
            }
            CurrentReads::Helper(why) => format!("current task: read by the helper ({why})"),
        }
    }
}

/// The program's instructions as the verifier left them.
fn xlated(prog: BorrowedFd) -> Option<Vec<u8>> {
    let info_of = |info: &mut libbpf_sys::bpf_prog_info| {
        let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
        let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), info, &mut len) };
        rc == 0
    };
    let mut info = libbpf_sys::bpf_prog_info::default();
    if !info_of(&mut info) {
        return None;
    }
    let mut insns = vec![0u8; info.xlated_prog_len as usize];
    info = libbpf_sys::bpf_prog_info {
        xlated_prog_len: insns.len() as u32,
        xlated_prog_insns: insns.as_mut_ptr() as u64,
        ..Default::default()
    };
    info_of(&mut info).then_some(insns)
}

const MOV64_IMM: u8 = 0xb7;
const MOV32_IMM: u8 = 0xb4;
const MOV64_REG: u8 = 0xbf;
const LDX_W: u8 = 0x61;
/// A MOV64_REG with this offset adds the CPU's per-CPU offset (BPF_ADDR_PERCPU).
const ADDR_PERCPU: i16 = -1;

/// The address in "r0 = &cpu_number; r0 += this CPU's offset; r0 = *(u32 *)r0",
/// the inlined bpf_get_smp_processor_id.
fn cpu_number_address(xlated: &[u8]) -> Option<u64> {
    let insns: Vec<(u8, i16, i32)> = xlated
        .chunks_exact(8)
        .map(|i| (i[0], i16::from_le_bytes([i[2], i[3]]), i32::from_le_bytes([i[4], i[5], i[6], i[7]])))
        .collect();
    insns.windows(3).find_map(|w| match (w[0], w[1], w[2]) {
        ((MOV64_IMM, _, imm), (MOV64_REG, ADDR_PERCPU, _), (LDX_W, 0, _)) => Some(imm as i64 as u64),
        ((MOV32_IMM, _, imm), (MOV64_REG, ADDR_PERCPU, _), (LDX_W, 0, _)) => Some(imm as u32 as u64),
        _ => None,
    })
}

/// current_task's offset less cpu_number's in the per-CPU section: both
/// variables (6.15+), or both fields of pcpu_hot (6.10-6.14).
fn current_from_cpu_number(btf: &Btf) -> Option<i64> {
    let sec: DataSec = btf.type_by_name(".data..percpu")?;
    // By the section's entries: a struct may share the variable's name (pcpu_hot).
    let var = |name: &str| {
        sec.iter().find_map(|v| {
            let var: Var = btf.type_by_id(v.ty)?;
            (var.name()?.to_str()? == name).then_some((v.offset as i64, var))
        })
    };
    if let (Some((cur, _)), Some((cpu, _))) = (var("current_task"), var("cpu_number")) {
        return Some(cur - cpu);
    }
    // Both fields of one variable: the distance is the fields'.
    let (_, hot) = var("pcpu_hot")?;
    let hot: Composite = hot.next_type()?.skip_mods_and_typedefs().try_into().ok()?;
    Some(field_offset(btf, &hot, "current_task")? - field_offset(btf, &hot, "cpu_number")?)
}

/// The byte offset of field `name` in `comp`, looking into its anonymous
/// structs and unions (pcpu_hot's fields sit in one, beside its padding).
fn field_offset(btf: &Btf, comp: &Composite, name: &str) -> Option<i64> {
    comp.iter().find_map(|m| {
        let MemberAttr::Normal { offset } = m.attr else { return None };
        let at = offset as i64 / 8;
        match m.name.and_then(|n| n.to_str()) {
            Some(n) if !n.is_empty() => (n == name).then_some(at),
            _ => {
                let inner: Composite = btf
                    .type_by_id::<libbpf_rs::btf::BtfType>(m.ty)?
                    .skip_mods_and_typedefs()
                    .try_into()
                    .ok()?;
                Some(at + field_offset(btf, &inner, name)?)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(code: u8, off: i16, imm: i32) -> Vec<u8> {
        let mut v = vec![code, 0];
        v.extend(off.to_le_bytes());
        v.extend(imm.to_le_bytes());
        v
    }

    #[test]
    fn the_address_is_the_inlined_helpers_immediate() {
        let prog = |mov: u8, imm: i32| {
            [insn(MOV64_IMM, 0, 7), insn(mov, 0, imm), insn(MOV64_REG, ADDR_PERCPU, 0), insn(LDX_W, 0, 0)]
                .concat()
        };
        // 6.15+: an address in the kernel image, sign-extended.
        assert_eq!(cpu_number_address(&prog(MOV64_IMM, 0x8381_9ea4u32 as i32)), Some(0xffff_ffff_8381_9ea4));
        // Zero-based per-CPU addresses.
        assert_eq!(cpu_number_address(&prog(MOV32_IMM, 0x2_143c)), Some(0x2_143c));
        // A plain register move, or a call left in place: no address.
        let call = [insn(MOV64_IMM, 0, 5), insn(MOV64_REG, 0, 0), insn(LDX_W, 0, 0)].concat();
        assert_eq!(cpu_number_address(&call), None);
        assert_eq!(cpu_number_address(&insn(0x85, 0, 8)), None);
    }

    #[test]
    fn this_kernels_btf_places_current_task() {
        let btf = Btf::from_vmlinux().expect("the kernel's BTF");
        let d = current_from_cpu_number(&btf).expect("x86-64 kernels of 6.10+ have both");
        assert!(d.abs() < 1 << 20, "one section apart at most: {d}");
    }
}
