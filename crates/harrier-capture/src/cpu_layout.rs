//! Where user space finds its fields in capture's per-CPU state (`struct
//! hr_cpu`, bpf/capture.bpf.c): the counters (`struct hr_cpu_stats`, read as
//! wire::CpuStats) and the ring each CPU writes, set before attach. The
//! test below checks these offsets, and CpuStats's order, against the
//! object's BTF: a field moved on one side only fails it.

use harrier_schema::wire::CpuStats;

/// `hr_cpu.stats`.
pub(crate) const STATS_OFF: usize = 0;
/// `hr_cpu.ring`: which ring this CPU writes.
pub(crate) const RING_OFF: usize = STATS_OFF + CpuStats::SIZE;

/// The counters in one CPU's `hr_cpu` value.
pub(crate) fn stats_of(value: &[u8]) -> CpuStats {
    CpuStats::from_bytes(&value[STATS_OFF..STATS_OFF + CpuStats::SIZE])
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::btf::types::{Composite, MemberAttr};
    use libbpf_rs::btf::Btf;

    fn members(btf: &Btf, name: &str) -> Vec<(String, usize)> {
        let s: Composite = btf.type_by_name(name).unwrap_or_else(|| panic!("no struct {name} in the BTF"));
        s.iter()
            .map(|m| {
                let MemberAttr::Normal { offset } = m.attr else { panic!("a bit field in {name}") };
                (m.name.unwrap().to_str().unwrap().to_string(), offset as usize / 8)
            })
            .collect()
    }

    #[test]
    fn user_space_reads_the_per_cpu_state_where_the_programs_write_it() {
        let obj = concat!(env!("OUT_DIR"), "/capture.bpf.o");
        let btf = Btf::from_path(obj).unwrap();
        let cpu = members(&btf, "hr_cpu");
        let at = |f: &str| cpu.iter().find(|m| m.0 == f).unwrap_or_else(|| panic!("hr_cpu.{f}")).1;
        assert_eq!(at("ring"), RING_OFF);
        assert_eq!(at("stats"), STATS_OFF);
        let stats = members(&btf, "hr_cpu_stats");
        assert_eq!(stats.last().map(|m| m.1 + 8), Some(CpuStats::SIZE));
        // Each counter's word, marked, must land in the field of its name.
        for (i, (name, off)) in stats.iter().enumerate() {
            let mut value = vec![0u8; STATS_OFF + CpuStats::SIZE];
            let mark = 1000 + i as u64;
            value[STATS_OFF + off..STATS_OFF + off + 8].copy_from_slice(&mark.to_le_bytes());
            let read = serde_json::to_value(stats_of(&value)).unwrap();
            let got = match &read[name] {
                serde_json::Value::Array(a) => a[0].as_u64(),
                v => v.as_u64(),
            };
            assert_eq!(got, Some(mark), "hr_cpu_stats.{name} at byte {off}: {read}");
        }
    }
}
