//! `harrier bypass`: loads the BPF side of the syscall bypass, pins it under
//! /sys/fs/bpf/harrier-bypass and exits; `stop` invalidates every slot, then
//! removes the pins; `status` reports. The library that reads the map is
//! bypass/harrier-bypass.c (libharrier-bypass.so); the layout is
//! bpf/include/bypass.h. Design notes: bypass/README.md.

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, UprobeOpts};
use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[allow(clippy::all, dead_code, non_camel_case_types, unused_imports)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/bypass.skel.rs"));
}
use skel::BypassSkelBuilder;

/// Where `start` pins programs, links and maps.
pub const PIN_DIR: &str = "/sys/fs/bpf/harrier-bypass";
/// bpffs mount point; `start` mounts it if needed and `stop` undoes that.
pub const BPFFS: &str = "/sys/fs/bpf";
/// What `start` changed on the machine (bpffs mount, libraries), for `stop`/`status`.
pub const STATE_FILE: &str = "/run/harrier-bypass.state";
/// The library built by `cargo build` (target/<profile>/libharrier-bypass.so).
pub const BUILT_LIB: &str = env!("HARRIER_BYPASS_LIB");
/// Directory with the C test and bench programs built next to the library.
pub const BUILD_DIR: &str = env!("HARRIER_BYPASS_BUILD");
/// Where `make -C bypass install` puts the library (with `make install` it is
/// a symlink to /usr/local/lib/harrier/libharrier-bypass.so).
pub const INSTALLED_LIB: &str = "/usr/local/lib/libharrier-bypass.so";
/// Where `make install` and the Debian package put the library, relative to
/// the directory of the running binary (<prefix>/bin).
pub const LIB_FROM_BINDIR: &str = "../lib/harrier/libharrier-bypass.so";

// Mirrors bpf/include/bypass.h.
const HB_MAGIC: u32 = 0x5059_4248;
const HB_VERSION: u32 = 1;
const HB_WINDOW: u32 = 8;
const HB_ENTRY_SIZE: usize = 64;
const REGISTER_FN: &str = "harrier_bypass_register";
const REPORT_FN: &str = "harrier_bypass_report";
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
const STAT_NAMES: [&str; 12] = [
    "registered",
    "refused: stopped",
    "refused: uid quota",
    "refused: window full",
    "refused: duplicate nonce",
    "refused: shared TLS (CLONE_VM)",
    "freed: exit",
    "freed: exec",
    "freed: CLONE_VM clone",
    "freed: re-registration",
    "ppid epoch bumps",
    "exit reports",
];

/// Subcommands of `harrier bypass`.
#[derive(Debug, clap::Subcommand)]
pub enum BypassCommand {
    /// Load and pin the bypass programs and maps, then exit.
    Start(StartArgs),
    /// Invalidate every slot, then remove the pins (and unmount bpffs if start mounted it).
    Stop,
    /// Show slots in use, registrations, fallbacks and per-uid counts.
    Status,
}

#[derive(Debug, Clone, clap::Args)]
pub struct StartArgs {
    /// Number of slots (one per registered thread).
    #[arg(long, default_value_t = 8192)]
    pub slots: u32,
    /// Slots one uid may hold at once [default: slots/8].
    #[arg(long)]
    pub quota: Option<u32>,
    /// Library file(s) to attach the registration uprobe to (by inode, so every
    /// process mapping the file is covered). Default: the installed library
    /// (<bindir>/../lib/harrier, /usr/local/lib) and the one built by cargo,
    /// whichever exist.
    #[arg(long = "lib")]
    pub libs: Vec<PathBuf>,
}

impl Default for StartArgs {
    fn default() -> Self {
        StartArgs { slots: 8192, quota: None, libs: Vec::new() }
    }
}

pub fn run(cmd: BypassCommand) -> Result<()> {
    match cmd {
        BypassCommand::Start(a) => start(&a),
        BypassCommand::Stop => stop(),
        BypassCommand::Status => status(),
    }
}

/// True when the pins exist.
pub fn is_started() -> bool {
    Path::new(PIN_DIR).join("slots").exists()
}

fn need_root() -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("needs root (loading BPF programs and pinning them)");
    }
    Ok(())
}

#[derive(Default, Debug)]
struct State {
    mounted_bpffs: bool,
    /// Mode of an already mounted bpffs root that we made searchable (o+x).
    bpffs_mode: Option<u32>,
    libs: Vec<String>,
}

