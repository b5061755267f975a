//! Falco's own stable rules against real behaviour under a live sensor (root):
//! an ssh-named process connecting out to a non-standard port, a packet socket
//! and a terminal shell inside a runc container (busybox-static), and the
//! Kubernetes pod fields of a container whose OCI config carries containerd's
//! CRI annotations. Alerts are picked by names unique to the test; negative
//! cases run in the same session and must not alert.

mod common;

use common::*;
use harrier_actions::runc::Runc;
use harrier_capture::testing::bpf_available;
use harrier_outputs::Alert;
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;

/// Reads the pod fields of any process in a container, so the test can see them
/// (Falco's stable rules print none of them).
const POD_RULE: &str = r#"
- rule: Harrier test pod fields
  desc: the Kubernetes fields of a container's socket
  condition: evt.type = socket and container and k8s.ns.name exists
  output: pod %k8s.pod.name in %k8s.ns.name (uid %k8s.pod.uid sandbox %k8s.pod.sandbox_id) proc=%proc.name container=%container.id image=%container.image
  priority: DEBUG
"#;

/// Runs `work` under a live sensor with Falco's stable rules and POD_RULE.
fn alerts_during(work: impl FnOnce(&mut dyn FnMut())) -> Option<Vec<Alert>> {
    stable_alerts_during(POD_RULE, work)
}

