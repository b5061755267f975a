//! Output fields rendered as Falco 0.44.1 (libs 0.25.4) renders them, over synthetic
//! events (no BPF): proc.cwd ends with '/', proc.sname names the session leader (empty
//! when unknown), user and group names are the effective ids' ("<NA>" when unknown,
//! "root" for 0), and every alert's output_fields carry evt.time in ns.

use harrier_engine::state::EngineState;
use harrier_engine::Engine;
use harrier_outputs::sinks::Sink;
use harrier_outputs::{Alert, Limits, Outputs};
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use harrier_state::testing::{exec, fork, syscall, P};
use serde_json::json;
use std::sync::{Arc, Mutex};

struct Collect(Arc<Mutex<Vec<Alert>>>);
impl Sink for Collect {
    fn send(&mut self, a: &Alert) -> anyhow::Result<()> {
        self.0.lock().unwrap().push(a.clone());
        Ok(())
    }
}

fn engine(rule: &str) -> (Engine, Arc<Mutex<Vec<Alert>>>) {
    let opts = LoadOptions { supported: Arc::new(harrier_engine::source::supported), ..Default::default() };
    let rules = RuleSet::load(&[("t.yaml", rule)], &opts).expect("the rule loads");
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut outs = Outputs::new(Limits::default());
    outs.add("collect", Box::new(Collect(got.clone())));
    (Engine::new(rules, EngineState::new(), outs, RuleMatching::All), got)
}

fn alerts(engine: Engine, got: &Arc<Mutex<Vec<Alert>>>) -> Vec<Alert> {
    engine.into_outputs().close(std::time::Duration::from_secs(2));
    got.lock().unwrap().clone()
}

/// Ids and places of one synthetic exec.
struct Who<'a> {
    euid: i64,
    egid: i64,
    loginuid: i64,
    sid: i64,
    cwd: &'a str,
}

/// `tid` forked from `parent` execs `exe` as `who`.
fn spawn(e: &mut Engine, ts: u64, parent: u32, tid: u32, exe: &str, who: &Who) {
    let name = exe.rsplit('/').next().unwrap();
    e.on_event(&fork(ts, parent, tid, tid, "parent"));
    e.on_event(&exec(ts + 1, tid, tid, name, "/"));
    e.on_event(&syscall(
        ts + 2,
        tid,
        "execve",
        0,
        &[
            ("exe", P::B(exe.as_bytes())),
            ("args", P::B(exe.as_bytes())),
            ("cwd", P::B(who.cwd.as_bytes())),
            ("uid", P::I(who.euid)),
            ("euid", P::I(who.euid)),
            ("gid", P::I(who.egid)),
            ("egid", P::I(who.egid)),
            ("loginuid", P::I(who.loginuid)),
            ("sid", P::I(who.sid)),
            ("vpid", P::I(tid as i64)),
        ],
    ));
}

const RULE: &str = "- rule: r\n  desc: d\n  condition: evt.type = openat\n  output: \"cwd=%proc.cwd sname=%proc.sname user=%user.name uid=%user.uid login=%user.loginname loginuid=%user.loginuid group=%group.name gid=%group.gid home=%user.homedir\"\n  priority: WARNING\n";

fn open(e: &mut Engine, ts: u64, tid: u32) {
    e.on_event(&syscall(ts, tid, "openat", 3, &[("dirfd", P::I(-100)), ("path", P::B(b"/etc/hostname"))]));
}

