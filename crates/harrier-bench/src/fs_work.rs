//! bench-fs's workload: file and directory operations spread over a tree,
//! run in the benchmark's own process (its wall time is the figure).

use anyhow::{Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Operations per iteration: create (open O_CREAT), write, rename, unlink, mkdir, rmdir.
pub const OPS_PER_ITER: u64 = 6;

/// Events each watcher should deliver per iteration, with the masks
/// fs_watch.rs sets: fswatch reports one event per operation; inotify and
/// fanotify report a rename as two (moved from, moved to).
pub fn expected_per_iter(kind: &str) -> u64 {
    match kind {
        "none" => 0,
        k if k.starts_with("fswatch-unwatched") => 0,
        k if k.starts_with("fswatch") => 6,
        _ => 7,
    }
}

/// The tree: `fanout` directories, each with `fanout` subdirectories.
pub fn make_tree(root: &Path, fanout: usize) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for a in 0..fanout {
        for b in 0..fanout {
            let d = root.join(format!("d{a}")).join(format!("s{b}"));
            std::fs::create_dir_all(&d).with_context(|| format!("{}", d.display()))?;
            dirs.push(d);
        }
    }
    Ok(dirs)
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("no NUL in bench paths")
}

fn check(r: i64, what: &str, p: &[CString]) -> Result<()> {
    if r < 0 {
        let e = std::io::Error::last_os_error();
        anyhow::bail!("{what} {:?}: {e}", p.iter().map(|c| c.to_string_lossy()).collect::<Vec<_>>());
    }
    Ok(())
}

/// Runs `iters` iterations over `dirs`; returns the wall ns per operation.
/// Names are built before timing, so the loop times syscalls, not formatting.
pub fn run(dirs: &[PathBuf], iters: u64, round: usize) -> Result<f64> {
    let names: Vec<[CString; 3]> = (0..iters)
        .map(|i| {
            let d = &dirs[i as usize % dirs.len()];
            [
                c(&d.join(format!("f{round}_{i}"))),
                c(&d.join(format!("g{round}_{i}"))),
                c(&d.join(format!("m{round}_{i}"))),
            ]
        })
        .collect();
    let data = [b'x'; 64];
    let t = Instant::now();
    for [f, g, m] in &names {
        let fd = unsafe { libc::open(f.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644) };
        check(fd as i64, "open", std::slice::from_ref(f))?;
        let w = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        unsafe { libc::close(fd) };
        check(w as i64, "write", std::slice::from_ref(f))?;
        check(unsafe { libc::rename(f.as_ptr(), g.as_ptr()) } as i64, "rename", &[f.clone(), g.clone()])?;
        check(unsafe { libc::unlink(g.as_ptr()) } as i64, "unlink", std::slice::from_ref(g))?;
        check(unsafe { libc::mkdir(m.as_ptr(), 0o755) } as i64, "mkdir", std::slice::from_ref(m))?;
        check(unsafe { libc::rmdir(m.as_ptr()) } as i64, "rmdir", std::slice::from_ref(m))?;
    }
    Ok(t.elapsed().as_nanos() as f64 / (iters * OPS_PER_ITER) as f64)
}
