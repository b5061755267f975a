//! vs-falco's figures: medians per workload and setup, ratios against Falco
//! and against the empty-program floor, tables (printed and written to
//! `<out>/vs-falco.md`) and a chart (`<out>/vs-falco.png`).

use super::rate::Rates;
use super::work::{Sizes, Workload};
use super::{Opts, Sample, Samples, FALCO, FLOOR, FLOOR_NO_ENTRY, NONE, NO_ENTRY_COPIES};
use crate::report::{bar_panels, num, Table};
use crate::sensor::{Kind, StopReport};
use crate::workload::median;
use anyhow::Result;
use std::collections::BTreeMap;

pub struct Meta {
    pub falco_version: Option<String>,
    pub harrier_version: String,
    pub load_before: String,
    pub load_after: String,
    pub minutes: f64,
    pub sizes: Sizes,
    pub per_op: Vec<(Workload, f64)>,
}

/// ns per operation of one run.
fn ns_per_op(s: &Sample) -> f64 {
    s.done.secs * 1e9 / s.done.ops
}

fn med(v: impl Iterator<Item = f64>) -> f64 {
    median(&mut v.filter(|x| x.is_finite()).collect::<Vec<_>>())
}

/// A progress line for one run.
pub fn sample_line(w: Workload, s: &Sample) -> String {
    let mut line = format!("{:.0} {}s/s, {:.1} ns/{}", s.done.ops_per_s(), w.op(), ns_per_op(s), w.op());
    if let Some(st) = &s.stop {
        line += &format!(
            "; sensor CPU {:.0} ns/syscall, RSS {:.1} MB, {} drops, {} alerts; SIGINT: exit {:.2} s",
            s.cpu_s * 1e9 / s.done.syscalls,
            s.rss.median_kb as f64 / 1024.0,
            s.drops,
            s.alerts,
            st.gone.as_secs_f64()
        );
    }
    line
}

/// Medians of one (workload, setup).
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    pub ops_s: f64,
    pub ns_op: f64,
    /// Over no sensor, paired within each round (NaN for no sensor).
    pub added_ns: f64,
    pub cpu_ns_syscall: f64,
    pub bpf_ns_syscall: f64,
    pub rss_mb: f64,
    pub peak_mb: f64,
    /// Summed over the rounds.
    pub drops: u64,
    pub alerts: f64,
}

/// Median over rounds of (ns/op under the setup − ns/op with no sensor in
/// the same round): each pair ran minutes apart at most.
pub fn paired_added(runs: &[Sample], base: &[Sample]) -> f64 {
    paired(runs, base, ns_per_op)
}

/// Median over rounds of (f under the setup − f with no sensor in the same round).
fn paired(runs: &[Sample], base: &[Sample], f: fn(&Sample) -> f64) -> f64 {
    med(runs.iter().zip(base).map(|(r, b)| f(r) - f(b)))
}

/// BPF ns per workload syscall of one run: all its programs' time.
fn bpf_ns(s: &Sample) -> f64 {
    s.progs.iter().map(|p| p.run_time_ns).sum::<u64>() as f64 / s.done.syscalls
}

pub fn cell(runs: &[Sample], base: &[Sample], bpf: &[Sample], sensor: bool) -> Cell {
    Cell {
        ops_s: med(runs.iter().map(|s| s.done.ops_per_s())),
        ns_op: med(runs.iter().map(ns_per_op)),
        added_ns: if sensor { paired_added(runs, base) } else { f64::NAN },
        cpu_ns_syscall: if sensor {
            med(runs.iter().map(|s| s.cpu_s * 1e9 / s.done.syscalls))
        } else {
            f64::NAN
        },
        bpf_ns_syscall: med(bpf.iter().map(bpf_ns)),
        rss_mb: match sensor {
            true => med(runs.iter().filter(|s| s.rss.samples > 0).map(|s| s.rss.median_kb as f64 / 1024.0)),
            false => f64::NAN,
        },
        peak_mb: if sensor {
            runs.iter().map(|s| s.rss.peak_kb.max(s.hwm_kb) as f64 / 1024.0).fold(f64::NAN, f64::max)
        } else {
            f64::NAN
        },
        drops: runs.iter().map(|s| s.drops).sum(),
        alerts: if sensor { med(runs.iter().map(|s| s.alerts as f64)) } else { f64::NAN },
    }
}

/// "0.52×"; "-" when either side is missing or the base is not positive;
/// "< 0" when the value is below zero (an added cost within the noise).
pub fn ratio(a: f64, b: f64) -> String {
    match a.is_finite() && b.is_finite() && b > 0.0 {
        true if a < 0.0 => "< 0".into(),
        true => format!("{:.2}×", a / b),
        false => "-".into(),
    }
}