#[test]
fn process_and_user_fields_render_as_falco_renders_them() {
    let (mut e, got) = engine(RULE);
    // A login shell leading its session (sid 7001, loginuid 0), a child of it running
    // as root in /tmp, and a process of unknown ids whose session leader is unknown.
    let root = Who { euid: 0, egid: 0, loginuid: 0, sid: 7001, cwd: "/root" };
    spawn(&mut e, 10, 1, 7001, "/usr/bin/bash", &root);
    spawn(&mut e, 20, 7001, 7002, "/usr/bin/cat", &Who { loginuid: u32::MAX as i64, cwd: "/tmp", ..root });
    let ghost = 4_000_123;
    let nobody = Who { euid: ghost, egid: ghost, loginuid: ghost, sid: 4_000_999, cwd: "/" };
    spawn(&mut e, 30, 1, 7003, "/usr/bin/cat", &nobody);
    open(&mut e, 40, 7002);
    open(&mut e, 41, 7003);
    open(&mut e, 42, 7001);
    let a = alerts(e, &got);
    assert_eq!(a.len(), 3, "{a:#?}");
    assert_eq!(
        a[0].output,
        "cwd=/tmp/ sname=bash user=root uid=0 login=<NA> loginuid=-1 group=root gid=0 home=/root"
    );
    assert_eq!(
        a[1].output,
        format!(
            "cwd=/ sname= user=<NA> uid={ghost} login=<NA> loginuid={ghost} group=<NA> gid={ghost} home=<NA>"
        )
    );
    assert_eq!(
        a[2].output,
        "cwd=/root/ sname=bash user=root uid=0 login=root loginuid=0 group=root gid=0 home=/root"
    );
    let f = &a[0].output_fields;
    assert_eq!(f["user.loginname"], json!("<NA>"), "a string, as Falco's JSON has it");
    assert_eq!(f["user.loginuid"], json!(-1));
    assert_eq!(f["proc.sname"], json!("bash"));
    assert_eq!(a[1].output_fields["proc.sname"], json!(""));
    // Falco's alerts carry the event time (ns, a number) in output_fields.
    assert_eq!(f["evt.time"], json!(a[0].time_ns));
}

#[test]
fn time_fields_are_text_in_the_output_and_ns_in_output_fields() {
    let rule = "- rule: r\n  desc: d\n  condition: evt.type = openat\n  output: at %evt.time on %evt.datetime raw %evt.rawtime\n  priority: WARNING\n";
    let (mut e, got) = engine(rule);
    spawn(&mut e, 10, 1, 7101, "/usr/bin/cat", &Who { euid: 0, egid: 0, loginuid: 0, sid: 7101, cwd: "/" });
    open(&mut e, 20, 7101);
    let a = alerts(e, &got);
    let f = &a[0].output_fields;
    for k in ["evt.time", "evt.datetime", "evt.rawtime"] {
        assert_eq!(f[k], json!(a[0].time_ns), "{k}: {f:?}");
    }
    assert!(a[0].output.starts_with("at ") && a[0].output.contains(':'), "{}", a[0].output);
}

/// Falco's parameter names and texts (driver/event_table.c, libsinsp's get_param_as_str):
/// chmod's `filename` and `mode` by flag names (what "Set Setuid or Setgid bit" tests),
/// fchmod's `fd` as `<f>path`, a relative unlinkat `name` made absolute, setuid's `uid`
/// as a user name, and `evt.args` as `name=number(resolved)`.
#[test]
fn event_parameters_render_with_falcos_names_and_texts() {
    let rule = "- rule: r\n  desc: d\n  condition: evt.type in (chmod, fchmod, unlinkat, setuid, renameat2, socket)\n  output: \"fd=%evt.arg.fd filename=%evt.arg.filename mode=%evt.arg.mode name=%evt.arg.name uid=%evt.arg.uid res=%evt.res args=[%evt.args]\"\n  priority: WARNING\n";
    let (mut e, got) = engine(rule);
    let tid = 7201;
    spawn(
        &mut e,
        10,
        1,
        tid,
        "/usr/bin/bash",
        &Who { euid: 0, egid: 0, loginuid: 0, sid: tid as i64, cwd: "/tmp/w" },
    );
    let path = |p: &'static str| P::B(p.as_bytes());
    e.on_event(&syscall(20, tid, "chmod", 0, &[("path", path("/usr/bin/x")), ("mode", P::I(0o4755))]));
    e.on_event(&syscall(
        21,
        tid,
        "openat",
        3,
        &[("dirfd", P::I(-100)), ("path", path("/etc/passwd")), ("fullpath", path("/etc/passwd"))],
    ));
    e.on_event(&syscall(22, tid, "fchmod", -1, &[("fd", P::I(3)), ("mode", P::I(0o2750))]));
    e.on_event(&syscall(
        23,
        tid,
        "unlinkat",
        -2,
        &[("dirfd", P::I(-100)), ("path", path("../.bash_history")), ("flags", P::I(0))],
    ));
    e.on_event(&syscall(24, tid, "setuid", 0, &[("uid", P::I(0))]));
    e.on_event(&syscall(
        25,
        tid,
        "renameat2",
        0,
        &[
            ("olddirfd", P::I(-100)),
            ("newdirfd", P::I(3)),
            ("flags", P::I(1)),
            ("oldpath", path("a")),
            ("newpath", path("b")),
        ],
    ));
    e.on_event(&syscall(
        26,
        tid,
        "socket",
        4,
        &[("domain", P::I(17)), ("type", P::I(3 | 0o2000000)), ("protocol", P::I(768))],
    ));
    let a: Vec<String> = alerts(e, &got).into_iter().map(|a| a.output).collect();
    assert_eq!(
        a,
        [
            "fd=<NA> filename=/usr/bin/x mode=S_IXOTH|S_IROTH|S_IXGRP|S_IRGRP|S_IXUSR|S_IWUSR|S_IRUSR|S_ISUID \
             name=<NA> uid=<NA> res=SUCCESS args=[res=0 filename=/usr/bin/x mode=04755(S_IXOTH|S_IROTH|S_IXGRP|S_IRGRP|S_IXUSR|S_IWUSR|S_IRUSR|S_ISUID)]",
            "fd=<f>/etc/passwd filename=<NA> mode=S_IXGRP|S_IRGRP|S_IXUSR|S_IWUSR|S_IRUSR|S_ISGID name=<NA> uid=<NA> \
             res=EPERM args=[res=-1(EPERM) fd=3(<f>/etc/passwd) mode=02750(S_IXGRP|S_IRGRP|S_IXUSR|S_IWUSR|S_IRUSR|S_ISGID)]",
            "fd=<NA> filename=<NA> mode=<NA> name=/tmp/.bash_history uid=<NA> res=ENOENT \
             args=[res=-2(ENOENT) dirfd=-100(AT_FDCWD) name=../.bash_history(/tmp/.bash_history) flags=0]",
            "fd=<NA> filename=<NA> mode=<NA> name=<NA> uid=root res=SUCCESS args=[res=0 uid=0(root)]",
            "fd=<NA> filename=<NA> mode=<NA> name=<NA> uid=<NA> res=SUCCESS \
             args=[res=0 olddirfd=-100(AT_FDCWD) oldpath=a(/tmp/w/a) newdirfd=3(<f>/etc/passwd) newpath=b(/etc/passwd/b) flags=1(RENAME_NOREPLACE)]",
            "fd=<o> filename=<NA> mode=<NA> name=<NA> uid=<NA> res=SUCCESS \
             args=[fd=4(<o>) domain=17(AF_PACKET) type=524291 proto=768 flags=4096(O_CLOEXEC)]",
        ]
    );
}

