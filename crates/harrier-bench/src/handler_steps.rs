//! `harrier-bench handler-steps` (make bench-steps): where the vs-falco
//! mix's BPF time goes, per program and per step. The mix (openat+close of
//! files 4 names deep, an ENOENT openat, UDP socket+connect+close) runs on
//! one CPU under a capture of its four syscalls collecting and filtering
//! what `harrier run` would for Falco's stable rules. Each run times the steps
//! of one syscall's handlers (bpf/include/steps.h: a clock read at the end
//! of each step, one read's own cost taken off); one more run per round has
//! run-time stats on for each program's whole cost. Runs rotate per round.

use crate::report::{bar_panels, num, Table};
use crate::rules_load::load::Load;
use crate::workload::median;
use anyhow::{bail, Result};
use harrier_capture::{parse_syscalls, Config, Session};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds of the mix per run.
    #[arg(long, default_value_t = 4.0)]
    secs: f64,
    /// Rule file the kernel filter is derived from (default: Falco's stable rules).
    #[arg(long)]
    rules: Option<String>,
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
}

const SYSCALLS: &str = "openat,close,socket,connect";
/// steps.h's numbering: (step, program side, what ends there).
const STEPS: &[(usize, Side, &str)] = &[
    (8, Side::Enter, "task storage (made on first use)"),
    (9, Side::Enter, "copy the path / sockaddr from user memory"),
    (0, Side::Exit, "begin: early filter, CPU state, task, clock, ring room, header"),
    (1, Side::Exit, "find the entry copy (task storage)"),
    (2, Side::Exit, "arguments and the copied path, up to the walk"),
    (3, Side::Exit, "kernel path of the new fd (walk, path cache)"),
    (6, Side::Exit, "the fields after the walk (all of them if none)"),
    (4, Side::Exit, "kernel filter (and enforcement)"),
    (5, Side::Exit, "publish (or discard)"),
];
const CLOCK_STEP: usize = 15;

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Enter,
    Exit,
}

/// One timed run: per step, ns per mark (clock taken off) and marks per
/// handler run; or the whole-program figures of the stats run.
#[derive(Default, Clone)]
struct Run {
    steps: Vec<(f64, u64)>,
    clock_ns: f64,
    /// (program, ns per run, runs per syscall of the mix).
    programs: Vec<(String, f64, f64)>,
}

/// What `harrier run` would collect and filter for these rules.
struct Derived {
    filter: harrier_capture::kfilter::KernelFilter,
    collect: harrier_capture::collect::Collect,
}

fn derive(rules: &str) -> Result<Derived> {
    let set = crate::rules_load::load_rules(&[rules.to_string()])?;
    let syscalls = parse_syscalls(SYSCALLS)?;
    Ok(Derived {
        filter: harrier_engine::kfilter::derive(&set, &syscalls, &[]),
        collect: harrier_engine::collect::collect(&set, &syscalls, harrier_engine::needs_env(&set)),
    })
}

/// The mix for `secs` under one capture: step clocks on `nr`, or run-time stats.
fn measure(d: &Derived, nr: Option<u32>, secs: f64) -> Result<Run> {
    let mut cfg = Config::new(parse_syscalls(SYSCALLS)?);
    cfg.pid = Some(std::process::id());
    cfg.kernel_filter = Some(d.filter.clone());
    cfg.collect = d.collect.clone();
    cfg.step_clock = nr;
    cfg.run_time_stats = nr.is_none();
    let mut s = Session::start_counting(&cfg)?;
    let load = Load::start(Some(0), u64::MAX)?;
    load.set_rate(crate::rules_load::load::MAX);
    let t = Instant::now();
    let mut pace = s.pace();
    while t.elapsed() < Duration::from_secs_f64(secs) {
        s.sleep_and_drain(&mut pace)?;
    }
    let issued = load.issued() as f64;
    load.finish()?;
    let sums = s.step_sums()?;
    let st = s.stop()?;
    if st.kernel_total().dropped() > 0 {
        bail!("{} events dropped: not every handler ran its whole path", st.kernel_total().dropped());
    }
    let (cns, cn) = sums[CLOCK_STEP];
    let clock_ns = if cn > 0 { cns as f64 / cn as f64 } else { 0.0 };
    let steps = sums
        .iter()
        .map(|&(ns, n)| (if n > 0 { ns as f64 / n as f64 - clock_ns } else { f64::NAN }, n))
        .collect();
    let programs = st
        .programs
        .iter()
        .filter(|p| p.run_cnt > 0 && (p.name.starts_with("hr_exit_") || p.name.starts_with("hr_enter_")))
        .map(|p| (p.name.clone(), p.avg_ns(), p.run_cnt as f64 / issued))
        .collect();
    Ok(Run { steps, clock_ns, programs })
}