/// A non-blocking TCP connect to 198.51.100.7:PORT (TEST-NET-2, a public-looking
/// address) from perl run as `prog` (a renamed copy: proc.exe is argv[0]), in a
/// network namespace of its own whose only route leads to its loopback, from
/// 203.0.113.2: the connect is left in progress (EINPROGRESS), as it is to a
/// real remote host, whatever this machine's network.
fn connect_out(prog: &std::path::Path, port: u16) {
    let perl = r#"use Socket; use Fcntl;
        socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
        fcntl($s, F_SETFL, O_NONBLOCK) or die "fcntl: $!";
        connect($s, sockaddr_in($ARGV[0], inet_aton("198.51.100.7"))) and die "connected";
        $!{EINPROGRESS} or die "connect: $!";
        print "EINPROGRESS\n";"#;
    let script = format!(
        "ip link set lo up && ip addr add 203.0.113.2/32 dev lo && ip route add default dev lo src 203.0.113.2 && exec {} -e '{perl}' {port}",
        prog.display()
    );
    let out =
        Command::new("unshare").args(["-n", "bash", "-c", &script]).output().expect("unshare (util-linux)");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "EINPROGRESS",
        "{} to port {port}: {} {}",
        prog.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_ssh_connection_to_a_non_standard_port_alerts() {
    if !bpf_available() {
        return;
    }
    let dir = harrier_actions::kit::Scratch::new("ssh").unwrap();
    let ssh = dir.tool("/usr/bin/perl", "hr-ssh").unwrap();
    let other = dir.tool("/usr/bin/perl", "hr-sshd-not").unwrap();
    let Some(alerts) = alerts_during(|_| {
        connect_out(&ssh, 443);
        connect_out(&ssh, 22); // the standard port: not this rule's business
        connect_out(&other, 443); // not an ssh client
    }) else {
        return;
    };
    const RULE: &str = "Disallowed SSH Connection Non Standard Port";
    let hit = by(&alerts, RULE, "proc.name", "hr-ssh");
    assert_eq!(
        hit.len(),
        1,
        "one alert, for port 443: {:#?}",
        alerts.iter().filter(|a| a.rule == RULE).collect::<Vec<_>>()
    );
    let a = hit[0];
    assert_eq!(a.priority, "Notice");
    assert!(a.output.starts_with("Disallowed SSH Connection | connection="), "{}", a.output);
    let f = &a.output_fields;
    assert_eq!(field(a, "fd.name").split_once("->").map(|x| x.1), Some("198.51.100.7:443"), "{f:?}");
    assert!(field(a, "fd.name").starts_with("203.0.113.2:"), "{f:?}");
    // As Falco 0.44.1 renders it (docs/falco-diff.md, ssh-to-port-443): the client's
    // address is none of the host's interfaces, so the server end is the local one.
    let cport = field(a, "fd.name").split_once("->").and_then(|(c, _)| c.rsplit_once(':')).map(|x| x.1);
    assert_eq!(
        (f["fd.rport"].as_u64().map(|p| p.to_string()), field(a, "fd.l4proto"), field(a, "evt.type")),
        (cport.map(String::from), "tcp", "connect")
    );
    assert_eq!((field(a, "fd.type"), field(a, "proc.exepath")), ("ipv4", ssh.to_str().unwrap()));
    assert_eq!(field(a, "user.name"), "root");
    assert!(by(&alerts, RULE, "proc.name", "hr-sshd-not").is_empty(), "proc.exe must end with ssh");
}

/// A containerd-shaped container (cgroup /<namespace>/<id>, runc's name the
/// full id) with the CRI annotations containerd writes for a pod.
fn cri_container(script: &str) -> Runc {
    let id = format!("{:016x}{:048x}", 0x6b38u64 + std::process::id() as u64, 0xfeedu64);
    let ann = json!({
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.container-name": "tools",
        "io.kubernetes.cri.image-name": "docker.io/library/busybox:1.35",
        "io.kubernetes.cri.sandbox-name": "tools-6d5f7c9b8-hrtst",
        "io.kubernetes.cri.sandbox-namespace": "harrier-test",
        "io.kubernetes.cri.sandbox-uid": "2c9a3f0e-7b1d-4e55-9c1a-5f0e2d7b4a10",
        "io.kubernetes.cri.sandbox-id": format!("{:064x}", 0x5a4d_b0c5u64),
    });
    Runc::new(&id, &format!("/k8s.io/{id}"), script, ann).unwrap()
}

#[test]
fn a_packet_socket_in_a_container_alerts_with_the_pod_fields() {
    if !bpf_available() {
        return;
    }
    // busybox arping opens an AF_PACKET socket (CAP_NET_RAW given so it succeeds).
    // The pid in the script names this test's container among any others.
    let script = format!(
        "/bin/busybox arping -c 1 -w 1 -I lo 127.0.0.1; /bin/busybox echo ready-{}; /bin/busybox head -n 1",
        std::process::id()
    );
    let mut ct = cri_container(&script).cap("CAP_NET_RAW");
    let Some(alerts) = alerts_during(|drain| {
        ct.start().unwrap();
        ct.wait_for("ready").unwrap();
        drain();
        ct.finish().unwrap();
        // The host opens one too: the rule is about containers.
        let s = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM, 0) };
        assert!(s >= 0, "a packet socket on the host");
        unsafe { libc::close(s) };
    }) else {
        return;
    };
    let rule = "Packet socket created in container";
    let host = std::fs::read_to_string("/proc/self/comm").unwrap();
    assert!(
        by(&alerts, rule, "proc.name", host.trim()).is_empty(),
        "the host's packet socket is not this rule's"
    );
    let hits: Vec<_> = alerts
        .iter()
        .filter(|a| a.rule == rule && field(a, "proc.cmdline") == "busybox arping -c 1 -w 1 -I lo 127.0.0.1")
        .collect();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    let a = hits[0];
    assert_eq!((a.priority, field(a, "proc.name")), ("Notice", "busybox"));
    assert!(field(a, "evt.args").contains("domain=17"), "socket_info=%evt.args: {:?}", a.output_fields);
    assert_eq!(field(a, "evt.type"), "socket");
    assert!(a.output.starts_with("Packet socket was created in a container | socket_info="), "{}", a.output);
    let pod = by(&alerts, "Harrier test pod fields", "proc.name", "busybox");
    assert!(!pod.is_empty(), "the pod rule saw the container's socket: {a:#?}");
    assert_eq!(
        (field(pod[0], "k8s.ns.name"), field(pod[0], "k8s.pod.name")),
        ("harrier-test", "tools-6d5f7c9b8-hrtst"),
        "{}",
        pod[0].output
    );
    assert_eq!(field(pod[0], "k8s.pod.uid"), "2c9a3f0e-7b1d-4e55-9c1a-5f0e2d7b4a10");
    assert_eq!(field(pod[0], "k8s.pod.sandbox_id"), &format!("{:064x}", 0x5a4d_b0c5u64)[..12]);
    assert_eq!(field(pod[0], "container.image"), "docker.io/library/busybox:1.35", "CRI's image annotation");
}

