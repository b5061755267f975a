//! Falco's stable rules with this engine's fields (no BPF): every rule is
//! evaluated, and the fields the last two needed (k8s.ns.name from the
//! container runtime's metadata, fd.name_changed from the fd state) mean
//! what they mean in Falco.

mod common;

use common::falco_rules_dir;
use harrier_engine::state::EngineState;
use harrier_engine::Engine;
use harrier_outputs::sinks::Sink;
use harrier_outputs::{Alert, Limits, Outputs};
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet, RuleStatus};
use harrier_state::testing::{exec, fork, sockaddr_in as inet, syscall, P};
use std::sync::{Arc, Mutex};

fn opts() -> LoadOptions {
    LoadOptions { supported: Arc::new(harrier_engine::source::supported), ..Default::default() }
}

fn stable() -> Option<RuleSet> {
    let p = falco_rules_dir()?.join("falco_rules.yaml");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    Some(RuleSet::load(&[(p.display().to_string(), text)], &opts()).expect("the stable rules load"))
}

#[test]
fn all_25_stable_rules_are_evaluable_with_this_engine() {
    let Some(rs) = stable() else { return };
    let rep = rs.check_report();
    println!("{rep}");
    let bad: Vec<_> = rs
        .rules()
        .iter()
        .filter(|r| r.status != RuleStatus::Evaluable)
        .map(|r| (&r.name, &r.status))
        .collect();
    assert!(bad.is_empty(), "not evaluable: {bad:?}");
    assert_eq!((rep.total(), rep.evaluable(), rep.active()), (25, 25, 25));
}

struct Collect(Arc<Mutex<Vec<Alert>>>);
impl Sink for Collect {
    fn send(&mut self, a: &Alert) -> anyhow::Result<()> {
        self.0.lock().unwrap().push(a.clone());
        Ok(())
    }
}

fn engine(rules: RuleSet) -> (Engine, Arc<Mutex<Vec<Alert>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut outs = Outputs::new(Limits::default());
    outs.add("collect", Box::new(Collect(got.clone())));
    (Engine::new(rules, EngineState::new(), outs, RuleMatching::All), got)
}

fn alerts(engine: Engine, got: &Arc<Mutex<Vec<Alert>>>) -> Vec<Alert> {
    engine.into_outputs().close(std::time::Duration::from_secs(2));
    got.lock().unwrap().clone()
}

/// A process forked from pid 1 that execs `exe` in `cgroup`.
fn spawn(e: &mut Engine, tid: u32, exe: &str, cgroup: &str) {
    let name = exe.rsplit('/').next().unwrap();
    e.on_event(&fork(1, 1, tid, tid, "init"));
    e.on_event(&exec(2, tid, tid, name, cgroup));
    e.on_event(&syscall(
        3,
        tid,
        "execve",
        0,
        &[("exe", P::B(exe.as_bytes())), ("args", P::B(exe.as_bytes()))],
    ));
}