fn read_state() -> State {
    let mut st = State::default();
    if let Ok(s) = std::fs::read_to_string(STATE_FILE) {
        for line in s.lines() {
            match line.split_once('=') {
                Some(("mounted_bpffs", v)) => st.mounted_bpffs = v == "1",
                Some(("lib", v)) => st.libs.push(v.to_string()),
                Some(("bpffs_mode", v)) => st.bpffs_mode = u32::from_str_radix(v, 8).ok(),
                _ => {}
            }
        }
    }
    st
}

fn write_state(st: &State) -> Result<()> {
    let mut s = format!("mounted_bpffs={}\n", st.mounted_bpffs as u8);
    if let Some(m) = st.bpffs_mode {
        s += &format!("bpffs_mode={m:o}\n");
    }
    for l in &st.libs {
        s += &format!("lib={l}\n");
    }
    std::fs::write(STATE_FILE, s).with_context(|| format!("writing {STATE_FILE}"))
}

fn is_bpffs(path: &str) -> bool {
    let c = CString::new(path).unwrap();
    let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut sfs) == 0 && sfs.f_type as i64 == BPF_FS_MAGIC }
}

/// Mounts bpffs on /sys/fs/bpf unless something is mounted there already.
/// Returns whether we mounted it.
fn ensure_bpffs() -> Result<bool> {
    if is_bpffs(BPFFS) {
        return Ok(false);
    }
    if !Path::new(BPFFS).is_dir() {
        bail!("{BPFFS} does not exist");
    }
    let (src, dst, fs) = (c"bpf", CString::new(BPFFS).unwrap(), c"bpf");
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let r =
        unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), fs.as_ptr(), flags, c"mode=0755".as_ptr().cast()) };
    if r != 0 {
        bail!("mounting bpffs on {BPFFS}: {}", std::io::Error::last_os_error());
    }
    Ok(true)
}

/// A bpffs mounted by systemd is mode 0700: unprivileged processes could not
/// reach our 0666 pin. Make the root searchable (not listable); returns the
/// old mode if it was changed, for `stop` to restore.
fn make_bpffs_searchable() -> Result<Option<u32>> {
    let mode = std::fs::metadata(BPFFS)?.permissions().mode() & 0o7777;
    if mode & 0o001 != 0 {
        return Ok(None);
    }
    set_mode(Path::new(BPFFS), mode | 0o001)?;
    Ok(Some(mode))
}

/// Undoes what start did to /sys/fs/bpf: the mode change, or the mount if we
/// mounted it and nothing else is pinned there now (the kernel's own
/// maps.debug/progs.debug from bpf_preload do not count).
fn release_bpffs(st: &State) {
    if !is_bpffs(BPFFS) {
        return;
    }
    if let Some(m) = st.bpffs_mode {
        let _ = set_mode(Path::new(BPFFS), m);
    }
    if !st.mounted_bpffs {
        return;
    }
    let empty = std::fs::read_dir(BPFFS)
        .map(|d| d.flatten().all(|e| matches!(e.file_name().to_str(), Some("maps.debug" | "progs.debug"))))
        .unwrap_or(false);
    if !empty {
        eprintln!("harrier bypass: leaving {BPFFS} mounted: other pins live there now");
        return;
    }
    let dst = CString::new(BPFFS).unwrap();
    if unsafe { libc::umount2(dst.as_ptr(), 0) } != 0 {
        eprintln!("harrier bypass: unmounting {BPFFS}: {}", std::io::Error::last_os_error());
    }
}

/// The libraries that exist among: the one installed beside this binary, the
/// /usr/local one and the one built by cargo. Each file once: a symlink and its
/// target are one inode, and a second uprobe on it would register every thread twice.
fn default_libs() -> Vec<PathBuf> {
    let beside = std::env::current_exe().ok().and_then(|e| Some(e.parent()?.join(LIB_FROM_BINDIR)));
    existing_files_once(beside.into_iter().chain([INSTALLED_LIB, BUILT_LIB].map(PathBuf::from)))
}

/// The paths that are files, canonical (symlinks resolved), each file once, in order.
fn existing_files_once(paths: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for p in paths {
        if let Ok(c) = p.canonicalize() {
            if c.is_file() && !files.contains(&c) {
                files.push(c);
            }
        }
    }
    files
}

