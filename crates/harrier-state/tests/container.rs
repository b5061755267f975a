//! A real container (root): runc runs a busybox-static bundle with cgroup
//! paths shaped like docker's, containerd's and plain runc's; the process
//! that execs inside gets the container's id and image. The container, its
//! bundle and the cgroup directories runc created are removed even when the
//! test fails.

use harrier_capture::testing::bpf_available;
use harrier_capture::{parse_syscalls, Config, Session};
use harrier_schema::decode::decode;
use harrier_state::State;
use serde_json::json;
use std::cell::RefCell;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;

const IMAGE: &str = "docker.io/library/busybox:1.35";

/// One `runc run` and everything it leaves behind, undone on drop.
struct Container {
    name: String,
    bundle: PathBuf,
    child: Option<Child>,
    /// cgroup directories (per hierarchy) that did not exist before.
    new_dirs: Vec<PathBuf>,
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("runc").args(["kill", &self.name, "KILL"]).stderr(Stdio::null()).status();
        if let Some(mut c) = self.child.take() {
            drop(c.stdin.take());
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("runc").args(["delete", "--force", &self.name]).stderr(Stdio::null()).status();
        // Deepest first: runc removes the container's own, not the parents it made.
        for d in self.new_dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
        let _ = std::fs::remove_dir_all(&self.bundle);
    }
}

/// Directories a cgroup path would create under each hierarchy, that are not there yet.
fn missing_cgroup_dirs(cgroup: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let hierarchies = std::fs::read_dir("/sys/fs/cgroup")
        .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default();
    for h in hierarchies.iter().chain(std::iter::once(&PathBuf::from("/sys/fs/cgroup"))) {
        let mut p = h.clone();
        for comp in cgroup.split('/').filter(|c| !c.is_empty()) {
            p = p.join(comp);
            if !p.exists() {
                out.push(p.clone());
            }
        }
    }
    out
}

fn bundle(dir: &Path, cgroup: &str) {
    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("busybox-static (scripts/deps.sh)");
    let st = Command::new("runc").arg("spec").current_dir(dir).status().expect("runc (scripts/deps.sh)");
    assert!(st.success(), "runc spec");
    let path = dir.join("config.json");
    let mut spec: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    // The shell forks and execs `true` (the process to find), says so, then waits for stdin to close: the test
    // reads the container's state while it still runs.
    spec["process"]["terminal"] = json!(false);
    spec["process"]["args"] = json!([
        "/bin/busybox",
        "sh",
        "-c",
        "/bin/busybox true harrier-in-container; echo ready; /bin/busybox head -n 1"
    ]);
    // Rlimits fail on these machines (FINDINGS.md).
    spec["process"].as_object_mut().unwrap().remove("rlimits");
    spec["linux"]["cgroupsPath"] = json!(cgroup);
    // containerd's CRI annotations name the pod (k8s.ns.name, k8s.pod.*).
    spec["annotations"] = json!({
        "org.opencontainers.image.ref.name": IMAGE,
        "io.kubernetes.cri.sandbox-name": "web-0",
        "io.kubernetes.cri.sandbox-namespace": "harrier-ns",
        "io.kubernetes.cri.sandbox-uid": "9d1c2b3a-0000-4000-8000-000000000001",
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&spec).unwrap()).unwrap();
}

/// Runs a container in `cgroup` under the sensor; returns the state and the container's name.
fn run_in(name: &str, cgroup: &str, check: impl FnOnce(&State)) {
    let dir = std::env::temp_dir().join(format!("harrier-ct-{name}-{}", std::process::id()));
    let mut ct = Container {
        name: name.into(),
        bundle: dir.clone(),
        child: None,
        new_dirs: missing_cgroup_dirs(cgroup),
    };
    bundle(&dir, cgroup);
    let events = Rc::new(RefCell::new(Vec::<Vec<u8>>::new()));
    let sink = events.clone();
    let cfg = Config::new(parse_syscalls("execve,execveat").unwrap());
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec())))
        .expect("the sensor starts");
    let mut state = State::new();
    state.scan_proc(None);
    let child = Command::new("runc")
        .args(["run", "--bundle", dir.to_str().unwrap(), name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("runc run");
    let child = ct.child.insert(child);
    // Bounded: a runc that hangs (seen once under emulation) fails the test
    // with a message instead of stalling the suite; the drop kills it.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(300))
        .unwrap_or_else(|_| panic!("runc run {name}: no \"ready\" from the container within 300 s"));
    assert_eq!(line.trim(), "ready", "the container ran its command");
    s.drain().unwrap();
    for b in events.borrow().iter() {
        state.apply(&decode(b).expect("sensor events decode"));
    }
    check(&state);
    writeln!(child.stdin.as_mut().unwrap(), "done").ok();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "the container exits cleanly");
    s.stop().expect("the sensor stops");
}

fn in_container(state: &State) -> &harrier_state::Process {
    state
        .processes()
        .find(|p| p.args().collect::<Vec<_>>() == ["true", "harrier-in-container"])
        .expect("the exec inside the container was seen")
}

#[test]
fn runc_containers_get_their_id_and_image() {
    if !bpf_available() {
        return;
    }
    let full = format!("{:016x}{:048x}", 0x4a11e2u64 + std::process::id() as u64, 0xc0ffeeu64);
    // docker's cgroupfs layout; runc's name is the full id, as docker gives it.
    run_in(&full, &format!("/docker/{full}"), |st| {
        let p = in_container(st);
        assert_eq!(p.container_id(), &full[..12], "docker-shaped cgroup");
        let c = p.container.as_ref().unwrap();
        assert_eq!(
            (c.runtime, &*c.image, &*c.image_repository),
            ("docker", IMAGE, "docker.io/library/busybox")
        );
        assert!(!c.created.is_empty(), "creation time from runc's state.json");
        let parent = st.ancestors(p.pid).next().expect("the container's shell");
        assert_eq!(parent.vpid, 1, "the shell is pid 1 in the container's pid namespace");
        assert!(p.vpid > 1 && p.vpid < p.pid, "namespaced pid {} of host pid {}", p.vpid, p.pid);
        assert!(st.ancestors(p.pid).any(|a| a.container.is_none()), "ancestry crosses into the host (runc)");
    });
    // containerd's layout: /<namespace>/<id>.
    run_in(&full, &format!("/default/{full}"), |st| {
        let p = in_container(st);
        assert_eq!(p.container_id(), &full[..12], "containerd-shaped cgroup");
        let c = p.container.as_ref().unwrap();
        assert_eq!(c.runtime, "containerd");
        assert_eq!(
            (&*c.pod.name, &*c.pod.namespace),
            ("web-0", "harrier-ns"),
            "the pod from the CRI annotations"
        );
        assert_eq!(&*c.pod.uid, "9d1c2b3a-0000-4000-8000-000000000001");
    });
    // Plain runc with a name: cgroup /<name>, state in /run/runc/<name>.
    let name = format!("harrier-ct-{}", std::process::id());
    run_in(&name, &format!("/{name}"), |st| {
        let p = in_container(st);
        assert_eq!(p.container_id(), name, "plain runc: the name");
        let c = p.container.as_ref().unwrap();
        assert_eq!((&*c.name, &*c.image), (name.as_str(), IMAGE));
    });
}