/// Per program name, medians over the BPF rounds: runs per workload
/// syscall, ns per run, ns per workload syscall. Programs that never ran
/// (tail-call targets: their time is their caller's) are left out.
pub fn programs(bpf: &[Sample]) -> Vec<(String, f64, f64, f64)> {
    let mut per: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for s in bpf {
        let mut by_name: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for p in &s.progs {
            let e = by_name.entry(&p.name).or_default();
            e.0 += p.run_cnt;
            e.1 += p.run_time_ns;
        }
        for (name, (cnt, ns)) in by_name.into_iter().filter(|(_, (c, _))| *c > 0) {
            let sys = s.done.syscalls;
            per.entry(name.to_string()).or_default().push((
                cnt as f64 / sys,
                ns as f64 / cnt as f64,
                ns as f64 / sys,
            ));
        }
    }
    let mut rows: Vec<_> = per
        .into_iter()
        .map(|(n, v)| {
            let m = |f: fn(&(f64, f64, f64)) -> f64| med(v.iter().map(f));
            (n, m(|x| x.0), m(|x| x.1), m(|x| x.2))
        })
        .collect();
    rows.sort_by(|a, b| b.3.total_cmp(&a.3));
    rows
}

/// Programs below this many ns per workload syscall are left out of the
/// per-program table (they are in the totals).
const MIN_PROG_NS: f64 = 0.1;

fn mb(v: f64) -> String {
    num(v, 1)
}

/// Sorted median and maximum of some seconds.
fn med_max(v: &[f64]) -> String {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return "-".into();
    }
    let max = v.iter().copied().fold(f64::MIN, f64::max);
    format!("{:.2} / {:.2}", median(&mut v), max)
}