#[test]
fn a_terminal_shell_as_a_containers_entrypoint_alerts() {
    if !bpf_available() {
        return;
    }
    let name = format!("harrier-tty-{}", std::process::id());
    // The pid in the script names this test's containers among any others.
    let script =
        format!("/bin/busybox tty; /bin/busybox echo ready-{}; /bin/busybox head -n 1", std::process::id());
    let mut with_tty = Runc::new(&name, &format!("/{name}"), &script, json!({})).unwrap().terminal();
    let quiet = format!("harrier-notty-{}", std::process::id());
    let mut without = Runc::new(&quiet, &format!("/{quiet}"), &script, json!({})).unwrap();
    let mut out = String::new();
    let Some(alerts) = alerts_during(|drain| {
        with_tty.start().unwrap();
        out = with_tty.wait_for("ready").unwrap();
        without.start().unwrap();
        without.wait_for("ready").unwrap();
        drain();
        with_tty.finish().unwrap();
        without.finish().unwrap();
    }) else {
        return;
    };
    assert!(out.contains("/dev/pts/"), "the shell had a terminal: {out:?}");
    let rule = "Terminal shell in container";
    let hits: Vec<_> =
        alerts.iter().filter(|a| a.rule == rule && field(a, "proc.cmdline").contains(&script)).collect();
    assert_eq!(hits.len(), 1, "only the shell with a terminal: {hits:#?}");
    let a = hits[0];
    assert_eq!(a.priority, "Notice");
    assert_eq!((field(a, "proc.name"), field(a, "proc.exepath")), ("sh", "/bin/sh"));
    assert_eq!(field(a, "evt.type"), "execve");
    assert_ne!(a.output_fields["proc.tty"].as_u64(), Some(0), "{:?}", a.output_fields);
    assert!(
        a.output.starts_with("A shell was spawned in a container with an attached terminal | "),
        "{}",
        a.output
    );
}

/// The alerts of `rule` whose command line contains `s` (the scratch path
/// names this test's processes among the machine's).
fn with_cmd<'a>(alerts: &'a [Alert], rule: &str, s: &str) -> Vec<&'a Alert> {
    alerts.iter().filter(|a| a.rule == rule && field(a, "proc.cmdline").contains(s)).collect()
}

#[test]
fn searching_for_private_keys_alerts() {
    if !bpf_available() {
        return;
    }
    let dir = harrier_actions::kit::Scratch::new("keys").unwrap();
    let d = dir.path().to_str().unwrap();
    std::fs::write(dir.path().join("id_rsa"), "-----BEGIN RSA PRIVATE KEY-----\nnot a key\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    let Some(alerts) = alerts_during(|_| {
        ok("grep", &["-rl", "BEGIN RSA PRIVATE", d]);
        ok("find", &[d, "-name", "id_rsa"]);
        // Neither a key's header nor a key's name: not this rule's business.
        ok("grep", &["-rl", "BEGIN CERTIFICATE", d]);
        ok("find", &[d, "-name", "notes.txt"]);
    }) else {
        return;
    };
    const RULE: &str = "Search Private Keys or Passwords";
    let hits = with_cmd(&alerts, RULE, d);
    assert_eq!(hits.len(), 2, "the grep and the find for keys only: {hits:#?}");
    let names: Vec<_> = hits.iter().map(|a| field(a, "proc.name")).collect();
    assert!(names.contains(&"grep") && names.contains(&"find"), "{names:?}");
    for a in hits {
        assert_eq!(a.priority, "Warning");
        assert!(
            a.output.starts_with("Grep private keys or passwords activities found | evt_type="),
            "{}",
            a.output
        );
        assert_eq!((field(a, "evt.type"), field(a, "user.name")), ("execve", "root"));
        let cmd = field(a, "proc.cmdline");
        assert!(
            cmd == format!("grep -rl BEGIN RSA PRIVATE {d}") || cmd == format!("find {d} -name id_rsa"),
            "{cmd}"
        );
        assert!(
            field(a, "proc.exepath").ends_with(&format!("/{}", field(a, "proc.name"))),
            "{:?}",
            a.output_fields
        );
    }
}

#[test]
fn shredding_a_file_alerts() {
    if !bpf_available() {
        return;
    }
    let dir = harrier_actions::kit::Scratch::new("shred").unwrap();
    let f = dir.path().join("data.bin");
    std::fs::write(&f, [0x5au8; 4096]).unwrap();
    let g = dir.path().join("other.bin");
    std::fs::write(&g, [0x5au8; 16]).unwrap();
    let (fs, gs) = (f.to_str().unwrap(), g.to_str().unwrap());
    let Some(alerts) = alerts_during(|_| {
        ok("shred", &["-n", "1", "-u", fs]);
        ok("rm", &["-f", gs]); // removing a file is not wiping data
    }) else {
        return;
    };
    assert!(!f.exists() && !g.exists(), "both files are gone");
    const RULE: &str = "Remove Bulk Data from Disk";
    let hits = with_cmd(&alerts, RULE, dir.path().to_str().unwrap());
    assert_eq!(hits.len(), 1, "shred only: {hits:#?}");
    let a = hits[0];
    assert_eq!(a.priority, "Warning");
    assert!(a.output.starts_with("Bulk data has been removed from disk | file="), "{}", a.output);
    assert_eq!((field(a, "proc.name"), field(a, "proc.exepath")), ("shred", "/usr/bin/shred"));
    assert_eq!(field(a, "proc.cmdline"), format!("shred -n 1 -u {fs}"));
    assert_eq!((field(a, "evt.type"), field(a, "user.name")), ("execve", "root"));
}