pub fn run(a: Args) -> Result<()> {
    let rules = match &a.rules {
        Some(r) => r.clone(),
        None => crate::rules_load::stable_rules()?,
    };
    let derived = derive(&rules)?;
    let timed = parse_syscalls(SYSCALLS)?;
    // Setups: one per timed syscall, then the stats run.
    let setups: Vec<Option<&'static harrier_schema::SyscallInfo>> =
        timed.iter().copied().map(Some).chain([None]).collect();
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); setups.len()];
    for r in 0..a.rounds {
        for k in 0..setups.len() {
            let i = (k + r) % setups.len();
            let label = setups[i].map_or("run-time stats".to_string(), |s| format!("{}'s steps", s.name));
            eprintln!("handler-steps: round {}/{}, {label}", r + 1, a.rounds);
            runs[i].push(measure(&derived, setups[i].map(|s| s.nr), a.secs)?);
        }
    }
    report(&a, &rules, &setups, &runs)
}

fn med(v: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = v.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        f64::NAN
    } else {
        median(&mut v)
    }
}

fn report(
    a: &Args,
    rules: &str,
    setups: &[Option<&'static harrier_schema::SyscallInfo>],
    runs: &[Vec<Run>],
) -> Result<()> {
    let stats = runs.last().expect("the stats run");
    let program = |name: &str| -> (f64, f64) {
        let f = |i: usize| {
            med(stats.iter().filter_map(|r| r.programs.iter().find(|p| p.0 == name)).map(|p| [p.1, p.2][i]))
        };
        (f(0), f(1))
    };
    let mut rows = Vec::new();
    let mut panels = Vec::new();
    for (s, rs) in setups.iter().zip(runs).filter_map(|(s, r)| s.map(|s| (s, r))) {
        for side in [Side::Enter, Side::Exit] {
            let prog = format!("hr_{}_{}", if side == Side::Enter { "enter" } else { "exit" }, s.name);
            let (total, per_syscall) = program(&prog);
            if !total.is_finite() {
                continue;
            }
            let mut bars = Vec::new();
            let mut sum = 0.0;
            let begins = med(rs.iter().map(|r| r.steps[if side == Side::Enter { 8 } else { 0 }].1 as f64));
            for &(step, _, what) in STEPS.iter().filter(|x| x.1 == side) {
                let ns = med(rs.iter().map(|r| r.steps[step].0));
                let share = med(rs.iter().map(|r| r.steps[step].1 as f64)) / begins;
                if !ns.is_finite() {
                    continue;
                }
                // Per handler run: a step some runs skip (a failed open's walk) weighs less.
                sum += ns * share;
                rows.push(vec![prog.clone(), what.into(), num(ns, 1), share_text(share)]);
                bars.push((what.to_string(), ns * share));
            }
            rows.push(vec![prog.clone(), "**sum of the steps, per run**".into(), num(sum, 1), String::new()]);
            rows.push(vec![
                prog.clone(),
                format!("whole program with run-time stats ({} runs per mix syscall)", num(per_syscall, 3)),
                num(total, 1),
                String::new(),
            ]);
            panels.push((prog.clone(), "ns per run of the program".to_string(), bars));
        }
    }
    let clock = med(runs.iter().flatten().map(|r| r.clock_ns).filter(|c| *c > 0.0));
    let header = ["program", "step", "ns per mark", "runs with the step"];
    let table = Table { header: header.map(String::from).to_vec(), rows };
    let md = format!(
        "`harrier-bench handler-steps`: the vs-falco mix (openat+close of files 4 names deep, an ENOENT openat, UDP \
         socket+connect+close; {SYSCALLS} captured for this process with what `harrier run` collects and filters for {rules}) on one \
         CPU, {} s per run, medians of {} interleaved rounds; kernel {}. Each step's figure is the clock at its end \
         less the clock at the previous step's end, less one clock read ({} ns, measured back to back in the same \
         runs). The whole program's figure comes from a separate run with run-time stats on (their own two clock \
         reads included); what it holds beyond the sum of the steps is the program's entry and exit and the stats' \
         clock.\n\n{}",
        a.secs,
        a.rounds,
        harrier_capture::kernel::release(),
        num(clock, 1),
        table.markdown()
    );
    println!("{md}");
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("handler-steps.md"), &md)?;
    bar_panels(&a.out.join("handler-steps.png"), "Where the mix's handlers spend their time", &panels)?;
    eprintln!("harrier-bench: wrote {}/handler-steps.md and .png", a.out.display());
    Ok(())
}

/// A step's share of the handler's runs; one a few runs take is not "0%".
fn share_text(share: f64) -> String {
    if share > 0.0 && share < 0.005 {
        "<1%".into()
    } else {
        format!("{:.0}%", 100.0 * share)
    }
}

#[cfg(test)]
mod tests {
    use super::share_text;

    #[test]
    fn a_step_few_runs_take_is_not_shown_as_none() {
        assert_eq!(share_text(0.0), "0%");
        assert_eq!(share_text(0.0001), "<1%");
        assert_eq!(share_text(0.25), "25%");
        assert_eq!(share_text(1.0), "100%");
    }
}