pub fn write(o: &Opts, meta: &Meta, samples: &Samples, bpf: &Samples, rates: &[Rates]) -> Result<()> {
    let labels: Vec<&str> = o.setups.iter().map(|s| s.label.as_str()).collect();
    let at = |l: &str| labels.iter().position(|x| *x == l);
    let (none, falco, floor) = (at(NONE), at(FALCO), at(FLOOR));
    // Every Harrier setup but a floor is compared with the floor of its attach.
    let floors = [floor, at(FLOOR_NO_ENTRY)];
    let floor_of: Vec<Option<usize>> = (0..labels.len())
        .map(|si| match o.setups[si].kind == Some(Kind::Harrier) && !floors.contains(&Some(si)) {
            true if labels[si] == NO_ENTRY_COPIES => floors[1],
            true => floor,
            false => None,
        })
        .collect();
    let falco_name = meta.falco_version.clone().unwrap_or_else(|| "Falco".into());
    let cells: Vec<Vec<Cell>> = o
        .workloads
        .iter()
        .enumerate()
        .map(|(wi, _)| {
            (0..labels.len())
                .map(|si| {
                    let base = none.map_or(&[][..], |n| &samples[wi][n][..]);
                    cell(&samples[wi][si], base, &bpf[wi][si], o.setups[si].kind.is_some())
                })
                .collect()
        })
        .collect();
    let vs = |c: &[Cell], si: usize, f: fn(&Cell) -> f64| match falco {
        Some(fi) if fi != si && o.setups[si].kind.is_some() => ratio(f(&c[si]), f(&c[fi])),
        _ => String::new(),
    };

    let mut app = Table {
        header: ["workload", "sensor", "ops/s", "ns/op", "added ns/op", "× Falco's", "× floor's"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
    let mut cost = Table {
        header: [
            "workload",
            "sensor",
            "sensor CPU ns/syscall",
            "× Falco",
            "BPF ns/syscall",
            "× Falco",
            "RSS MB median",
            "RSS MB peak",
            "× Falco (median)",
            "drops",
            "alerts",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    let mut chart = Vec::new();
    for (wi, w) in o.workloads.iter().enumerate() {
        let c = &cells[wi];
        let mut bars = Vec::new();
        for (si, label) in labels.iter().enumerate() {
            let sensor = o.setups[si].kind.is_some();
            let name = if Some(si) == falco { falco_name.clone() } else { label.to_string() };
            let to_floor = match floor_of[si] {
                Some(fl) => ratio(c[si].added_ns, c[fl].added_ns),
                None => String::new(),
            };
            app.rows.push(vec![
                format!("{} ({}s)", w.name(), w.op()),
                name.clone(),
                num(c[si].ops_s, 0),
                num(c[si].ns_op, 1),
                if sensor { format!("{:+.1}", c[si].added_ns) } else { String::new() },
                vs(c, si, |c| c.added_ns),
                to_floor,
            ]);
            if !sensor {
                continue;
            }
            bars.push((name.clone(), c[si].added_ns));
            let empty = floors.contains(&Some(si));
            cost.rows.push(vec![
                w.name().into(),
                name,
                num(c[si].cpu_ns_syscall, 1),
                vs(c, si, |c| c.cpu_ns_syscall),
                num(c[si].bpf_ns_syscall, 1),
                vs(c, si, |c| c.bpf_ns_syscall),
                mb(c[si].rss_mb),
                mb(c[si].peak_mb),
                if empty { String::new() } else { vs(c, si, |c| c.rss_mb) },
                c[si].drops.to_string(),
                num(c[si].alerts, 0),
            ]);
        }
        chart.push((
            format!("{}: added ns per {}", w.name(), w.op()),
            format!("ns per {} over no sensor", w.op()),
            bars,
        ));
    }

    let mut progs = Table {
        header: ["workload", "sensor", "program", "runs/syscall", "ns/run", "ns/syscall"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
    for (wi, w) in o.workloads.iter().enumerate() {
        for (si, label) in labels.iter().enumerate() {
            for (name, runs, ns_run, ns_sys) in
                programs(&bpf[wi][si]).into_iter().filter(|p| p.3 >= MIN_PROG_NS)
            {
                let who = if Some(si) == falco { falco_name.clone() } else { label.to_string() };
                progs.rows.push(vec![
                    w.name().into(),
                    who,
                    name,
                    num(runs, 3),
                    num(ns_run, 1),
                    num(ns_sys, 1),
                ]);
            }
        }
    }

    let best_falco = rates.iter().find(|r| r.label == FALCO).and_then(Rates::best);
    let rate_table = Table {
        header: [
            "sensor (1 CPU quota)",
            "highest drop-free syscalls/s",
            "× Falco",
            "steps: rate reached (drops)",
        ]
        .map(String::from)
        .to_vec(),
        rows: rates
            .iter()
            .map(|r| {
                let best = r.best().map_or("none clean".into(), |b| {
                    format!("{b:.0}{}", if r.load_bound() { " (load-bound: no step dropped)" } else { "" })
                });
                let steps: Vec<String> =
                    r.steps.iter().map(|s| format!("{:.0} ({})", s.rate, s.drops)).collect();
                let x = if r.label == FALCO {
                    String::new()
                } else {
                    ratio(r.best().unwrap_or(f64::NAN), best_falco.unwrap_or(f64::NAN))
                };
                let who = if r.label == FALCO { falco_name.clone() } else { r.label.clone() };
                vec![who, best, x, steps.join(", ")]
            })
            .collect(),
    };

    let mut stop = Table {
        header: [
            "sensor",
            "stops",
            "SIGINT → final stats, s (median / max)",
            "SIGINT → exit, s (median / max)",
            "killed",
            "BPF programs / links / maps left (max)",
            "start-up to ready, s (median)",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for (si, label) in labels.iter().enumerate().filter(|(si, _)| o.setups[*si].kind.is_some()) {
        let all: Vec<&Sample> = samples.iter().chain(bpf).flat_map(|w| &w[si]).collect();
        let stops: Vec<_> = all.iter().filter_map(|s| s.stop.as_ref()).collect();
        let fin: Vec<f64> =
            stops.iter().map(|s| s.final_stats.map_or(f64::NAN, |d| d.as_secs_f64())).collect();
        let never = fin.iter().filter(|f| f.is_nan()).count();
        let gone: Vec<f64> = stops.iter().map(|s| s.gone.as_secs_f64()).collect();
        let most = |f: fn(&&StopReport) -> usize| stops.iter().map(f).max().unwrap_or(0);
        let left = (most(|s| s.left_progs), most(|s| s.left_links), most(|s| s.left_maps));
        let mut startup: Vec<f64> = all.iter().map(|s| s.startup.as_secs_f64()).collect();
        let who = if Some(si) == falco { falco_name.clone() } else { label.to_string() };
        stop.rows.push(vec![
            who,
            stops.len().to_string(),
            med_max(&fin) + &if never > 0 { format!(" ({never} without)") } else { String::new() },
            med_max(&gone),
            stops.iter().filter(|s| s.killed).count().to_string(),
            format!("{} / {} / {}", left.0, left.1, left.2),
            num(median(&mut startup), 2),
        ]);
    }

    let sz = &meta.sizes;
    let per_op: Vec<String> = meta
        .per_op
        .iter()
        .filter(|p| p.1.is_finite())
        .map(|(w, n)| format!("{} {n:.1} per {}", w.name(), w.op()))
        .collect();
    let mut md = format!(
        "`harrier-bench vs-falco`: {} {}, the same rules for both ({}); load average {} at the start, {} at the end; \
         {:.0} min. Medians of {} interleaved rounds (each round rotates the order of the setups); added ns/op is \
         the median of each round's difference to the no-sensor run of the same workload and round. BPF ns from a \
         separate pass with BPF run-time stats on ({} rounds; the stats' own clock reads are in those figures). \
         Workloads: mix = {:.0} s of open/close/ENOENT open/UDP connect (10 syscalls per iteration) with a \
         fork+exec of /bin/true every {} iterations; redis = redis-benchmark -t {} -q -n {}; getpid = {} raw \
         getpid calls; exec = a shell loop running /bin/true {} times. Syscalls per op (counted once with no \
         sensor): {}. Sensor CPU is its process tree's user + system time over the workload's syscalls (the \
         sensors also see the rest of the machine's syscalls).\n\n{}\n{}\n",
        meta.harrier_version,
        o.falco.as_ref().map_or("alone (no --falco given)".into(), |(f, c)| {
            format!("vs {falco_name} ({} -c {})", f.display(), c.display())
        }),
        o.rules.join(", "),
        meta.load_before,
        meta.load_after,
        meta.minutes,
        o.rounds,
        o.bpf_rounds,
        sz.mix.as_secs_f64(),
        sz.exec_every,
        crate::capture::REDIS_TESTS,
        sz.redis_requests,
        sz.getpid_calls,
        sz.execs,
        if per_op.is_empty() { "-".into() } else { per_op.join(", ") },
        app.markdown(),
        cost.markdown(),
    );
    if !progs.rows.is_empty() {
        md += &format!(
            "\nBPF programs each sensor holds (by owner), with run-time stats on (those under {MIN_PROG_NS} ns \
             per syscall left out; tail-called programs count in their caller):\n\n{}",
            progs.markdown()
        );
    }
    if !rates.is_empty() {
        md += &format!("\nHighest drop-free rate of the mix, sensor in a 1-CPU cgroup quota, load on the last CPU:\n\n{}", rate_table.markdown());
    }
    let mix = o.workloads.iter().position(|w| *w == Workload::Mix);
    let names: Vec<String> = labels
        .iter()
        .enumerate()
        .map(|(si, l)| if Some(si) == falco { falco_name.clone() } else { l.to_string() })
        .collect();
    let columns = mix_cpu::Columns { none, falco, floor_of };
    if let Some(t) = mix.and_then(|wi| mix_cpu::table(&names, &samples[wi], &columns)) {
        md += &format!(
            "\nThe mix as its own thread's CPU time (user + system, the same runs; the programs' work is \
             charged to the thread that made the syscall, waiting for a CPU is not; added: the median of each \
             round's difference to no sensor):\n\n{}",
            t.markdown()
        );
    }
    if let Some(t) = mix.and_then(|wi| mix_cpu::spread(&names, &samples[wi], &columns)) {
        md += &format!(
            "\nThe mix, each round's added cost over its floor's in the same round:\n\n{}",
            t.markdown()
        );
    }
    if let Some(t) =
        mix.zip(none).and_then(|(wi, n)| interval::table(&names, &samples[wi], n, &columns.floor_of))
    {
        md += &format!(
            "\nThe mix's × floor's, how sure: the central 95% of that ratio over {} resamples of the rounds \
             (a bootstrap: rounds drawn whole, with replacement; a range that spans a target means this run \
             does not decide it):\n\n{}",
            interval::RESAMPLES,
            t.markdown()
        );
    }
    if let Some(t) = mix.and_then(|wi| mix_cpu::beyond(&names, &samples[wi], &bpf[wi], &columns)) {
        md += &format!(
            "\nThe mix's added thread CPU over its floor's, ns per syscall, and how much of it the programs' \
             own run time explains (the stats pass; the stats' clock reads cancel against the floor's): the \
             rest is what the programs' work costs the syscall outside them:\n\n{}",
            t.markdown()
        );
    }
    if let Some(t) = mix.and_then(|wi| deferred::table(&names, &samples[wi], &columns)) {
        md += &format!(
            "\nThe kernel's deferred work during the mix: the ksoftirqd threads' CPU time. The mix frees a UDP \
             socket per iteration by RCU callbacks, which the kernel runs in the mix's own softirqs (its \
             thread's CPU time) or in ksoftirqd (wall time only), varying with the workload and from round to \
             round; counted back:\n\n{}",
            t.markdown()
        );
    }
    md += &format!("\nStopping with SIGINT (every run above):\n\n{}", stop.markdown());
    println!("{md}");
    std::fs::create_dir_all(&o.out)?;
    std::fs::write(o.out.join("vs-falco.md"), &md)?;
    bar_panels(&o.out.join("vs-falco.png"), "Added cost per operation over no sensor (medians)", &chart)?;
    eprintln!("vs-falco: wrote {}/vs-falco.md and vs-falco.png", o.out.display());
    Ok(())
}

mod deferred;
mod interval;
mod mix_cpu;

#[cfg(test)]
mod tests;
