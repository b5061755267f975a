//! docs/fields.md is generated from schema/fields.tbl and must not be stale.

use std::path::PathBuf;

#[test]
fn fields_doc_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/fields.md");
    let want = harrier_rules::docs::fields_markdown();
    if std::env::var_os("UPDATE_FIELDS_DOC").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/fields.md is stale (schema/fields.tbl changed); regenerate it with:\n  {}",
        harrier_rules::docs::REGENERATE
    );
}

#[test]
fn every_field_of_falcos_files_is_in_the_table() {
    // The 43 distinct fields of the stable file's conditions, and the ones its outputs use.
    for name in [
        "evt.type",
        "evt.arg.flags",
        "evt.res",
        "evt.rawres",
        "evt.num",
        "evt.args",
        "evt.hostname",
        "evt.arg.request",
        "evt.arg.target",
        "evt.arg.oldpath",
        "evt.arg.newpath",
        "evt.arg.linkpath",
        "evt.arg.domain",
        "evt.is_open_read",
        "evt.is_open_write",
        "proc.name",
        "proc.cmdline",
        "proc.pname",
        "proc.args",
        "proc.tty",
        "proc.exepath",
        "proc.pcmdline",
        "proc.aname",
        "proc.pexe",
        "proc.exe",
        "proc.cwd",
        "proc.sname",
        "proc.pexepath",
        "proc.vpgid.name",
        "proc.vpgid.exe",
        "proc.ppid.duration",
        "proc.is_vpgid_leader",
        "proc.is_exe_upper_layer",
        "proc.is_exe_from_memfd",
        "proc.exe_ino.mtime",
        "proc.exe_ino.ctime",
        "proc.exe_ino.ctime_duration_proc_start",
        "proc.duration",
        "proc.aexepath",
        "proc.env",
        "thread.cap_effective",
        "thread.cap_permitted",
        "user.name",
        "user.uid",
        "user.loginuid",
        "user.loginname",
        "group.name",
        "group.gid",
        "fd.name",
        "fd.type",
        "fd.typechar",
        "fd.l4proto",
        "fd.rport",
        "fd.lport",
        "fd.directory",
        "fd.num",
        "fd.nameraw",
        "fd.sip",
        "fd.types",
        "fd.sport",
        "fd.snet",
        "fd.sip.name",
        "fd.net",
        "fd.name_changed",
        "fd.ip",
        "fd.filename",
        "fd.connected",
        "container.image.repository",
        "container.start_ts",
        "container.privileged",
        "container.id",
        "container.name",
        "container.mount.dest",
        "k8s.ns.name",
        "k8s.pod.name",
    ] {
        let base = name.strip_prefix("evt.arg.").map(|_| "evt.arg").unwrap_or(name);
        assert!(harrier_rules::fields::lookup(base).is_some(), "{name} missing from schema/fields.tbl");
    }
}