#[test]
fn netcat_running_a_program_over_a_connection_in_a_container_alerts() {
    if !bpf_available() {
        return;
    }
    // A listener and a client on the container's loopback, each running
    // /bin/true on the connection (busybox nc moves the socket onto fd 0 and
    // 1 for it). The client retries until the listener listens, pausing
    // between tries: a busy retry loop on a loaded machine floods the rings,
    // which this test does not drain while the container runs. debugfs in
    // this unprivileged container is a negative for the privileged rule.
    let pid = std::process::id();
    let script = format!(
        "/bin/busybox ip link set lo up; /bin/nc -l -p 4444 -e /bin/true & \
         until /bin/nc 127.0.0.1 4444 -e /bin/true; do /bin/busybox usleep 20000; done; wait; \
         /bin/debugfs -V; /bin/busybox echo ready-{pid}; /bin/busybox head -n 1"
    );
    let mut ct = applet_container("nc", &script, &["nc", "true", "debugfs"]).cap("CAP_NET_ADMIN");
    let Some(alerts) = container_alerts(POD_RULE, &mut ct) else {
        return;
    };
    const NC: &str = "Netcat Remote Code Execution in Container";
    let hits: Vec<_> =
        alerts.iter().filter(|a| a.rule == NC && field(a, "proc.cmdline").contains("4444")).collect();
    let listen: Vec<_> =
        hits.iter().filter(|a| field(a, "proc.cmdline") == "nc -l -p 4444 -e /bin/true").collect();
    assert_eq!(listen.len(), 1, "{hits:#?}");
    assert!(
        hits.iter().any(|a| field(a, "proc.cmdline") == "nc 127.0.0.1 4444 -e /bin/true"),
        "the client: {hits:#?}"
    );
    for a in &hits {
        assert_eq!(a.priority, "Warning");
        assert!(
            a.output.starts_with(
                "Netcat runs inside container that allows remote code execution | evt_type=execve"
            ),
            "{}",
            a.output
        );
        assert_eq!((field(a, "proc.name"), field(a, "proc.exepath")), ("nc", "/bin/nc"));
        assert_eq!(field(a, "user.name"), "root");
    }
    const DUP: &str = "Redirect STDOUT/STDIN to Network Connection in Container";
    let dups: Vec<_> = alerts.iter().filter(|a| a.rule == DUP && field(a, "proc.name") == "nc").collect();
    assert!(!dups.is_empty(), "nc's dup2 of its socket onto stdin");
    for a in &dups {
        assert_eq!(a.priority, "Notice");
        assert!(
            a.output.starts_with("Redirect stdout/stdin to network connection | gparent="),
            "{}",
            a.output
        );
        assert!(matches!(field(a, "evt.type"), "dup2" | "dup3" | "dup"), "{:?}", a.output_fields);
        // The listener's socket is dual-stack (::ffff:127.0.0.1), the client's IPv4.
        assert!(matches!(field(a, "fd.type"), "ipv4" | "ipv6"), "{:?}", a.output_fields);
        assert_eq!(field(a, "fd.l4proto"), "tcp", "{:?}", a.output_fields);
        let name = field(a, "fd.name");
        assert!(name.contains("127.0.0.1") && name.contains(":4444"), "{:?}", a.output_fields);
    }
    // As Falco 0.44.1 renders both ends (docs/falco-diff.md, ct-netcat-exec): in a container
    // the client end is never the local one, so fd.lport is 4444 and fd.rport the client's.
    let rports: Vec<_> = dups.iter().filter_map(|a| a.output_fields["fd.rport"].as_u64()).collect();
    let lports: Vec<_> = dups.iter().filter_map(|a| a.output_fields["fd.lport"].as_u64()).collect();
    assert!(lports.iter().all(|&p| p == 4444) && lports.len() == dups.len(), "{rports:?} {lports:?}");
    assert!(rports.iter().all(|&p| p != 4444) && rports.len() == dups.len(), "{rports:?} {lports:?}");
    assert!(
        !alerts.iter().any(|a| a.rule == "Debugfs Launched in Privileged Container"
            && field(a, "proc.cmdline") == "debugfs -V"),
        "this container is not privileged"
    );
}

