//! Probes through the kernel's BTF: named types and functions, and whether
//! an fentry program can be loaded and attached.

use libbpf_sys as sys;
use std::ffi::CString;

/// Some(true) when the kernel's BTF has `prefix + name` of `kind` for every
/// name; None without kernel BTF (the BTF feature names that).
pub(crate) fn has_all(names: &[&str], prefix: &str, kind: u32) -> Option<bool> {
    // Looked up quietly: libbpf_find_vmlinux_btf_id would print a warning
    // for each missing name before our one-line error.
    let btf = unsafe { sys::btf__load_vmlinux_btf() };
    if btf.is_null() {
        return None;
    }
    let all = names.iter().all(|n| find(btf, &format!("{prefix}{n}"), kind) >= 0);
    unsafe { sys::btf__free(btf) };
    Some(all)
}

fn find(btf: *mut sys::btf, name: &str, kind: u32) -> i32 {
    let c = CString::new(name).unwrap();
    unsafe { sys::btf__find_by_name_kind(btf, c.as_ptr(), kind) }
}

/// Loads `r0 = 0; exit` as an fentry program on `func` and attaches it for
/// a moment: Err(errno) if either fails. Kernels can have the BTF and still
/// refuse (this project's 6.18 VM: EPERM at load).
pub(crate) fn fentry_attaches(func: &str) -> Result<(), i32> {
    let btf = unsafe { sys::btf__load_vmlinux_btf() };
    if btf.is_null() {
        return Err(libc::ENOENT);
    }
    let id = find(btf, func, sys::BTF_KIND_FUNC);
    unsafe { sys::btf__free(btf) };
    if id < 0 {
        return Err(libc::ENOENT);
    }
    // BPF_ALU64 | BPF_MOV | BPF_K into r0, then BPF_JMP | BPF_EXIT.
    let mut insns: [sys::bpf_insn; 2] = unsafe { std::mem::zeroed() };
    insns[0].code = 0xb7;
    insns[1].code = 0x95;
    let mut opts = sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<sys::bpf_prog_load_opts>() as _,
        expected_attach_type: sys::BPF_TRACE_FENTRY,
        attach_btf_id: id as u32,
        ..Default::default()
    };
    let license = c"GPL";
    let fd = unsafe {
        sys::bpf_prog_load(
            sys::BPF_PROG_TYPE_TRACING,
            std::ptr::null(),
            license.as_ptr(),
            insns.as_ptr(),
            2,
            &mut opts,
        )
    };
    if fd < 0 {
        return Err(-fd);
    }
    let link = unsafe { sys::bpf_link_create(fd, 0, sys::BPF_TRACE_FENTRY, std::ptr::null()) };
    unsafe { libc::close(fd) };
    if link < 0 {
        return Err(-link);
    }
    unsafe { libc::close(link) };
    Ok(())
}

/// Why fentry on `func` is refused here, in words (None: it works).
pub(crate) fn fentry_refusal(func: &str) -> Option<String> {
    fentry_attaches(func).err().map(|e| {
        let msg = unsafe { std::ffi::CStr::from_ptr(libc::strerror(e)) }.to_string_lossy().into_owned();
        format!("an fentry program on {func} was refused: {msg}")
    })
}
