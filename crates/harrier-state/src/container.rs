//! Containers: the id from a process's cgroup path, the rest from the
//! runtime's own state files under /run (and docker's under /var/lib).

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Container {
    /// Falco's container.id: the first 12 hex digits of a 64-hex id, or
    /// the name plain runc was given.
    pub id: Arc<str>,
    pub full_id: Arc<str>,
    pub name: Arc<str>,
    /// "busybox:1.36" (container.image).
    pub image: Arc<str>,
    /// "busybox" (container.image.repository).
    pub image_repository: Arc<str>,
    pub privileged: bool,
    /// The runtime's creation time as it wrote it (RFC 3339), if known.
    pub created: Arc<str>,
    /// Which runtime layout the id came from ("docker", "containerd", "cri-o", "podman", "runc").
    pub runtime: &'static str,
    /// The Kubernetes pod the container belongs to, from the runtime's own
    /// metadata (empty fields outside Kubernetes).
    pub pod: Pod,
    /// Volumes mounted into it, in the runtime's order (container.mount*).
    pub mounts: Vec<Mount>,
}

/// A volume the runtime mounted into a container: docker's MountPoints, or
/// the bind mounts of the OCI config (its proc, sysfs and tmpfs mounts are
/// the runtime's own, not volumes, as in Falco's view of a container).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mount {
    pub source: Arc<str>,
    pub dest: Arc<str>,
    /// Docker's mode string ("z", "ro,Z"); empty from an OCI config.
    pub mode: Arc<str>,
    pub rdwr: bool,
    /// "rprivate", "shared"...; empty when the runtime did not say.
    pub propagation: Arc<str>,
}

impl std::fmt::Display for Mount {
    /// Falco's form: source:dest:mode:rdwr:propagation.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}:{}:{}", self.source, self.dest, self.mode, self.rdwr, self.propagation)
    }
}

const PROPAGATIONS: &[&str] = &["rprivate", "private", "rshared", "shared", "rslave", "slave"];

/// Docker's MountPoints (config.v2.json), ordered by destination.
fn docker_mounts(points: &Value) -> Vec<Mount> {
    let Some(points) = points.as_object() else { return Vec::new() };
    let mut out: Vec<Mount> = points
        .values()
        .map(|m| {
            let s = |k: &str| Arc::from(m[k].as_str().unwrap_or(""));
            let mode = m["Mode"].as_str().or(m["Relabel"].as_str()).unwrap_or("");
            Mount {
                source: s("Source"),
                dest: s("Destination"),
                mode: Arc::from(mode),
                rdwr: m["RW"].as_bool().unwrap_or(false),
                propagation: s("Propagation"),
            }
        })
        .collect();
    out.sort_by(|a, b| a.dest.cmp(&b.dest));
    out
}

/// The bind mounts of an OCI runtime spec.
fn oci_mounts(mounts: &Value) -> Vec<Mount> {
    let Some(mounts) = mounts.as_array() else { return Vec::new() };
    mounts
        .iter()
        .filter_map(|m| {
            let options: Vec<&str> = m["options"]
                .as_array()
                .map(|o| o.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let bind = m["type"] == "bind" || options.iter().any(|o| *o == "bind" || *o == "rbind");
            bind.then(|| Mount {
                source: Arc::from(m["source"].as_str().unwrap_or("")),
                dest: Arc::from(m["destination"].as_str().unwrap_or("")),
                mode: Arc::from(""),
                rdwr: !options.contains(&"ro"),
                propagation: Arc::from(
                    options.iter().copied().find(|o| PROPAGATIONS.contains(o)).unwrap_or(""),
                ),
            })
        })
        .collect()
}

/// What a container runtime records about a container's Kubernetes pod: the
/// CRI annotations in the OCI config (containerd: io.kubernetes.cri.sandbox-*,
/// cri-o: io.kubernetes.pod.*) or docker's labels (io.kubernetes.pod.*).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    pub name: Arc<str>,
    pub namespace: Arc<str>,
    pub uid: Arc<str>,
    /// The pod sandbox's full container id.
    pub sandbox_id: Arc<str>,
}

