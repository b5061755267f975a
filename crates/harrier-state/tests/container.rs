//! A real container (root): runc runs a busybox-static bundle with cgroup
//! paths shaped like docker's, containerd's and plain runc's; the process
//! that execs inside gets the container's id and image. The container, its
//! bundle and the cgroup directories runc created are removed even when the
//! test fails.

use harrier_actions::runc::Runc;
use harrier_capture::testing::bpf_available;
use harrier_capture::{parse_syscalls, Config, Session};
use harrier_schema::decode::decode;
use harrier_state::State;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;

const IMAGE: &str = "docker.io/library/busybox:1.35";

/// The shell forks and execs `true` (the process to find), says so, then
/// waits for stdin to close: the test reads the container's state while it
/// still runs.
const SCRIPT: &str = "/bin/busybox true harrier-in-container; echo ready; /bin/busybox head -n 1";

/// Runs a container in `cgroup` under the sensor, then `check`s the state
/// built from the sensor's events while the container still exists.
fn run_in(name: &str, cgroup: &str, check: impl FnOnce(&State)) {
    // containerd's CRI annotations name the pod (k8s.ns.name, k8s.pod.*).
    let annotations = json!({
        "org.opencontainers.image.ref.name": IMAGE,
        "io.kubernetes.cri.sandbox-name": "web-0",
        "io.kubernetes.cri.sandbox-namespace": "harrier-ns",
        "io.kubernetes.cri.sandbox-uid": "9d1c2b3a-0000-4000-8000-000000000001",
    });
    let mut ct = Runc::new(name, cgroup, SCRIPT, annotations).expect("a runc bundle (scripts/deps.sh)").bind(
        "/etc",
        "/host/etc",
        true,
    );
    let events = Rc::new(RefCell::new(Vec::<Vec<u8>>::new()));
    let sink = events.clone();
    let cfg = Config::new(parse_syscalls("execve,execveat").unwrap());
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec())))
        .expect("the sensor starts");
    let mut state = State::new();
    state.scan_proc(None);
    ct.start().expect("runc run");
    ct.wait_for("ready").expect("the container ran its command");
    s.drain().unwrap();
    for b in events.borrow().iter() {
        state.apply(&decode(b).expect("sensor events decode"));
    }
    check(&state);
    ct.finish().expect("the container exits cleanly");
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
        let mounts: Vec<String> = c.mounts.iter().map(|m| m.to_string()).collect();
        assert_eq!(mounts, ["/etc:/host/etc::false:rprivate"], "the bind mount from the OCI config");
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
