//! The engine's state: harrier-state's tables behind the [`StateView`] the
//! field extraction reads.

use crate::view::{ContainerInfo, FdInfo, ProcInfo, StateView, UserInfo};
use harrier_schema::decode::{decode, Event, Meta};
use harrier_schema::view::SyscallView;
use std::collections::HashMap;

#[derive(Debug, Default, Clone)]
struct Proc {
    pid: u32,
    ppid: u32,
    comm: Vec<u8>,
    exe: Vec<u8>,
    exepath: Vec<u8>,
    args: Vec<u8>,
    cwd: Vec<u8>,
}

/// Processes by tid (threads share their leader's entry by pid).
#[derive(Default)]
pub struct EngineState {
    threads: HashMap<u32, u32>,
    procs: HashMap<u32, Proc>,
    exited: Vec<u32>,
    exited_last_batch: Vec<u32>,
}

fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim)
}

impl EngineState {
    pub fn new() -> EngineState {
        EngineState::default()
    }

    /// Seeds the tables from /proc (call once the sensor is attached).
    pub fn scan_proc(&mut self) {
        let Ok(dir) = std::fs::read_dir("/proc") else { return };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            self.load_proc(pid);
            if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                for t in tasks.flatten() {
                    if let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                        self.threads.insert(tid, pid);
                    }
                }
            }
        }
    }

    fn load_proc(&mut self, pid: u32) -> Option<()> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let ppid = status_field(&status, "PPid:")?.parse().ok()?;
        let comm = status_field(&status, "Name:").unwrap_or("").as_bytes().to_vec();
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let mut parts = cmd.splitn(2, |&c| c == 0);
        let exe = parts.next().unwrap_or_default().to_vec();
        let args = parts.next().unwrap_or_default().to_vec();
        let link = |n: &str| {
            std::fs::read_link(format!("/proc/{pid}/{n}"))
                .map(|p| p.into_os_string().into_encoded_bytes())
                .unwrap_or_default()
        };
        let p = Proc { pid, ppid, comm, exe, exepath: link("exe"), args, cwd: link("cwd") };
        self.procs.insert(pid, p);
        self.threads.insert(pid, pid);
        Some(())
    }

    fn pid_of(&self, tid: u32) -> u32 {
        self.threads.get(&tid).copied().unwrap_or(tid)
    }

    /// A life-cycle event; returns the tid of an exiting process leader.
    pub fn apply_meta(&mut self, bytes: &[u8]) -> Option<u32> {
        let Ok(Event::Meta(h, m)) = decode(bytes) else { return None };
        match m {
            Meta::Fork { child_tid, child_pid, comm } => {
                self.threads.insert(child_tid, child_pid);
                if child_tid == child_pid {
                    let parent = self.procs.get(&self.pid_of(h.tid)).cloned().unwrap_or_default();
                    let ppid = self.pid_of(h.tid);
                    self.procs.insert(child_pid, Proc { pid: child_pid, ppid, comm: comm.into_bytes(), ..parent });
                }
                None
            }
            Meta::Exec { old_tid, comm } => {
                let pid = self.pid_of(old_tid);
                let p = self.procs.entry(pid).or_insert_with(|| Proc { pid, ..Default::default() });
                p.comm = comm.into_bytes();
                self.threads.insert(h.tid, pid);
                None
            }
            Meta::Exit { pid } => {
                self.exited.push(h.tid);
                (h.tid == pid).then_some(h.tid)
            }
            Meta::Comm { comm } => {
                let pid = self.pid_of(h.tid);
                if let Some(p) = self.procs.get_mut(&pid) {
                    p.comm = comm.into_bytes();
                }
                None
            }
        }
    }

    /// A syscall event that changes state (exec's image, cwd).
    pub fn apply(&mut self, v: &SyscallView) {
        match v.syscall.name {
            "execve" | "execveat" if v.ret == 0 => {
                let pid = self.pid_of(v.header.tid);
                let bytes = |n: &str| v.named(n).and_then(|p| p.as_bytes().map(<[u8]>::to_vec)).unwrap_or_default();
                let args = bytes("args");
                let mut parts = args.splitn(2, |&c| c == 0);
                let exe = parts.next().unwrap_or_default().to_vec();
                let rest = parts.next().unwrap_or_default().to_vec();
                let p = self.procs.entry(pid).or_insert_with(|| Proc { pid, ..Default::default() });
                p.exe = exe;
                p.args = rest;
                p.exepath = bytes("exe");
                p.cwd = bytes("cwd");
            }
            _ => {}
        }
    }

    pub fn end_batch(&mut self) {
        for tid in std::mem::take(&mut self.exited_last_batch) {
            if let Some(pid) = self.threads.remove(&tid) {
                if pid == tid {
                    self.procs.remove(&pid);
                }
            }
        }
        self.exited_last_batch = std::mem::take(&mut self.exited);
    }
}

fn info(p: &Proc) -> ProcInfo<'_> {
    ProcInfo {
        pid: p.pid,
        ppid: p.ppid,
        comm: &p.comm,
        exe: &p.exe,
        exepath: &p.exepath,
        args: &p.args,
        cwd: &p.cwd,
        ..Default::default()
    }
}

impl StateView for EngineState {
    fn process(&self, tid: u32) -> Option<ProcInfo<'_>> {
        self.procs.get(&self.pid_of(tid)).map(info)
    }
    fn process_by_pid(&self, pid: u32) -> Option<ProcInfo<'_>> {
        self.procs.get(&pid).map(info)
    }
    fn fd(&self, _tid: u32, _fd: i32) -> Option<FdInfo<'_>> {
        None
    }
    fn user(&self, _uid: u32) -> Option<UserInfo<'_>> {
        None
    }
    fn group(&self, _gid: u32) -> Option<&str> {
        None
    }
    fn container(&self, _id: &str) -> Option<ContainerInfo<'_>> {
        None
    }
}
