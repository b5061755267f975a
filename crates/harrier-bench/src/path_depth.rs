//! `harrier-bench path-depth` (make bench-paths): what an open's exit costs
//! by the depth of the file opened, with and without the path cache
//! (bpf/include/tree/dircache.h). One thread opens and closes one file as
//! fast as it can under `harrier capture --syscalls openat` with run-time
//! stats on; the figure is hr_exit_openat's ns per run. Depths and the two
//! setups are interleaved in every round (the order rotates); medians.

use crate::report::{bar_panels, num, Table};
use crate::workload::median;
use anyhow::{bail, Context, Result};
use harrier_capture::{parse_syscalls, Config, Session};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Opens per run.
    #[arg(long, default_value_t = 200_000)]
    opens: u64,
    /// Names in the opened file's path, "/" not counted (at least 4: the
    /// files live under /var/tmp/.harrier-depth-PID).
    #[arg(long, value_delimiter = ',', default_value = "4,6,8,12,16,24")]
    depths: Vec<usize>,
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
}

/// The file `depth` names deep under `base` (which is 3 deep), made.
fn make_file(base: &Path, depth: usize) -> Result<CString> {
    let mut p = base.to_path_buf();
    for i in 0..depth - 4 {
        p.push(format!("d{i}"));
    }
    std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
    p.push("f");
    std::fs::write(&p, "x")?;
    Ok(CString::new(p.into_os_string().into_encoded_bytes())?)
}

/// One run: hr_exit_openat's ns per run, and the cache's hit share.
fn measure(path: &CString, cache: bool, opens: u64) -> Result<(f64, f64)> {
    let mut cfg = Config::new(parse_syscalls("openat")?);
    cfg.pid = Some(std::process::id());
    cfg.run_time_stats = true;
    cfg.dir_cache = cache;
    let mut s = Session::start_counting(&cfg)?;
    if cache && !s.dir_cache().is_on() {
        bail!("the path cache is off on this kernel: {}", s.dir_cache().describe());
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|sc| -> Result<()> {
        sc.spawn(|| {
            for _ in 0..opens {
                unsafe {
                    let fd = libc::openat(libc::AT_FDCWD, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                    libc::close(fd);
                }
            }
            done.store(true, Ordering::Relaxed);
        });
        let mut pace = s.pace();
        while !done.load(Ordering::Relaxed) {
            s.sleep_and_drain(&mut pace)?;
        }
        Ok(())
    })?;
    let st = s.stop()?;
    let k = st.kernel_total();
    if k.dropped() > 0 {
        bail!("{} events dropped: the run is not the handler's full path", k.dropped());
    }
    let p = st.programs.iter().find(|p| p.name == "hr_exit_openat").context("hr_exit_openat has no stats")?;
    // NaN: no walk looked the cache up (the root was near).
    let hits = k.dir_hits as f64 / (k.dir_hits + k.dir_misses) as f64;
    Ok((p.avg_ns(), hits))
}

pub fn run(a: Args) -> Result<()> {
    if a.depths.iter().any(|&d| d < 4) {
        bail!("--depths: each at least 4 (the files live 3 names deep)");
    }
    let base = PathBuf::from(format!("/var/tmp/.harrier-depth-{}", std::process::id()));
    let files = a.depths.iter().map(|&d| make_file(&base, d)).collect::<Result<Vec<_>>>();
    let result = files.and_then(|files| rounds(&a, &files));
    let _ = std::fs::remove_dir_all(&base);
    let cells = result?;
    report(&a, &cells)
}

/// cells[depth][setup: 0 no cache, 1 cache] = (ns/run, hit share) per round.
type Cells = Vec<[Vec<(f64, f64)>; 2]>;

fn rounds(a: &Args, files: &[CString]) -> Result<Cells> {
    let mut cells: Cells = files.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    let runs = a.depths.len() * 2;
    for r in 0..a.rounds {
        for k in 0..runs {
            let i = (k + r) % runs;
            let (d, cache) = (i / 2, (i + r) % 2 == 1);
            eprintln!(
                "path-depth: round {}/{}, {} names deep, cache {}",
                r + 1,
                a.rounds,
                a.depths[d],
                if cache { "on" } else { "off" }
            );
            cells[d][cache as usize].push(measure(&files[d], cache, a.opens)?);
        }
    }
    Ok(cells)
}

/// The median share of walks that hit, "no lookup" where none looked.
fn hit_share(v: &[(f64, f64)]) -> String {
    let mut shares: Vec<f64> = v.iter().map(|x| x.1).filter(|s| s.is_finite()).collect();
    if shares.is_empty() {
        return "no lookup".into();
    }
    format!("{:.0}%", 100.0 * median(&mut shares))
}

fn report(a: &Args, cells: &Cells) -> Result<()> {
    let med = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
    let mut rows = Vec::new();
    let (mut off_bars, mut on_bars) = (Vec::new(), Vec::new());
    for (d, c) in a.depths.iter().zip(cells) {
        let (off, on) = (med(&c[0], |x| x.0), med(&c[1], |x| x.0));
        rows.push(vec![
            d.to_string(),
            num(off, 1),
            num(on, 1),
            format!("{:.2}×", on / off),
            hit_share(&c[1]),
        ]);
        off_bars.push((format!("{d} names"), off));
        on_bars.push((format!("{d} names"), on));
    }
    let header = ["names deep", "no cache ns/run", "path cache ns/run", "cache / none", "walks that hit"];
    let table = Table { header: header.map(String::from).to_vec(), rows };
    let md = format!(
        "`harrier-bench path-depth`: hr_exit_openat's BPF ns per run (run-time stats on) while one thread opens and \
         closes one file {} times per run, by the names in its path; medians of {} interleaved rounds; kernel {}.\n\n{}",
        a.opens,
        a.rounds,
        harrier_capture::kernel::release(),
        table.markdown()
    );
    println!("{md}");
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("path-depth.md"), &md)?;
    let unit = "BPF ns per run of hr_exit_openat".to_string();
    bar_panels(
        &a.out.join("path-depth.png"),
        "An open's exit by the depth of its file",
        &[("no path cache".into(), unit.clone(), off_bars), ("path cache".into(), unit, on_bars)],
    )?;
    eprintln!("harrier-bench: wrote {}/path-depth.md and .png", a.out.display());
    Ok(())
}
