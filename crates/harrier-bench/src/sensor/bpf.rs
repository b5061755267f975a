//! The BPF programs and links a sensor process holds, found by owner: the
//! `prog_id:` / `link_id:` lines of /proc/PID/fdinfo (libbpf keeps a
//! descriptor of every program it loaded, tail-call targets included), and
//! their run-time statistics (with BPF_ENABLE_STATS held by someone).

use std::collections::BTreeSet;

/// Ids of the programs, links and maps whose descriptors a set of
/// processes hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owned {
    pub progs: BTreeSet<u32>,
    pub links: BTreeSet<u32>,
    pub maps: BTreeSet<u32>,
}

/// (prog_id, link_id) named by one fdinfo text.
fn fdinfo_ids(text: &str) -> (Option<u32>, Option<u32>) {
    (fdinfo_field(text, "prog_id:"), fdinfo_field(text, "link_id:"))
}

fn fdinfo_field(text: &str, key: &str) -> Option<u32> {
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse().ok())
}

/// What `pids` hold (threads share their process's descriptors).
pub fn owned(pids: &[u32]) -> Owned {
    let mut o = Owned::default();
    for pid in pids {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { continue };
        for e in dir.flatten() {
            let Ok(text) = std::fs::read_to_string(e.path()) else { continue };
            o.maps.extend(fdinfo_field(&text, "map_id:"));
            let (prog, link) = fdinfo_ids(&text);
            match (prog, link) {
                (Some(p), Some(l)) => {
                    o.progs.insert(p);
                    o.links.insert(l);
                }
                (Some(p), None) => {
                    o.progs.insert(p);
                }
                (None, Some(l)) => {
                    o.links.insert(l);
                }
                (None, None) => {}
            }
        }
    }
    o
}

/// One program's identity and cumulative run-time statistics.
#[derive(Debug, Clone, Default)]
pub struct ProgStat {
    pub id: u32,
    pub name: String,
    pub run_cnt: u64,
    pub run_time_ns: u64,
}

/// The program `id`, if it still exists.
pub fn prog(id: u32) -> Option<ProgStat> {
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    let ok = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) } == 0;
    unsafe { libc::close(fd) };
    ok.then(|| ProgStat {
        id,
        name: info.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8 as char).collect(),
        run_cnt: info.run_cnt,
        run_time_ns: info.run_time_ns,
    })
}

/// By the id that follows id - 1, never an fd: closing an fd to a prog
/// array whose owner just exited can leak it in the kernel (its deferred
/// clear queued twice, its reference put once; seen on 6.18).
pub fn map_exists(id: u32) -> bool {
    let mut next = 0;
    unsafe { libbpf_sys::bpf_map_get_next_id(id.wrapping_sub(1), &mut next) == 0 && next == id }
}

pub fn link_exists(id: u32) -> bool {
    let mut next = 0;
    unsafe { libbpf_sys::bpf_link_get_next_id(id.wrapping_sub(1), &mut next) == 0 && next == id }
}

/// The statistics of every program in `o` that still exists.
pub fn stats(o: &Owned) -> Vec<ProgStat> {
    o.progs.iter().filter_map(|&id| prog(id)).collect()
}

/// Per program, what ran between two snapshots (by id; programs that
/// appeared or vanished in between count from zero / are left out).
pub fn delta(before: &[ProgStat], after: &[ProgStat]) -> Vec<ProgStat> {
    after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.id == a.id);
            ProgStat {
                run_cnt: a.run_cnt - b.map_or(0, |b| b.run_cnt.min(a.run_cnt)),
                run_time_ns: a.run_time_ns - b.map_or(0, |b| b.run_time_ns.min(a.run_time_ns)),
                ..a.clone()
            }
        })
        .collect()
}

/// What is left of `o` once its owner is gone: (programs, links, maps) that
/// still exist. The kernel frees them a moment after their last reference,
/// so this waits up to `grace` for them to go.
pub fn left_after_exit(o: &Owned, grace: std::time::Duration) -> (usize, usize, usize) {
    let end = std::time::Instant::now() + grace;
    loop {
        let progs = o.progs.iter().filter(|&&id| prog(id).is_some()).count();
        let links = o.links.iter().filter(|&&id| link_exists(id)).count();
        let maps = o.maps.iter().filter(|&&id| map_exists(id)).count();
        if progs + links + maps == 0 || std::time::Instant::now() >= end {
            return (progs, links, maps);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_of_programs_and_links_is_read() {
        let prog = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t2072\nprog_type:\t5\nprog_jited:\t1\n\
                    prog_tag:\tabc\nmemlock:\t4096\nprog_id:\t117\nrun_time_ns:\t0\nrun_cnt:\t0\n";
        let link =
            "pos:\t0\nflags:\t02000000\nlink_type:\tperf\nlink_id:\t41\nprog_tag:\tabc\nprog_id:\t117\n";
        assert_eq!(fdinfo_ids(prog), (Some(117), None));
        assert_eq!(fdinfo_ids(link), (Some(117), Some(41)));
        assert_eq!(fdinfo_ids("pos:\t0\nflags:\t0\n"), (None, None));
        let map = "pos:\t0\nflags:\t02000002\nmap_type:\t3\nkey_size:\t4\nmap_id:\t88\nfrozen:\t0\n";
        assert_eq!((fdinfo_field(map, "map_id:"), fdinfo_ids(map)), (Some(88), (None, None)));
    }

    #[test]
    fn deltas_are_per_program() {
        let s = |id, cnt, ns| ProgStat { id, name: format!("p{id}"), run_cnt: cnt, run_time_ns: ns };
        let d = delta(&[s(1, 10, 100), s(2, 5, 50)], &[s(1, 30, 300), s(3, 4, 40)]);
        assert_eq!(
            d.iter().map(|p| (p.id, p.run_cnt, p.run_time_ns)).collect::<Vec<_>>(),
            [(1, 20, 200), (3, 4, 40)]
        );
    }
}