fn start(a: &StartArgs) -> Result<()> {
    need_root()?;
    if is_started() {
        bail!("already started (pins under {PIN_DIR}); run `harrier bypass stop` first");
    }
    if a.slots == 0 || a.slots > 1 << 20 {
        bail!("--slots must be between 1 and {}", 1 << 20);
    }
    let quota = a.quota.unwrap_or((a.slots / 8).max(1));
    if quota == 0 {
        bail!("--quota must be at least 1");
    }
    let libs: Vec<PathBuf> = if a.libs.is_empty() { default_libs() } else { a.libs.clone() };
    if libs.is_empty() {
        bail!(
            "no libharrier-bypass.so found (looked for <bindir>/{LIB_FROM_BINDIR}, {INSTALLED_LIB}, {BUILT_LIB}); \
             pass --lib"
        );
    }
    let mut canon = Vec::new();
    for l in &libs {
        let c = l.canonicalize().with_context(|| format!("library {}", l.display()))?;
        canon.push(c);
    }
    // A half-made directory from an interrupted start is ours to clean.
    let _ = remove_pins();
    let mounted = ensure_bpffs()?;
    let bpffs_mode = if mounted { None } else { make_bpffs_searchable()? };
    let st = State {
        mounted_bpffs: mounted,
        bpffs_mode,
        libs: canon.iter().map(|p| p.display().to_string()).collect(),
    };
    if let Err(e) = load_and_pin(a.slots, quota, &canon).and_then(|_| write_state(&st)) {
        let _ = remove_pins();
        release_bpffs(&st);
        let _ = std::fs::remove_file(STATE_FILE);
        return Err(e);
    }
    println!(
        "harrier bypass: started ({} slots, quota {} per uid, {} librar{})",
        a.slots,
        quota,
        canon.len(),
        if canon.len() == 1 { "y" } else { "ies" }
    );
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

fn load_and_pin(nslots: u32, quota: u32, libs: &[PathBuf]) -> Result<()> {
    harrier_kernel::check(harrier_kernel::BYPASS)?;
    let mut storage = MaybeUninit::uninit();
    let mut open = BypassSkelBuilder::default().open(&mut storage).context("opening BPF object")?;
    {
        let ro = open.maps.rodata_data.as_deref_mut().context("no .rodata")?;
        ro.nslots = nslots;
        ro.quota = quota;
    }
    open.maps.slots.set_max_entries(nslots + 1)?;
    let mut skel = open.load().context("loading BPF programs (see the verifier log above)")?;

    // Header, then freeze: from now on only BPF programs can write the array.
    let mut hdr = [0u8; HB_ENTRY_SIZE];
    for (i, v) in [HB_MAGIC, HB_VERSION, nslots, 0, 0, quota, HB_WINDOW].iter().enumerate() {
        hdr[i * 4..i * 4 + 4].copy_from_slice(&v.to_ne_bytes());
    }
    skel.maps.slots.update(&0u32.to_ne_bytes(), &hdr, MapFlags::ANY).context("writing the header")?;
    if unsafe { libbpf_sys::bpf_map_freeze(skel.maps.slots.as_fd().as_raw_fd()) } != 0 {
        bail!("freezing the slot map: {}", std::io::Error::last_os_error());
    }

    let mut links: Vec<(String, Link)> = Vec::new();
    for (i, lib) in libs.iter().enumerate() {
        for (prog, func, name) in
            [(&skel.progs.hb_register, REGISTER_FN, "register"), (&skel.progs.hb_report, REPORT_FN, "report")]
        {
            let opts = UprobeOpts { func_name: Some(func.into()), ..Default::default() };
            // pid -1: every process that maps this file (uprobes are per inode).
            let l = prog
                .attach_uprobe_with_opts(-1, lib, 0, opts)
                .with_context(|| format!("attaching uprobe to {func} in {}", lib.display()))?;
            links.push((format!("link_{name}_{i}"), l));
        }
    }
    links.push(("link_newtask".into(), skel.progs.hb_newtask.attach().context("attaching task_newtask")?));
    links.push(("link_exec".into(), skel.progs.hb_exec.attach().context("attaching sched_process_exec")?));
    links.push(("link_exit".into(), skel.progs.hb_exit.attach().context("attaching sched_process_exit")?));

    let dir = Path::new(PIN_DIR);
    std::fs::create_dir(dir).with_context(|| format!("creating {PIN_DIR}"))?;
    set_mode(dir, 0o755)?;
    // The slot map is world readable and writable *as a file* so that any user
    // can BPF_OBJ_GET it and mmap it; freezing makes every write fail.
    skel.maps.slots.pin(dir.join("slots"))?;
    set_mode(&dir.join("slots"), 0o666)?;
    for (m, name) in [
        (&mut skel.maps.task_slot, "task_slot"),
        (&mut skel.maps.uid_stats, "uid_stats"),
        (&mut skel.maps.stats, "stats"),
    ] {
        m.pin(dir.join(name))?;
        set_mode(&dir.join(name), 0o600)?;
    }
    for (p, name) in [
        (&mut skel.progs.hb_register, "hb_register"),
        (&mut skel.progs.hb_report, "hb_report"),
        (&mut skel.progs.hb_newtask, "hb_newtask"),
        (&mut skel.progs.hb_exec, "hb_exec"),
        (&mut skel.progs.hb_exit, "hb_exit"),
        (&mut skel.progs.hb_disable, "hb_disable"),
    ] {
        p.pin(dir.join(format!("prog_{name}")))?;
    }
    for (name, l) in links.iter_mut() {
        l.pin(dir.join(&*name))?;
    }
    Ok(())
}

/// Runs the pinned hb_disable program once (BPF_PROG_TEST_RUN): sets the
/// header's `disabled` and clears every slot.
fn run_disable(fd: i32) -> Result<()> {
    let mut opts: libbpf_sys::bpf_test_run_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _;
    let r = unsafe { libbpf_sys::bpf_prog_test_run_opts(fd, &mut opts) };
    if r != 0 || opts.retval != 0 {
        bail!("running hb_disable: {} (retval {})", std::io::Error::last_os_error(), opts.retval);
    }
    Ok(())
}

fn remove_pins() -> Result<()> {
    let dir = Path::new(PIN_DIR);
    if !dir.exists() {
        return Ok(());
    }
    for e in std::fs::read_dir(dir)? {
        std::fs::remove_file(e?.path())?;
    }
    std::fs::remove_dir(dir)?;
    Ok(())
}

fn stop() -> Result<()> {
    need_root()?;
    let st = read_state();
    if !is_started() {
        // Leftovers of an interrupted stop/start are still undone.
        let _ = remove_pins();
        release_bpffs(&st);
        let _ = std::fs::remove_file(STATE_FILE);
        bail!("not started");
    }
    let path = CString::new(format!("{PIN_DIR}/prog_hb_disable")).unwrap();
    let fd = unsafe { libbpf_sys::bpf_obj_get(path.as_ptr()) };
    if fd < 0 {
        bail!("opening {}: {}", path.to_string_lossy(), std::io::Error::last_os_error());
    }
    // 1. Mark everything invalid: processes fall back from their next call on,
    //    and new registrations are refused.
    let r = run_disable(fd);
    // 2. Detach: links go away with their pins.
    for e in std::fs::read_dir(PIN_DIR)?.flatten() {
        if e.file_name().to_string_lossy().starts_with("link_") {
            let _ = std::fs::remove_file(e.path());
        }
    }
    // 3. A registration that had read `disabled == 0` just before step 1 may
    //    have filled a slot since; links are released asynchronously (RCU),
    //    so wait a little and clear again.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let r2 = run_disable(fd);
    unsafe { libc::close(fd) };
    remove_pins().with_context(|| format!("removing {PIN_DIR}"))?;
    release_bpffs(&st);
    let _ = std::fs::remove_file(STATE_FILE);
    r.and(r2)?;
    println!("harrier bypass: stopped");
    Ok(())
}

/// Read-only view of the pinned slot map (what the library sees).
struct SlotView {
    ptr: *const u8,
    len: usize,
}

impl SlotView {
    fn open() -> Result<SlotView> {
        let m = MapHandle::from_pinned_path(format!("{PIN_DIR}/slots"))?;
        let n = m.info()?.info.max_entries as usize;
        let len = n * HB_ENTRY_SIZE;
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, m.as_fd().as_raw_fd(), 0)
        };
        if ptr == libc::MAP_FAILED {
            bail!("mmap of the slot map: {}", std::io::Error::last_os_error());
        }
        Ok(SlotView { ptr: ptr as *const u8, len })
    }
    fn u32_at(&self, entry: usize, off: usize) -> u32 {
        assert!(entry * HB_ENTRY_SIZE + off + 4 <= self.len);
        unsafe { std::ptr::read_volatile(self.ptr.add(entry * HB_ENTRY_SIZE + off) as *const u32) }
    }
    fn u64_at(&self, entry: usize, off: usize) -> u64 {
        assert!(entry * HB_ENTRY_SIZE + off + 8 <= self.len);
        unsafe { std::ptr::read_volatile(self.ptr.add(entry * HB_ENTRY_SIZE + off) as *const u64) }
    }
}

