//! The battery's container behaviours: busybox scripts in runc containers
//! whose cgroup path and annotations are docker's, containerd's (CRI),
//! cri-o's or plain runc's. Programs are busybox under the name a rule
//! expects (busybox runs the applet of its name, or says it has none: the
//! exec is what the rules see).

use super::{Behaviour, Place, Tools};
use crate::runc::Runc;
use anyhow::Result;
use serde_json::json;

const fn ct(
    name: &'static str,
    rules: &'static [&'static str],
    place: Place,
    run: fn(&Tools) -> Result<()>,
) -> Behaviour {
    Behaviour { name, rules, place, run }
}

pub static CONTAINERS: &[Behaviour] = &[
    ct("ct-terminal-shell", &["Terminal shell in container"], Place::Docker, |t| {
        go(t, &mut shaped(Place::Docker, "tty", "/bin/busybox tty", &[])?.terminal())
    }),
    ct("ct-plain-runc-terminal-shell", &["Terminal shell in container"], Place::Runc, |t| {
        // Plain runc's cgroup (/<name>): a container to Harrier, not to Falco's plugin.
        go(t, &mut shaped(Place::Runc, "tty", "/bin/busybox tty", &[])?.terminal())
    }),
    ct("ct-packet-socket", &["Packet socket created in container"], Place::Containerd, |t| {
        let mut c =
            shaped(Place::Containerd, "arping", "/bin/arping -c 1 -w 1 -I lo 127.0.0.1", &["arping"])?
                .cap("CAP_NET_RAW");
        go(t, &mut c)
    }),
    ct(
        "ct-netcat-exec",
        &[
            "Netcat Remote Code Execution in Container",
            "Redirect STDOUT/STDIN to Network Connection in Container",
        ],
        Place::Docker,
        |t| {
            let s = nc_to_itself("", "127.0.0.1", 4444);
            go(t, &mut shaped(Place::Docker, "nc", &s, &["nc", "true"])?.cap("CAP_NET_ADMIN"))
        },
    ),
    ct("ct-debugfs-privileged", &["Debugfs Launched in Privileged Container"], Place::Docker, |t| {
        go(t, &mut privileged(shaped(Place::Docker, "dbgfs", "/bin/debugfs -R stats", &["debugfs"])?))
    }),
    ct("ct-mount-privileged", &["Mount Launched in Privileged Container"], Place::Crio, |t| {
        go(t, &mut privileged(shaped(Place::Crio, "mount", "/bin/mount -t tmpfs none /mnt", &["mount"])?))
    }),
    ct("ct-apt-get", &["Launch Package Management Process in Container"], Place::Crio, |t| {
        go(t, &mut shaped(Place::Crio, "apt", "/bin/apt-get update", &["apt-get"])?)
    }),
    ct("ct-nmap", &["Launch Suspicious Network Tool in Container"], Place::Containerd, |t| {
        go(t, &mut shaped(Place::Containerd, "nmap", "/bin/nmap 127.0.0.1", &["nmap"])?)
    }),
    ct("ct-scp", &["Launch Remote File Copy Tools in Container"], Place::Docker, |t| {
        go(t, &mut shaped(Place::Docker, "scp", "/bin/scp /etc/hostname 127.0.0.1:/tmp/x", &["scp"])?)
    }),
    ct("ct-wget", &["Launch Ingress Remote File Copy Tools in Container"], Place::Crio, |t| {
        go(t, &mut shaped(Place::Crio, "wget", "/bin/wget -q -T 1 http://127.0.0.1:9/x", &["wget"])?)
    }),
    ct("ct-kubectl", &["Kubernetes Client Tool Launched in Container"], Place::Containerd, |t| {
        go(t, &mut shaped(Place::Containerd, "kubectl", "/bin/kubectl get pods", &["kubectl"])?)
    }),
    ct("ct-base64-decode", &["Decoding Payload in Container"], Place::Docker, |t| {
        go(t, &mut shaped(Place::Docker, "b64", "/bin/busybox echo aGk= | /bin/base64 -d", &["base64"])?)
    }),
    ct("ct-read-environ", &["Read environment variable from /proc files"], Place::Crio, |t| {
        go(t, &mut shaped(Place::Crio, "environ", "/bin/cat /proc/1/environ > /dev/null", &["cat"])?)
    }),
    ct("ct-unshare", &["Change namespace privileges via unshare"], Place::Containerd, |t| {
        go(t, &mut shaped(Place::Containerd, "unshare", "/bin/unshare -u /bin/true", &["unshare", "true"])?)
    }),
    ct("ct-host-path", &["Container Access to Host Sensitive Paths"], Place::Docker, |t| {
        let mut c = shaped(Place::Docker, "hostpath", "/bin/cat /host/etc/hostname > /dev/null", &["cat"])?;
        let dir = c.bundle.join("rootfs/host/etc");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("hostname"), "battery\n")?;
        go(t, &mut c)
    }),
    ct("ct-chmod-setuid", &["Set Setuid or Setgid bit"], Place::Crio, |t| {
        go(
            t,
            &mut shaped(
                Place::Crio,
                "suid",
                "/bin/busybox cp /bin/busybox /tmp/s; /bin/chmod u+s /tmp/s",
                &["chmod"],
            )?,
        )
    }),
    ct(
        "ct-metadata-service",
        &[
            "Contact EC2 Instance Metadata Service From Container",
            "Contact cloud metadata service from container",
        ],
        Place::Containerd,
        |t| {
            // The address is the container's own loopback's: nothing leaves it.
            let s =
                nc_to_itself("/bin/busybox ip addr add 169.254.169.254/32 dev lo; ", "169.254.169.254", 80);
            go(t, &mut shaped(Place::Containerd, "imds", &s, &["nc", "true"])?.cap("CAP_NET_ADMIN"))
        },
    ),
    ct("ct-api-server-by-address", &[], Place::Containerd, |t| {
        // Falco's k8s_api_server is a name (kubernetes.default...): not resolvable
        // here, so a connect to 6443 must not alert in either sensor.
        let s = nc_to_itself("", "127.0.0.1", 6443);
        go(t, &mut shaped(Place::Containerd, "k8sapi", &s, &["nc", "true"])?.cap("CAP_NET_ADMIN"))
    }),
    ct("ct-drop-and-execute", &["Drop and execute new binary in container"], Place::Docker, drop_and_execute),
];