/// Where each pod field is written, by runtime: containerd's CRI annotations,
/// then the io.kubernetes.* keys cri-o's annotations and docker's labels share.
const POD_NAME: &[&str] = &["io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"];
const POD_NAMESPACE: &[&str] = &["io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"];
const POD_UID: &[&str] = &["io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"];
const POD_SANDBOX: &[&str] =
    &["io.kubernetes.cri.sandbox-id", "io.kubernetes.cri-o.SandboxID", "io.kubernetes.sandbox.id"];

impl Pod {
    /// Fills the fields still empty from a map of annotations or labels.
    fn fill(&mut self, map: &Value) {
        let first = |keys: &[&str]| keys.iter().find_map(|k| map[*k].as_str());
        set(&mut self.name, first(POD_NAME));
        set(&mut self.namespace, first(POD_NAMESPACE));
        set(&mut self.uid, first(POD_UID));
        set(&mut self.sandbox_id, first(POD_SANDBOX));
    }
}

/// How many lookups read a container's runtime files before empty metadata is kept.
const READ_TRIES: u8 = 64;

/// Runtime prefixes of systemd scope names and their runtime.
const SCOPES: &[(&str, &str)] = &[
    ("docker-", "docker"),
    ("cri-containerd-", "containerd"),
    ("crio-conmon-", "cri-o"),
    ("crio-", "cri-o"),
    ("libpod-conmon-", "podman"),
    ("libpod-", "podman"),
];

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The full container id and runtime for a cgroup path, if it is shaped like
/// a container's: docker (/docker/<id>, docker-<id>.scope), containerd/CRI
/// (/kubepods/.../<id>, cri-containerd-<id>.scope, /<namespace>/<id>), cri-o
/// (crio-<id>.scope), podman (libpod-<id>.scope). Plain runc names are
/// arbitrary: see [`Containers::lookup`].
pub fn id_from_cgroup(path: &str) -> Option<(&str, &'static str)> {
    for (depth, comp) in path.rsplit('/').filter(|c| !c.is_empty()).enumerate() {
        let comp = comp.strip_suffix(".scope").unwrap_or(comp);
        for (prefix, runtime) in SCOPES {
            if let Some(id) = comp.strip_prefix(prefix) {
                if is_hex64(id) {
                    return Some((id, runtime));
                }
            }
        }
        if is_hex64(comp) {
            // Bare 64-hex leaves: docker's cgroupfs driver, else containerd (CRI or /<namespace>/<id>).
            let runtime = if path.starts_with("/docker/") { "docker" } else { "containerd" };
            return Some((comp, runtime));
        }
        if depth >= 2 {
            break;
        }
    }
    None
}

/// Containers seen so far, by full id.
#[derive(Debug, Default)]
pub struct Containers {
    pub(crate) by_id: HashMap<Arc<str>, Arc<Container>>,
    /// Cgroup leaves checked and found not to be plain runc containers.
    not_containers: HashMap<Box<str>, ()>,
    /// Containers whose runtime files were not there yet: reads so far.
    unread: HashMap<Arc<str>, u8>,
    /// Where runtime state lives; tests point it elsewhere.
    pub run_dir: PathBuf,
    pub docker_dir: PathBuf,
}

impl Containers {
    pub fn new() -> Containers {
        Containers { run_dir: "/run".into(), docker_dir: "/var/lib/docker".into(), ..Default::default() }
    }