impl Drop for SlotView {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.ptr as *mut _, self.len) };
    }
}

/// Numbers `status` prints; also used by the tests.
#[derive(Debug, Default)]
pub struct Status {
    pub nslots: u32,
    pub quota: u32,
    pub disabled: bool,
    pub ppid_epoch: u32,
    pub in_use: u32,
    pub stats: Vec<(String, u64)>,
    /// uid, in_use, registrations, refused, reported bypassed, reported fallbacks
    pub uids: Vec<(u32, i64, u64, u64, u64, u64)>,
}

pub fn read_status() -> Result<Status> {
    if !is_started() {
        bail!("not started");
    }
    let v = SlotView::open()?;
    let mut s = Status {
        nslots: v.u32_at(0, 8),
        disabled: v.u32_at(0, 12) != 0,
        ppid_epoch: v.u32_at(0, 16),
        quota: v.u32_at(0, 20),
        ..Default::default()
    };
    s.in_use = (1..=s.nslots as usize).filter(|&i| v.u64_at(i, 8) != 0).count() as u32;
    let stats = MapHandle::from_pinned_path(format!("{PIN_DIR}/stats"))?;
    for (i, name) in STAT_NAMES.iter().enumerate() {
        let val = stats.lookup(&(i as u32).to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        let n = val.get(..8).map(|b| u64::from_ne_bytes(b.try_into().unwrap())).unwrap_or(0);
        s.stats.push((name.to_string(), n));
    }
    let uids = MapHandle::from_pinned_path(format!("{PIN_DIR}/uid_stats"))?;
    for k in uids.keys() {
        if let Some(val) = uids.lookup(&k, MapFlags::ANY)? {
            let f = |i: usize| u64::from_ne_bytes(val[i * 8..i * 8 + 8].try_into().unwrap());
            let uid = u32::from_ne_bytes(k[..4].try_into().unwrap());
            s.uids.push((uid, f(0) as i64, f(1), f(2), f(3), f(4)));
        }
    }
    s.uids.sort();
    Ok(s)
}

fn status() -> Result<()> {
    let s = read_status()?;
    let st = read_state();
    println!("harrier bypass: {} (pins under {PIN_DIR})", if s.disabled { "disabled" } else { "running" });
    for l in &st.libs {
        println!("library: {l}");
    }
    println!("slots in use: {} of {} (quota {} per uid)", s.in_use, s.nslots, s.quota);
    println!("ppid epoch: {}", s.ppid_epoch);
    for (name, n) in &s.stats {
        println!("{name:<32} {n}");
    }
    println!("per uid (fallbacks/bypassed as reported by processes at exit):");
    println!(
        "{:>8} {:>7} {:>13} {:>8} {:>14} {:>14}",
        "uid", "in_use", "registrations", "refused", "bypassed", "fallbacks"
    );
    for (uid, in_use, reg, refused, b, f) in &s.uids {
        println!("{uid:>8} {in_use:>7} {reg:>13} {refused:>8} {b:>14} {f:>14}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::existing_files_once;
    #[test]
    fn a_library_and_its_symlink_are_one_file() {
        let dir = std::env::temp_dir().join(format!("harrier-bypass-libs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("harrier")).unwrap();
        let lib = dir.join("harrier/libharrier-bypass.so");
        std::fs::write(&lib, b"").unwrap();
        let link = dir.join("libharrier-bypass.so");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("harrier/libharrier-bypass.so", &link).unwrap();
        let want = vec![lib.canonicalize().unwrap()];
        let got = existing_files_once([link, dir.join("missing.so"), dir.clone(), lib]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            got, want,
            "one entry for the file and its symlink; none for a missing path or a directory"
        );
    }
}