/// The script of every container: the behaviour, then "ready" and a wait on
/// stdin, so that the sensors read the runtime's state while it exists.
fn script(body: &str) -> String {
    format!("{body}; /bin/busybox echo ready-{}; /bin/busybox head -n 1", std::process::id())
}

/// A container shaped as `place`'s runtime makes them, with busybox under
/// each of `applets`' names.
fn shaped(place: Place, tag: &str, body: &str, applets: &[&str]) -> Result<Runc> {
    let pid = std::process::id();
    let id = format!(
        "{:08x}{:056x}",
        pid,
        tag.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
    );
    let (name, cgroup, ann) = match place {
        Place::Docker => (id.clone(), format!("/docker/{id}"), json!({})),
        Place::Containerd => (
            id.clone(),
            format!("/k8s.io/{id}"),
            json!({
                "io.kubernetes.cri.container-type": "container",
                "io.kubernetes.cri.container-name": tag,
                "io.kubernetes.cri.image-name": "docker.io/library/busybox:1.35",
                "io.kubernetes.cri.sandbox-name": format!("{tag}-battery"),
                "io.kubernetes.cri.sandbox-namespace": "harrier-battery",
                "io.kubernetes.cri.sandbox-uid": "2c9a3f0e-7b1d-4e55-9c1a-5f0e2d7b4a10",
                "io.kubernetes.cri.sandbox-id": format!("{:064x}", 0x5a4d_b0c5u64),
            }),
        ),
        Place::Crio => (
            id.clone(),
            format!("/crio-{id}.scope"),
            json!({
                "io.kubernetes.container.name": tag,
                "io.kubernetes.pod.name": format!("{tag}-battery"),
                "io.kubernetes.pod.namespace": "harrier-battery",
                "io.kubernetes.cri-o.ImageName": "docker.io/library/busybox:1.35",
            }),
        ),
        Place::Runc | Place::Host => {
            let n = format!("hrbat-{tag}-{pid}");
            (n.clone(), format!("/{n}"), json!({}))
        }
    };
    let c = Runc::new(&name, &cgroup, &script(body), ann)?;
    for a in applets {
        crate::kit::copy_executable("/bin/busybox", &c.bundle.join("rootfs/bin").join(a))?;
    }
    Ok(c)
}

