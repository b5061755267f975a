//! Time from SIGINT to exit of the real `harrier capture`, and proof that
//! nothing is left attached once it is gone.

use crate::workload::median;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A selection and the arguments that make it.
pub struct Selection {
    pub label: &'static str,
    pub args: Vec<String>,
}

pub fn selections() -> Vec<Selection> {
    vec![
        Selection { label: "--all", args: vec!["--all".into()] },
        Selection { label: "79 typed syscalls (default)", args: vec![] },
        Selection {
            label: "redis big set (15)",
            args: vec!["--syscalls".into(), crate::capture::BIG_SET.into()],
        },
    ]
}

/// The harrier binary built beside this one.
fn harrier() -> Result<std::path::PathBuf> {
    let p = std::env::current_exe()?.with_file_name("harrier");
    if !p.exists() {
        bail!("{} is missing: build the workspace first", p.display());
    }
    Ok(p)
}

/// Starts a capture, waits until it is attached and has run `settle`,
/// sends SIGINT and returns the seconds until it exited.
fn one_stop(args: &[String], mode: &str, settle: Duration) -> Result<f64> {
    let mut child = Command::new(harrier()?)
        .arg("capture")
        .args(args)
        .args(["--attach", mode])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting harrier capture")?;
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("capturing") => break,
            Some(Ok(_)) => {}
            _ => {
                let _ = child.kill();
                bail!("harrier capture ended before attaching: {:?}", child.wait()?);
            }
        }
    }
    // Keep reading stderr so the capture never blocks on a full pipe.
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).count());
    std::thread::sleep(settle);
    let t0 = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait()?;
    let secs = t0.elapsed().as_secs_f64();
    let _ = drain.join();
    if !status.success() {
        bail!("harrier capture exited with {status}");
    }
    Ok(secs)
}

/// Name of BPF program `id` (empty if it is gone).
fn prog_name(id: u32) -> Vec<u8> {
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return Vec::new();
    }
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    let ok = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) } == 0;
    unsafe { libc::close(fd) };
    match ok {
        true => info.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect(),
        false => Vec::new(),
    }
}

/// BPF links on the machine whose program is one of Harrier's (hr_*):
/// what is still attached. (Programs themselves are freed a moment after
/// their last link, asynchronously, so links are the measure.)
pub fn attached_links() -> usize {
    let mut id = 0u32;
    let mut n = 0;
    while unsafe { libbpf_sys::bpf_link_get_next_id(id, &mut id) } == 0 {
        let fd = unsafe { libbpf_sys::bpf_link_get_fd_by_id(id) };
        if fd < 0 {
            continue;
        }
        let mut info = libbpf_sys::bpf_link_info::default();
        let mut len = std::mem::size_of_val(&info) as u32;
        if unsafe { libbpf_sys::bpf_link_get_info_by_fd(fd, &mut info, &mut len) } == 0 {
            n += prog_name(info.prog_id).starts_with(b"hr_") as usize;
        }
        unsafe { libc::close(fd) };
    }
    n
}

/// Rows: selection, mode, median seconds from SIGINT to exit, programs left.
pub fn measure(rounds: usize) -> Result<Vec<(String, String, f64, usize)>> {
    let mut rows = Vec::new();
    for sel in selections() {
        for mode in ["auto", "per-syscall", "dispatcher"] {
            let mut v = Vec::new();
            let mut left = 0;
            for r in 0..rounds {
                eprintln!("bench-capture: stop {}/{rounds}: {} [{mode}]", r + 1, sel.label);
                // Another sensor's links (e.g. a test running beside us) are not ours.
                let before = attached_links();
                v.push(one_stop(&sel.args, mode, Duration::from_secs(1))?);
                left = left.max(attached_links().saturating_sub(before));
            }
            rows.push((sel.label.to_string(), mode.to_string(), median(&mut v), left));
        }
    }
    Ok(rows)
}