#[test]
fn fd_name_changed_is_true_on_the_send_that_renames_a_datagram_socket() {
    let rule = "- rule: new datagram destination\n  desc: d\n  condition: evt.type in (sendto, sendmsg) and fd.l4proto = udp and fd.name_changed = true\n  output: to %fd.name changed=%fd.name_changed\n  priority: NOTICE\n";
    let rules = RuleSet::load(&[("t.yaml", rule)], &opts()).unwrap();
    let (mut e, got) = engine(rules);
    let tid = 4_100_001;
    spawn(&mut e, tid, "/usr/bin/dig", "/");
    e.on_event(&syscall(4, tid, "socket", 3, &[("domain", P::I(2)), ("type", P::I(2))]));
    let send =
        |to: &[u8]| syscall(5, tid, "sendto", 30, &[("fd", P::I(3)), ("size", P::I(30)), ("addr", P::B(to))]);
    let dns = inet(53, [9, 9, 9, 9]);
    e.on_event(&send(&dns));
    e.on_event(&send(&dns)); // same destination: no rename
    e.on_event(&syscall(6, tid, "close", 0, &[("fd", P::I(7))]));
    e.on_event(&send(&inet(53, [1, 0, 0, 1])));
    let a = alerts(e, &got);
    let names: Vec<_> = a.iter().map(|a| a.output_fields["fd.name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["0.0.0.0:0->9.9.9.9:53", "0.0.0.0:0->1.0.0.1:53"], "{a:#?}");
    assert_eq!(a[0].output_fields["fd.name_changed"], true);
}

/// The stable rule 'Disallowed SSH Connection Non Standard Port' over a connect
/// still in progress (evt.res = EINPROGRESS) to a public address on 443, and not
/// to a private one or to port 22.
#[test]
fn disallowed_ssh_port_fires_on_an_outbound_connect_in_progress() {
    let Some(rs) = stable() else { return };
    let (mut e, got) = engine(rs);
    // The client end is local when its address is one of the host's: say
    // which, so the test does not depend on this machine's interfaces.
    e.set_interface_addrs(vec![std::net::Ipv4Addr::new(192, 0, 2, 2).into()]);
    let connect = |tid: u32, ts: u64, peer: &[u8], ret: i64| {
        let local = inet(40_000, [192, 0, 2, 2]);
        syscall(
            ts,
            tid,
            "connect",
            ret,
            &[("fd", P::I(3)), ("addr", P::B(peer)), ("peer", P::B(peer)), ("local", P::B(&local))],
        )
    };
    let cases: [(u32, [u8; 4], u16, i64); 4] = [
        (4_200_001, [198, 51, 100, 7], 443, -115),
        (4_200_002, [10, 1, 2, 3], 443, -115),
        (4_200_003, [198, 51, 100, 7], 22, 0),
        (4_200_004, [198, 51, 100, 7], 8080, -111),
    ];
    for (tid, ip, port, ret) in cases {
        spawn(&mut e, tid, "/usr/bin/ssh", "/");
        e.on_event(&syscall(4, tid, "socket", 3, &[("domain", P::I(2)), ("type", P::I(1))]));
        e.on_event(&connect(tid, 5, &inet(port, ip), ret));
    }
    let a = alerts(e, &got);
    let hits: Vec<_> = a.iter().filter(|a| a.rule == "Disallowed SSH Connection Non Standard Port").collect();
    assert_eq!(hits.len(), 1, "only the public address on 443 in progress: {a:#?}");
    let f = &hits[0].output_fields;
    assert_eq!(hits[0].priority, "Notice");
    assert_eq!(f["fd.name"], "192.0.2.2:40000->198.51.100.7:443");
    assert_eq!((f["proc.name"].as_str(), f["evt.type"].as_str()), (Some("ssh"), Some("connect")));
    assert_eq!(
        (f["fd.rport"].as_u64(), f["fd.lport"].as_u64(), f["fd.l4proto"].as_str()),
        (Some(443), Some(40000), Some("tcp"))
    );
}

/// A containerd (CRI) container's pod: k8s.ns.name and k8s.pod.* from the CRI
/// annotations of its OCI config; the stable macro k8s_containers reads the namespace.
#[test]
fn k8s_fields_come_from_the_cri_annotations() {
    let id = "5e0c7e2a9b7d2e4f6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a3c5e7b9d0f";
    let sandbox = "aa0c7e2a9b7d2e4f6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a3c5e7b9d01";
    let run = std::env::temp_dir().join(format!("harrier-engine-k8s-{}", std::process::id()));
    let task = run.join("containerd/io.containerd.runtime.v2.task/k8s.io").join(id);
    std::fs::create_dir_all(&task).unwrap();
    let spec = serde_json::json!({"annotations": {
        "io.kubernetes.cri.container-name": "coredns",
        "io.kubernetes.cri.sandbox-name": "coredns-5d78c9869d-x2x9q",
        "io.kubernetes.cri.sandbox-namespace": "kube-system",
        "io.kubernetes.cri.sandbox-uid": "6f1e0a8e-2b1c-4c57-9a43-0c7b5a2a1d11",
        "io.kubernetes.cri.sandbox-id": sandbox,
    }});
    std::fs::write(task.join("config.json"), spec.to_string()).unwrap();
    let rule = "- macro: in_kube_system\n  condition: k8s.ns.name = \"kube-system\"\n- rule: k8s exec\n  desc: d\n  condition: evt.type = execve and (in_kube_system or k8s.pod.name exists)\n  output: ns=%k8s.ns.name pod=%k8s.pod.name uid=%k8s.pod.uid sandbox=%k8s.pod.sandbox_id full=%k8s.pod.full_sandbox_id\n  priority: NOTICE\n";
    let rules = RuleSet::load(&[("t.yaml", rule)], &opts()).unwrap();
    let (mut e, got) = engine(rules);
    e.state.tables.containers.run_dir = run.clone();
    let cgroup = format!("/kubepods/burstable/pod6f1e0a8e/{id}");
    spawn(&mut e, 4_300_001, "/coredns", &cgroup);
    spawn(&mut e, 4_300_002, "/usr/bin/true", "/user.slice"); // the host: no pod, no value
    let a = alerts(e, &got);
    std::fs::remove_dir_all(&run).unwrap();
    assert_eq!(a.len(), 1, "the host process has no namespace: {a:#?}");
    let f = &a[0].output_fields;
    assert_eq!(f["k8s.ns.name"], "kube-system");
    assert_eq!(f["k8s.pod.name"], "coredns-5d78c9869d-x2x9q");
    assert_eq!(f["k8s.pod.uid"], "6f1e0a8e-2b1c-4c57-9a43-0c7b5a2a1d11");
    assert_eq!(f["k8s.pod.sandbox_id"], &sandbox[..12]);
    assert_eq!(f["k8s.pod.full_sandbox_id"], sandbox);
}

/// The stable rule 'Linux Kernel Module Injection Detected' (live only where the
/// kernel loads modules, see tests/live_falco_more.rs): thread.cap_effective
/// renders as Falco's capability names, so `icontains sys_module` holds for a
/// containerized insmod with CAP_SYS_MODULE, not without it nor on the host.
#[test]
fn module_injection_needs_a_container_and_cap_sys_module() {
    let Some(rs) = stable() else { return };
    let (mut e, got) = engine(rs);
    let docker = format!("/docker/{:064x}", 0x6b6d_6f64u64);
    let cases = [
        (4_400_001, docker.as_str(), 1u64 << 16 | 1 << 5),
        (4_400_002, docker.as_str(), 1 << 5),
        (4_400_003, "/user.slice", 1 << 16),
    ];
    for (tid, cgroup, caps) in cases {
        e.on_event(&fork(1, 1, tid, tid, "init"));
        e.on_event(&exec(2, tid, tid, "insmod", cgroup));
        e.on_event(&syscall(
            3,
            tid,
            "execve",
            0,
            &[
                ("exe", P::B(b"/sbin/insmod")),
                ("args", P::B(b"insmod\0/hr.ko\0")),
                ("cap_effective", P::I(caps as i64)),
            ],
        ));
        e.on_event(&syscall(4, tid, "finit_module", 0, &[]));
    }
    let a = alerts(e, &got);
    let hits: Vec<_> = a.iter().filter(|a| a.rule == "Linux Kernel Module Injection Detected").collect();
    assert_eq!(hits.len(), 1, "the container with CAP_SYS_MODULE only: {a:#?}");
    let f = &hits[0].output_fields;
    assert_eq!((f["proc.name"].as_str(), f["proc.args"].as_str()), (Some("insmod"), Some("/hr.ko")));
    assert_eq!((f["evt.type"].as_str(), f["evt.res"].as_str()), (Some("finit_module"), Some("SUCCESS")));
    assert_eq!(hits[0].priority, "Warning");
}

/// Falco's parameter names that Harrier's table spells otherwise reach the parameter at run
/// time: `evt.arg.name` is unlinkat's `path` (Falco's incubating "Delete or rename shell
/// history" tests it), and `evt.arg.flags` on execve is the executable's flags, by name.
#[test]
fn falco_parameter_names_resolve_at_run_time() {
    let rule = "- rule: history\n  desc: d\n  condition: evt.type = unlinkat and evt.arg.name endswith \"ash_history\"\n  output: removed %evt.arg.name\n  priority: WARNING\n\
- rule: exec\n  desc: d\n  condition: evt.type = execve and proc.name = upper\n  output: ran exe_flags=%evt.arg.flags raw=%evt.rawarg.flags\n  priority: NOTICE\n";
    let rules = RuleSet::load(&[("t.yaml", rule)], &opts()).unwrap();
    let (mut e, got) = engine(rules);
    let tid = 4_300_001;
    spawn(&mut e, tid, "/usr/bin/bash", "/");
    let unlink = |ts, path: &str| {
        syscall(ts, tid, "unlinkat", 0, &[("dirfd", P::I(-100)), ("path", P::B(path.as_bytes()))])
    };
    e.on_event(&unlink(4, "/root/.bash_history"));
    e.on_event(&unlink(5, "/root/.profile"));
    let exe = 4_300_002;
    e.on_event(&fork(6, tid, exe, exe, "bash"));
    e.on_event(&exec(7, exe, exe, "upper", "/"));
    e.on_event(&syscall(8, exe, "execve", 0, &[("exe", P::B(b"/upper")), ("exe_flags", P::I(3))]));
    let a = alerts(e, &got);
    assert_eq!(a.len(), 2, "one history removal, one exec: {a:#?}");
    assert!(a[0].output.ends_with("removed /root/.bash_history"), "{}", a[0].output);
    assert!(a[1].output.ends_with("ran exe_flags=EXE_UPPER_LAYER|EXE_FROM_MEMFD raw=3"), "{}", a[1].output);
}