fn privileged(mut c: Runc) -> Runc {
    for cap in crate::runc::ALL_CAPS {
        c = c.cap(cap);
    }
    c
}

/// A container's script that brings its loopback up, runs `setup`, listens
/// with nc on `port` and connects to `addr`:`port` until the listener is there
/// (50 tries): the traffic never leaves the container.
fn nc_to_itself(setup: &str, addr: &str, port: u16) -> String {
    format!(
        "/bin/busybox ip link set lo up; {setup}/bin/nc -l -p {port} -e /bin/true & \
         i=0; until /bin/nc {addr} {port} -e /bin/true; do i=$((i+1)); \
         [ $i -ge 50 ] && break; /bin/busybox usleep 20000; done; wait"
    )
}

/// Starts the container, waits for its behaviour, tells the caller (who may
/// have the sensors read the events while the container exists), lets it end.
fn go(t: &Tools, c: &mut Runc) -> Result<()> {
    c.start()?;
    c.wait_for("ready")?;
    t.container_ready();
    c.finish()
}

/// A busybox "downloaded" into the container's overlay upper layer and run.
fn drop_and_execute(t: &Tools) -> Result<()> {
    let mut c = shaped(Place::Docker, "drop", "/bin/busybox true; /bin/hrdrop true", &[])?;
    let b = c.bundle.clone();
    let (lower, upper, work, root) =
        (b.join("lower/bin"), b.join("upper/bin"), b.join("work"), b.join("rootfs"));
    for d in [&lower, &upper, &work] {
        std::fs::create_dir_all(d)?;
    }
    for a in ["busybox", "sh"] {
        crate::kit::copy_executable("/bin/busybox", &lower.join(a))?;
    }
    crate::kit::copy_executable("/bin/busybox", &upper.join("hrdrop"))?;
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        b.join("lower").display(),
        b.join("upper").display(),
        work.display()
    );
    let st = std::process::Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &opts])
        .arg(&root)
        .status()?;
    anyhow::ensure!(st.success(), "mounting the overlay: {st}");
    let r = go(t, &mut c);
    let _ = std::process::Command::new("umount").arg(&root).status();
    r
}

#[cfg(test)]
mod tests {
    /// The scripts are part of the recorded expected values (proc.cmdline of
    /// the container's shell): the helper must write them as they were.
    #[test]
    fn nc_scripts_are_the_recorded_ones() {
        assert_eq!(
            super::nc_to_itself(
                "/bin/busybox ip addr add 169.254.169.254/32 dev lo; ",
                "169.254.169.254",
                80
            ),
            "/bin/busybox ip link set lo up; /bin/busybox ip addr add 169.254.169.254/32 dev lo; \
             /bin/nc -l -p 80 -e /bin/true & \
             i=0; until /bin/nc 169.254.169.254 80 -e /bin/true; do i=$((i+1)); \
             [ $i -ge 50 ] && break; /bin/busybox usleep 20000; done; wait"
        );
    }
}