    /// The container a cgroup path belongs to, None for the host. Called at
    /// exec: a new container's files are read once, then it is cached.
    pub fn lookup(&mut self, cgroup: &str) -> Option<Arc<Container>> {
        let (full, runtime) = match id_from_cgroup(cgroup) {
            Some(x) => x,
            None => {
                // Plain runc: the leaf is the name given to `runc run`, and
                // runc keeps its state under /run/runc/<name>.
                let leaf = cgroup.rsplit('/').find(|c| !c.is_empty())?;
                if let Some(c) = self.by_id.get(leaf) {
                    return Some(c.clone());
                }
                if self.not_containers.contains_key(leaf) {
                    return None;
                }
                if !self.run_dir.join("runc").join(leaf).join("state.json").exists() {
                    if self.not_containers.len() > 4096 {
                        self.not_containers.clear();
                    }
                    self.not_containers.insert(leaf.into(), ());
                    return None;
                }
                (leaf, "runc")
            }
        };
        if let Some(c) = self.by_id.get(full) {
            return Some(c.clone());
        }
        let (c, found) = self.read(full, runtime);
        let c = Arc::new(c);
        // A container seen before its runtime wrote its state (runc init's own
        // syscalls, before the entrypoint's exec) is read again at the next
        // exec, a few times, instead of keeping empty metadata for good.
        let tries = self.unread.entry(c.full_id.clone()).or_insert(0);
        *tries += 1;
        if found || *tries >= READ_TRIES {
            self.unread.remove(&c.full_id);
            self.by_id.insert(c.full_id.clone(), c.clone());
        } else if self.unread.len() > 4096 {
            self.unread.clear();
        }
        Some(c)
    }

    /// Forgets a container (its processes keep their Arc).
    pub fn remove(&mut self, full_id: &str) {
        self.by_id.remove(full_id);
    }

    pub fn get(&self, full_id: &str) -> Option<&Arc<Container>> {
        self.by_id.get(full_id)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// What the runtime's files say about a container; fields stay empty
    /// where nothing readable says more. True if any of its files was found.
    fn read(&self, full: &str, runtime: &'static str) -> (Container, bool) {
        let short = if is_hex64(full) { &full[..12] } else { full };
        let mut c = Container {
            id: short.into(),
            full_id: full.into(),
            name: Arc::from(""),
            image: Arc::from(""),
            image_repository: Arc::from(""),
            privileged: false,
            created: Arc::from(""),
            runtime,
            pod: Pod::default(),
            mounts: Vec::new(),
        };
        // Docker's own files name the image and the privileged flag.
        let docker = self.docker_dir.join("containers").join(full);
        let mut found = false;
        if let Some(cfg) = read_json(&docker.join("config.v2.json")) {
            found = true;
            set(&mut c.name, cfg["Name"].as_str().map(|n| n.trim_start_matches('/')));
            set(&mut c.image, cfg["Config"]["Image"].as_str());
            set(&mut c.created, cfg["Created"].as_str());
            c.pod.fill(&cfg["Config"]["Labels"]);
            c.mounts = docker_mounts(&cfg["MountPoints"]);
        }
        if let Some(host) = read_json(&docker.join("hostconfig.json")) {
            c.privileged = host["Privileged"].as_bool().unwrap_or(false);
        }
        // runc's state (plain runc, docker's and containerd's runc roots).
        let states =
            [self.run_dir.join("runc").join(full), self.run_dir.join("docker/runtime-runc/moby").join(full)];
        let mut bundle = None;
        let containerd_ns = subdirs(&self.run_dir.join("containerd/runc"));
        for dir in states.iter().cloned().chain(containerd_ns.into_iter().map(|ns| ns.join(full))) {
            if let Some(st) = read_json(&dir.join("state.json")) {
                found = true;
                set(&mut c.created, st["created"].as_str());
                bundle = st["config"]["labels"]
                    .as_array()
                    .and_then(|l| l.iter().filter_map(|s| s.as_str()?.strip_prefix("bundle=")).next())
                    .map(PathBuf::from);
                break;
            }
        }
        if bundle.is_none() {
            for ns in subdirs(&self.run_dir.join("containerd/io.containerd.runtime.v2.task")) {
                if ns.join(full).join("config.json").exists() {
                    bundle = Some(ns.join(full));
                }
            }
        }
        if let Some(spec) = bundle.and_then(|b| read_json(&b.join("config.json"))) {
            found = true;
            let ann = &spec["annotations"];
            c.pod.fill(ann);
            if c.mounts.is_empty() {
                c.mounts = oci_mounts(&spec["mounts"]);
            }
            let first = |keys: &[&str]| keys.iter().find_map(|k| ann[*k].as_str().filter(|s| !s.is_empty()));
            set(
                &mut c.name,
                first(&[
                    "io.kubernetes.cri.container-name",
                    "io.kubernetes.container.name",
                    "org.opencontainers.container.name",
                    "nerdctl/name",
                ]),
            );
            set(
                &mut c.image,
                first(&[
                    "io.kubernetes.cri.image-name",
                    "org.opencontainers.image.ref.name",
                    "io.containerd.image.name",
                    "org.opencontainers.image.name",
                ]),
            );
            // Privileged as docker means it: every capability in the bounding set.
            if let Some(bounding) = spec["process"]["capabilities"]["bounding"].as_array() {
                c.privileged |= bounding.len() >= 38 && bounding.iter().any(|v| v == "CAP_SYS_ADMIN");
            }
        }
        if c.name.is_empty() && runtime == "runc" {
            c.name = c.full_id.clone();
        }
        c.image_repository = Arc::from(repository(&c.image));
        (c, found)
    }
}

fn set(field: &mut Arc<str>, v: Option<&str>) {
    if let Some(v) = v.filter(|v| !v.is_empty()) {
        if field.is_empty() {
            *field = Arc::from(v);
        }
    }
}

fn read_json(p: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(p).ok()?).ok()
}