/// reopened-pipe (docs/falco-differences.md): a pipe reopened through
/// /proc/self/fd (make's and cargo's jobservers) is a pipe named as /proc names
/// it; Falco names it by the path asked for. Neither takes it for a write below
/// root (Falco's open_write and root_dir macros), which Harrier did when it typed
/// it a file with the directory "/".
#[test]
fn a_pipe_reopened_through_proc_is_a_pipe_and_no_write_below_root() {
    let rule = "- rule: below root\n  desc: d\n  condition: evt.type in (open,openat,openat2) and evt.is_open_write=true and fd.typechar='f' and fd.num>=0 and (fd.directory=/ or fd.name startswith /root/)\n  output: o\n  priority: WARNING\n- rule: fields\n  desc: d\n  condition: evt.type = openat\n  output: name=%fd.name type=%fd.type typechar=%fd.typechar dir=%fd.directory\n  priority: WARNING\n";
    let (mut e, got) = engine(rule);
    spawn(&mut e, 10, 1, 7201, "/usr/bin/rustc", &Who { euid: 0, egid: 0, loginuid: 0, sid: 7201, cwd: "/" });
    let open = |e: &mut Engine, ts, fd, path: &[u8], full: &[u8]| {
        let flags = libc::O_WRONLY as i64 | libc::O_NONBLOCK as i64;
        let p =
            [("dirfd", P::I(-100)), ("path", P::B(path)), ("flags", P::I(flags)), ("fullpath", P::B(full))];
        e.on_event(&syscall(ts, 7201, "openat", fd, &p));
    };
    open(&mut e, 20, 5, b"/proc/self/fd/4", b"pipe:[4242]");
    open(&mut e, 21, 6, b"/hr-file", b"/hr-file");
    let a = alerts(e, &got);
    let rules: Vec<(&str, &str)> = a.iter().map(|a| (a.rule.as_str(), a.output.as_str())).collect();
    assert_eq!(
        rules,
        [
            ("fields", "name=pipe:[4242] type=pipe typechar=p dir=<NA>"),
            ("below root", "o"),
            ("fields", "name=/hr-file type=file typechar=f dir=/"),
        ]
    );
}
