//! The mix's cost as its own thread's CPU time: a sensor's programs run in
//! the syscall and are charged to the thread that made it, while time spent
//! waiting for a CPU (the sensor's user space, the machine's other load) is
//! not. Wall-clock ns/op swings with that load on a shared 2-CPU machine;
//! this measure of the same runs resolves what the sensor adds per syscall.

use super::{med, paired, ratio};
use crate::report::{num, Table};
use crate::vs_falco::Sample;

/// The mix thread's CPU ns per syscall of one run (NaN if not measured).
pub fn cpu_ns(s: &Sample) -> f64 {
    match s.done.load_cpu_s > 0.0 {
        true => s.done.load_cpu_s * 1e9 / s.done.syscalls,
        false => f64::NAN,
    }
}

/// Setup indices of the comparison's fixed columns.
pub struct Columns {
    pub none: Option<usize>,
    pub falco: Option<usize>,
    /// Per setup, the floor it is compared with (Harrier's, but the floors).
    pub floor_of: Vec<Option<usize>>,
}

/// Per setup, what it adds to `f` over no sensor (paired per round); None
/// without a no-sensor column or any figure of `f`.
pub fn added(runs: &[Vec<Sample>], c: &Columns, f: fn(&Sample) -> f64) -> Option<Vec<f64>> {
    let base = &runs[c.none?];
    if base.iter().all(|s| f(s).is_nan()) {
        return None;
    }
    Some(runs.iter().map(|r| paired(r, base, f)).collect())
}

/// One row per setup of the mix's runs (`runs[setup]`); None without a
/// no-sensor column or CPU figures.
pub fn table(names: &[String], runs: &[Vec<Sample>], c: &Columns) -> Option<Table> {
    let added = added(runs, c, cpu_ns)?;
    let rows = names
        .iter()
        .enumerate()
        .map(|(si, name)| {
            let sensor = Some(si) != c.none;
            let vs = |other: Option<usize>| match other {
                Some(o) if o != si && sensor => ratio(added[si], added[o]),
                _ => String::new(),
            };
            vec![
                name.clone(),
                num(med(runs[si].iter().map(cpu_ns)), 1),
                if sensor { format!("{:+.1}", added[si]) } else { String::new() },
                vs(c.falco),
                vs(c.floor_of.get(si).copied().flatten()),
            ]
        })
        .collect();
    let header = ["sensor", "mix thread CPU ns/syscall", "added", "× Falco's", "× floor's"];
    Some(Table { header: header.map(String::from).to_vec(), rows })
}