fn subdirs(p: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(p).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

/// An image reference without its tag or digest ("docker.io/library/busybox:1.36" →
/// "docker.io/library/busybox"), as Falco's container.image.repository.
pub fn repository(image: &str) -> &str {
    let image = image.split('@').next().unwrap_or(image);
    let slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[slash..].rfind(':') {
        Some(i) => &image[..slash + i],
        None => image,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f1c0e5a9b7d2e4f6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a3c5e7b9d0f";

    #[test]
    fn ids_from_the_runtimes_cgroup_layouts() {
        let cases = [
            (format!("/docker/{ID}"), "docker"),
            (format!("/system.slice/docker-{ID}.scope"), "docker"),
            (format!("/kubepods/burstable/pod1234-5678/{ID}"), "containerd"),
            (format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod12.slice/cri-containerd-{ID}.scope"), "containerd"),
            (format!("/kubepods.slice/kubepods-pod1.slice/crio-{ID}.scope"), "cri-o"),
            (format!("/machine.slice/libpod-{ID}.scope"), "podman"),
            (format!("/default/{ID}"), "containerd"),
        ];
        for (path, runtime) in &cases {
            assert_eq!(id_from_cgroup(path), Some((ID, *runtime)), "{path}");
        }
        for host in [
            "/",
            "/user.slice/user-0.slice/session-1.scope",
            "/process_api/1b6b99b43a1bf3257daf987c1eecc2e4",
            "/system.slice/docker.service",
        ] {
            assert_eq!(id_from_cgroup(host), None, "{host}");
        }
    }

    #[test]
    fn metadata_from_runc_state_and_bundle() {
        let dir = std::env::temp_dir().join(format!("harrier-state-ct-{}", std::process::id()));
        let bundle = dir.join("bundle");
        std::fs::create_dir_all(dir.join("run/runc/web1")).unwrap();
        std::fs::create_dir_all(&bundle).unwrap();
        let state = serde_json::json!({"created": "2026-11-22T10:00:00Z", "config": {"labels": [format!("bundle={}", bundle.display())]}});
        std::fs::write(dir.join("run/runc/web1/state.json"), state.to_string()).unwrap();
        let spec = serde_json::json!({"annotations": {
            "org.opencontainers.image.ref.name": "docker.io/library/busybox:1.36",
            "io.kubernetes.cri.sandbox-name": "web-7d4b9c",
            "io.kubernetes.cri.sandbox-namespace": "shop",
            "io.kubernetes.cri.sandbox-uid": "0b1c2d3e-aaaa-bbbb-cccc-111122223333",
            "io.kubernetes.cri.sandbox-id": ID,
        }});
        let mut spec = spec;
        spec["mounts"] = serde_json::json!([
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/host/etc", "type": "bind", "source": "/etc", "options": ["rbind", "ro", "rslave"]},
            {"destination": "/data", "source": "/srv/data", "options": ["bind"]},
        ]);
        std::fs::write(bundle.join("config.json"), spec.to_string()).unwrap();
        let mut cs =
            Containers { run_dir: dir.join("run"), docker_dir: dir.join("docker"), ..Default::default() };
        let c = cs.lookup("/web1").expect("a runc state dir makes it a container");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!((&*c.id, &*c.name, c.runtime), ("web1", "web1", "runc"));
        assert_eq!(&*c.image, "docker.io/library/busybox:1.36");
        assert_eq!(&*c.image_repository, "docker.io/library/busybox");
        assert_eq!(&*c.created, "2026-11-22T10:00:00Z");
        let pod = &c.pod;
        assert_eq!((&*pod.name, &*pod.namespace), ("web-7d4b9c", "shop"), "containerd's CRI annotations");
        assert_eq!((&*pod.uid, &*pod.sandbox_id), ("0b1c2d3e-aaaa-bbbb-cccc-111122223333", ID));
        let mounts: Vec<String> = c.mounts.iter().map(|m| m.to_string()).collect();
        assert_eq!(mounts, ["/etc:/host/etc::false:rslave", "/srv/data:/data::true:"], "bind mounts only");
        assert!(cs.lookup("/not-a-container").is_none());
    }

    #[test]
    fn a_container_seen_before_its_state_is_read_again() {
        let dir = std::env::temp_dir().join(format!("harrier-state-early-{}", std::process::id()));
        let mut cs =
            Containers { run_dir: dir.join("run"), docker_dir: dir.join("docker"), ..Default::default() };
        let cg = format!("/docker/{ID}");
        let early = cs.lookup(&cg).expect("a docker-shaped cgroup");
        assert_eq!((&*early.id, &*early.name), (&ID[..12], ""), "nothing written yet");
        let cfg = dir.join("docker/containers").join(ID);
        std::fs::create_dir_all(&cfg).unwrap();
        let v2 = serde_json::json!({"Name": "/web", "Config": {"Image": "nginx:1", "Labels": {"io.kubernetes.pod.namespace": "prod"}},
            "MountPoints": {"/var/run/docker.sock": {"Source": "/var/run/docker.sock", "Destination": "/var/run/docker.sock",
                "RW": true, "Relabel": "z", "Propagation": "rprivate"}}});
        std::fs::write(cfg.join("config.v2.json"), v2.to_string()).unwrap();
        let later = cs.lookup(&cg).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!((&*later.name, &*later.image, &*later.pod.namespace), ("web", "nginx:1", "prod"));
        let sock = "/var/run/docker.sock:/var/run/docker.sock:z:true:rprivate";
        assert_eq!(
            later.mounts.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
            [sock],
            "docker's MountPoints"
        );
        assert!(Arc::ptr_eq(&later, &cs.lookup(&cg).unwrap()), "then cached");
    }

    #[test]
    fn pods_from_docker_labels_and_cri_o_annotations() {
        let mut pod = Pod::default();
        pod.fill(&serde_json::json!({
            "io.kubernetes.pod.name": "api-0",
            "io.kubernetes.pod.namespace": "kube-system",
            "io.kubernetes.pod.uid": "u-1",
            "io.kubernetes.sandbox.id": "s-1",
        }));
        assert_eq!(
            (&*pod.name, &*pod.namespace, &*pod.uid, &*pod.sandbox_id),
            ("api-0", "kube-system", "u-1", "s-1")
        );
        let mut pod = Pod::default();
        pod.fill(
            &serde_json::json!({"io.kubernetes.pod.namespace": "ns", "io.kubernetes.cri-o.SandboxID": "s-2"}),
        );
        assert_eq!((&*pod.name, &*pod.namespace, &*pod.sandbox_id), ("", "ns", "s-2"), "cri-o");
        let mut host = Pod::default();
        host.fill(&serde_json::Value::Null);
        assert_eq!(host, Pod::default(), "no metadata, no pod");
    }

    #[test]
    fn repositories() {
        assert_eq!(repository("busybox"), "busybox");
        assert_eq!(repository("localhost:5000/app:1"), "localhost:5000/app");
        assert_eq!(repository("nginx@sha256:abc"), "nginx");
    }
}
