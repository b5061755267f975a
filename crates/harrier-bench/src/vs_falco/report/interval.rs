//! How sure a ratio to the floor is. On a shared host the same binary's
//! "× floor's" has ranged from 1.26× to 2.33× between runs (vs-falco.md):
//! a ratio of two medians of small differences moves with every round. A
//! bootstrap over the rounds (resampled whole, so each keeps its setups'
//! pairing) gives the range the table's own statistic falls in: a target
//! inside that range is one this run does not decide.

use super::{med, mix_cpu::cpu_ns, ns_per_op};
use crate::report::Table;
use crate::vs_falco::Sample;

pub const RESAMPLES: usize = 4000;
/// Fixed: the same runs give the same interval.
const SEED: u64 = 0x5eed_f100;

/// The central 95% of the table's statistic (the median over rounds of the
/// setup's added cost, over the same of its floor's; each paired with no
/// sensor in its round) over resampled rounds. None for fewer than 3 rounds
/// or when the floor added nothing measurable.
pub fn ratio_interval(
    s: &[Sample],
    floor: &[Sample],
    base: &[Sample],
    f: fn(&Sample) -> f64,
) -> Option<(f64, f64)> {
    let added = |v: &[Sample]| v.iter().zip(base).map(|(r, b)| f(r) - f(b)).collect::<Vec<f64>>();
    let (a, fl) = (added(s), added(floor));
    let n = a.len().min(fl.len());
    if n < 3 {
        return None;
    }
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut idx = vec![0; n];
    let mut stats: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            idx.iter_mut().for_each(|i| *i = rng.usize(..n));
            med(idx.iter().map(|&i| a[i])) / med(idx.iter().map(|&i| fl[i]))
        })
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if stats.len() < RESAMPLES * 9 / 10 {
        return None;
    }
    stats.sort_by(f64::total_cmp);
    let at = |q: f64| stats[((stats.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

fn show(iv: Option<(f64, f64)>) -> String {
    iv.map_or("-".into(), |(lo, hi)| format!("{lo:.2}× – {hi:.2}×"))
}

/// Per setup with a floor: the 95% interval of its × floor's, wall and
/// thread CPU. `runs[setup]`, `none`: the no-sensor column.
pub fn table(
    names: &[String],
    runs: &[Vec<Sample>],
    none: usize,
    floor_of: &[Option<usize>],
) -> Option<Table> {
    let base = &runs[none];
    let rows: Vec<Vec<String>> = names
        .iter()
        .enumerate()
        .filter_map(|(si, name)| {
            let fl = &runs[floor_of.get(si).copied().flatten()?];
            let cpu = match base.iter().any(|s| cpu_ns(s).is_finite()) {
                true => show(ratio_interval(&runs[si], fl, base, cpu_ns)),
                false => "-".into(),
            };
            Some(vec![name.clone(), show(ratio_interval(&runs[si], fl, base, ns_per_op)), cpu])
        })
        .collect();
    let header = ["sensor", "× floor's, wall: 95% of resampled rounds", "thread CPU: the same"];
    (!rows.is_empty()).then(|| Table { header: header.map(String::from).to_vec(), rows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vs_falco::work::Done;

    fn run(ns_per_syscall: f64) -> Sample {
        let done = Done { ops: 1e6, secs: ns_per_syscall * 1e-3, syscalls: 1e6, ..Done::default() };
        Sample { done, ..Sample::default() }
    }

    fn rounds(v: &[f64]) -> Vec<Sample> {
        v.iter().copied().map(run).collect()
    }

    #[test]
    fn steady_rounds_give_a_narrow_interval_around_the_ratio() {
        let base = rounds(&[1000.0; 9]);
        let floor = rounds(&[1200.0, 1201.0, 1199.0, 1200.0, 1202.0, 1198.0, 1200.0, 1201.0, 1199.0]);
        let s = rounds(&[1300.0, 1301.0, 1299.0, 1300.0, 1302.0, 1298.0, 1300.0, 1301.0, 1299.0]);
        let (lo, hi) = ratio_interval(&s, &floor, &base, ns_per_op).unwrap();
        assert!(lo > 1.45 && hi < 1.55 && lo <= hi, "{lo} {hi}");
    }

    #[test]
    fn a_noisy_floor_widens_the_interval_past_both_sides_of_the_ratio() {
        let base = rounds(&[1000.0; 9]);
        let floor = rounds(&[1100.0, 1400.0, 1150.0, 1350.0, 1200.0, 1300.0, 1120.0, 1380.0, 1200.0]);
        let s = rounds(&[1300.0; 9]);
        let (lo, hi) = ratio_interval(&s, &floor, &base, ns_per_op).unwrap();
        assert!(lo < 1.3 && hi > 2.0, "{lo} {hi}");
    }

    #[test]
    fn too_few_rounds_say_nothing() {
        let r = rounds(&[1000.0, 1100.0]);
        assert!(ratio_interval(&r, &r, &r, ns_per_op).is_none());
    }
}
