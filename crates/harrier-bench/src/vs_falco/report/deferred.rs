//! The kernel's deferred work during the mix (ksoftirqd, softirqd.rs): how
//! much of each setup's rounds went there, and the mix thread's CPU time
//! with it, which is what the mix's syscalls cost whichever way the kernel
//! ran its RCU callbacks.

use super::mix_cpu::{added, cpu_ns, Columns};
use super::{med, ratio};
use crate::report::{num, Table};
use crate::vs_falco::Sample;

/// ksoftirqd's CPU ns per mix syscall in one run (NaN if not measured).
fn softirqd_ns(s: &Sample) -> f64 {
    match s.done.load_cpu_s > 0.0 {
        true => s.done.softirqd_s * 1e9 / s.done.syscalls,
        false => f64::NAN,
    }
}

fn with_softirqd_ns(s: &Sample) -> f64 {
    cpu_ns(s) + softirqd_ns(s)
}

/// One row per setup; None without a no-sensor column or CPU figures.
pub fn table(names: &[String], runs: &[Vec<Sample>], c: &Columns) -> Option<Table> {
    let added = added(runs, c, with_softirqd_ns)?;
    let rows = names
        .iter()
        .enumerate()
        .map(|(si, name)| {
            let mut v: Vec<f64> = runs[si].iter().map(softirqd_ns).filter(|x| x.is_finite()).collect();
            v.sort_by(f64::total_cmp);
            let spread = match (v.first(), v.last()) {
                (Some(lo), Some(hi)) => format!("{} ({lo:.1} / {hi:.1})", num(med(v.iter().copied()), 1)),
                _ => "-".into(),
            };
            let sensor = Some(si) != c.none;
            let floor = c.floor_of.get(si).copied().flatten().filter(|_| sensor);
            vec![
                name.clone(),
                spread,
                if sensor { format!("{:+.1}", added[si]) } else { String::new() },
                floor.map_or(String::new(), |f| ratio(added[si], added[f])),
            ]
        })
        .collect();
    let header = [
        "sensor",
        "ksoftirqd CPU ns per mix syscall: median (lowest / highest round)",
        "mix thread + ksoftirqd CPU, added",
        "× floor's",
    ];
    Some(Table { header: header.map(String::from).to_vec(), rows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vs_falco::work::Done;

    fn run(thread_ns: f64, softirqd_ns: f64) -> Sample {
        let done = Done {
            ops: 1e6,
            secs: 1.0,
            syscalls: 1e6,
            load_cpu_s: thread_ns * 1e-3,
            softirqd_s: softirqd_ns * 1e-3,
        };
        Sample { done, ..Sample::default() }
    }

    #[test]
    fn work_moved_to_ksoftirqd_still_counts_against_the_setup() {
        let names = ["none", "harrier", "floor"].map(String::from);
        // Rounds 2 and 3: harrier's RCU callbacks ran in ksoftirqd, 40 ns
        // per syscall its thread no longer sees; counted back, +300 each round.
        let runs = vec![
            vec![run(1000.0, 2.0), run(1000.0, 2.0), run(1000.0, 2.0)],
            vec![run(1300.0, 2.0), run(1260.0, 42.0), run(1260.0, 42.0)],
            vec![run(1200.0, 2.0), run(1200.0, 2.0), run(1200.0, 2.0)],
        ];
        let c = Columns { none: Some(0), falco: None, floor_of: vec![None, Some(2), None] };
        let t = table(&names, &runs, &c).expect("a table");
        assert_eq!(t.rows[1], ["harrier", "42.0 (2.0 / 42.0)", "+300.0", "1.50×"].map(String::from));
        assert_eq!(t.rows[0][2..], ["", ""].map(String::from));
        assert_eq!(t.rows[2][3], "", "a floor has no floor");
    }
}