#[test]
fn debugfs_in_a_privileged_container_alerts() {
    if !bpf_available() {
        return;
    }
    // busybox named debugfs (it has no such applet and says so): the rule is
    // about the program's name, not what it did.
    let script = format!(
        "/bin/debugfs -R stats; /bin/busybox echo ready-{}; /bin/busybox head -n 1",
        std::process::id()
    );
    let mut ct = applet_container("dbgfs", &script, &["debugfs"]);
    for c in harrier_actions::runc::ALL_CAPS {
        ct = ct.cap(c);
    }
    let Some(alerts) = container_alerts(POD_RULE, &mut ct) else {
        return;
    };
    const RULE: &str = "Debugfs Launched in Privileged Container";
    let hits: Vec<_> =
        alerts.iter().filter(|a| a.rule == RULE && field(a, "proc.cmdline") == "debugfs -R stats").collect();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    let a = hits[0];
    assert_eq!(a.priority, "Warning");
    assert!(
        a.output.starts_with("Debugfs launched started in a privileged container | evt_type=execve"),
        "{}",
        a.output
    );
    assert_eq!((field(a, "proc.name"), field(a, "proc.exepath")), ("debugfs", "/bin/debugfs"));
    assert_eq!((field(a, "proc.pname"), field(a, "user.name")), ("sh", "root"));
}

/// An overlay mounted on a bundle's rootfs, as container runtimes mount an
/// image (lower) under the container's own writes (upper); unmounted on drop,
/// before the bundle is removed (declare it after the [`Runc`]).
struct Overlay(PathBuf);
impl Drop for Overlay {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_binary_written_in_a_container_and_run_alerts() {
    if !bpf_available() {
        return;
    }
    // The image's layer holds busybox and sh; the container's upper layer a
    // busybox it "downloaded", hrdrop. Both run; only hrdrop is new.
    let script = format!(
        "/bin/busybox true; /bin/hrdrop true; /bin/busybox echo ready-{}; /bin/busybox head -n 1",
        std::process::id()
    );
    let mut ct = applet_container("drop", &script, &[]);
    let b = ct.bundle.clone();
    let (lower, upper, work, root) =
        (b.join("lower/bin"), b.join("upper/bin"), b.join("work"), b.join("rootfs"));
    for d in [&lower, &upper, &work] {
        std::fs::create_dir_all(d).unwrap();
    }
    for a in ["busybox", "sh"] {
        harrier_actions::kit::copy_executable("/bin/busybox", &lower.join(a)).unwrap();
    }
    harrier_actions::kit::copy_executable("/bin/busybox", &upper.join("hrdrop")).unwrap();
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        b.join("lower").display(),
        b.join("upper").display(),
        work.display()
    );
    ok("mount", &["-t", "overlay", "overlay", "-o", &opts, root.to_str().unwrap()]);
    let _mounted = Overlay(root);
    let Some(alerts) = container_alerts(POD_RULE, &mut ct) else {
        return;
    };
    const RULE: &str = "Drop and execute new binary in container";
    let hits: Vec<_> =
        alerts.iter().filter(|a| a.rule == RULE && field(a, "proc.cmdline") == "hrdrop true").collect();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    let a = hits[0];
    assert_eq!(a.priority, "Critical");
    assert!(
        a.output.starts_with("Executing binary not part of base image | proc_exe=/bin/hrdrop"),
        "{}",
        a.output
    );
    assert_eq!((field(a, "proc.name"), field(a, "proc.exepath")), ("hrdrop", "/bin/hrdrop"));
    assert_eq!((field(a, "evt.type"), field(a, "proc.pname")), ("execve", "sh"));
    let base: Vec<_> = alerts
        .iter()
        .filter(|a| {
            a.rule == RULE && field(a, "proc.cmdline") == "busybox true" && field(a, "proc.pname") == "sh"
        })
        .filter(|a| field(a, "proc.exepath") == "/bin/busybox")
        .collect();
    assert!(base.is_empty(), "busybox is the image's: {base:#?}");
}