/// Per round, each setup's added cost over its floor's in the same round,
/// in wall and thread CPU time: the rounds' lowest, median and highest.
/// The medians' ratio swings with the floor's own noise; this shows how far.
/// A round whose floor added nothing measurable is left out.
pub fn spread(names: &[String], runs: &[Vec<Sample>], c: &Columns) -> Option<Table> {
    let base = &runs[c.none?];
    let per_round = |si: usize, fl: usize, f: fn(&Sample) -> f64| -> Vec<f64> {
        let rounds = runs[si].iter().zip(&runs[fl]).zip(base);
        let over = |((s, fl), b): ((&Sample, &Sample), &Sample)| {
            let floor = f(fl) - f(b);
            (floor > 0.0).then(|| (f(s) - f(b)) / floor)
        };
        let mut v: Vec<f64> = rounds.filter_map(over).filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let show = |v: Vec<f64>| match (v.first(), v.last()) {
        (Some(lo), Some(hi)) => format!("{lo:.2}× / {:.2}× / {hi:.2}×", med(v.iter().copied())),
        _ => "-".to_string(),
    };
    let rows: Vec<Vec<String>> = names
        .iter()
        .enumerate()
        .filter_map(|(si, name)| {
            let fl = c.floor_of.get(si).copied().flatten()?;
            let wall = show(per_round(si, fl, super::ns_per_op));
            Some(vec![name.clone(), wall, show(per_round(si, fl, cpu_ns))])
        })
        .collect();
    let header = ["sensor", "× floor's per round, wall: lowest / median / highest", "thread CPU: the same"];
    (!rows.is_empty()).then(|| Table { header: header.map(String::from).to_vec(), rows })
}

/// Per setup with a floor: what it adds to the mix thread's CPU time beyond
/// its floor's, split into its programs' own run time beyond the floor's
/// (the stats pass, `bpf`: medians) and the rest, which the programs leave
/// behind in the syscall's own path (caches, predictors) or cause elsewhere
/// in it. None without CPU or BPF figures.
pub fn beyond(names: &[String], runs: &[Vec<Sample>], bpf: &[Vec<Sample>], c: &Columns) -> Option<Table> {
    let added = added(runs, c, cpu_ns)?;
    let bpf_med = |si: usize| bpf.get(si).map_or(f64::NAN, |r| med(r.iter().map(super::bpf_ns)));
    let rows: Vec<Vec<String>> = names
        .iter()
        .enumerate()
        .filter_map(|(si, name)| {
            let fl = c.floor_of.get(si).copied().flatten()?;
            let (cpu, progs) = (added[si] - added[fl], bpf_med(si) - bpf_med(fl));
            (cpu.is_finite() && progs.is_finite()).then(|| {
                vec![
                    name.clone(),
                    format!("{cpu:+.1}"),
                    format!("{progs:+.1}"),
                    format!("{:+.1}", cpu - progs),
                ]
            })
        })
        .collect();
    let header =
        ["sensor", "thread CPU over the floor's", "its programs' run time over the floor's", "the rest"];
    (!rows.is_empty()).then(|| Table { header: header.map(String::from).to_vec(), rows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vs_falco::work::Done;

    fn run(cpu_ns_per_syscall: f64) -> Sample {
        let done = Done {
            ops: 1e6,
            secs: 1.0,
            syscalls: 1e6,
            load_cpu_s: cpu_ns_per_syscall * 1e-3,
            ..Done::default()
        };
        Sample { done, ..Sample::default() }
    }

    #[test]
    fn added_cpu_is_paired_per_round_and_compared_with_falco_and_the_floor() {
        let names = ["none", "Falco", "harrier", "floor"].map(String::from);
        // Round 2 is a slower machine for everyone: pairing cancels it.
        let runs = vec![
            vec![run(1000.0), run(2000.0)],
            vec![run(1500.0), run(2500.0)],
            vec![run(1300.0), run(2300.0)],
            vec![run(1200.0), run(2200.0)],
        ];
        let c = Columns { none: Some(0), falco: Some(1), floor_of: vec![None, None, Some(3), None] };
        let t = table(&names, &runs, &c).expect("a table");
        assert_eq!(t.rows[2][2..], ["+300.0", "0.60×", "1.50×"].map(String::from));
        assert_eq!(t.rows[3][2..], ["+200.0", "0.40×", ""].map(String::from));
        assert_eq!(t.rows[0][2..], ["", "", ""].map(String::from));
    }

    #[test]
    fn the_rounds_ratios_to_their_floor_show_their_spread() {
        let names = ["none", "harrier", "floor"].map(String::from);
        // Added CPU: harrier +300, +200, +400 over the floor's +200, +100, +300.
        let runs = vec![
            vec![run(1000.0), run(1000.0), run(1000.0)],
            vec![run(1300.0), run(1200.0), run(1400.0)],
            vec![run(1200.0), run(1100.0), run(1300.0)],
        ];
        let c = Columns { none: Some(0), falco: None, floor_of: vec![None, Some(2), None] };
        let t = spread(&names, &runs, &c).expect("a table");
        assert_eq!(t.rows.len(), 1, "only the setups with a floor");
        // Wall time is the same in every run: its floor added nothing, no ratio.
        assert_eq!(t.rows[0], ["harrier", "-", "1.33× / 1.50× / 2.00×"].map(String::from));
    }

    #[test]
    fn no_table_without_cpu_figures() {
        let runs = vec![vec![Sample::default()], vec![Sample::default()]];
        let c = Columns { none: Some(0), falco: None, floor_of: vec![None, None] };
        assert!(table(&["a".into(), "b".into()], &runs, &c).is_none());
    }

    #[test]
    fn what_the_programs_run_time_leaves_over_is_the_rest() {
        let names = ["none", "harrier", "floor"].map(String::from);
        let runs = vec![vec![run(1000.0)], vec![run(1300.0)], vec![run(1100.0)]];
        let progs = |ns: u64| {
            let mut s = run(0.0);
            s.progs =
                vec![crate::sensor::bpf::ProgStat { run_time_ns: ns * 1_000_000, ..Default::default() }];
            s
        };
        let bpf = vec![vec![run(0.0)], vec![progs(150)], vec![progs(80)]];
        let c = Columns { none: Some(0), falco: None, floor_of: vec![None, Some(2), None] };
        let t = beyond(&names, &runs, &bpf, &c).expect("a table");
        // +300 - +100 of CPU over the floor, +70 of it in the programs.
        assert_eq!(t.rows, vec![["harrier", "+200.0", "+70.0", "+130.0"].map(String::from).to_vec()]);
        assert!(beyond(&names, &runs, &[vec![], vec![], vec![]], &c).is_none(), "no stats pass, no table");
    }
}
