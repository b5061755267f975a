//! The battery's host behaviours.

use super::{Behaviour, Place, Tools};
use crate::behaviour as b;
use anyhow::{Context, Result};
use std::os::fd::AsRawFd;
use std::path::Path;

const fn host(
    name: &'static str,
    rules: &'static [&'static str],
    run: fn(&Tools) -> Result<()>,
) -> Behaviour {
    Behaviour { name, rules, place: Place::Host, run }
}

pub static HOST: &[Behaviour] = &[
    // event-generator's actions (the live and benchmark tests' behaviours).
    host("read-shadow", &["Read sensitive file untrusted"], |t| t.action("ReadSensitiveFileUntrusted")),
    host("directory-traversal", &["Directory traversal monitored file read"], |t| {
        t.action("DirectoryTraversalMonitoredFileRead")
    }),
    host("write-usr-local-bin", &["Write below monitored dir"], |t| t.action("WriteBelowBinaryDir")),
    host("setns", &["Change thread namespace"], |t| t.action("ChangeThreadNamespace")),
    host("shell-under-nginx", &["Run shell untrusted"], |t| t.action("RunShellUntrusted")),
    host("ptrace-attach", &["PTRACE attached to process"], |t| t.action("PTRACEAttachedToProcess")),
    host("ptrace-traceme", &["PTRACE anti-debug attempt"], |t| t.action("PTRACEAntiDebugAttempt")),
    host("exec-dev-shm", &["Execution from /dev/shm"], |t| t.action("ExecutionFromDevShm")),
    host("exec-memfd", &["Fileless execution via memfd_create"], |t| {
        t.action("FilelessExecutionViaMemfdCreate")
    }),
    host("truncate-log", &["Clear Log Activities"], |t| t.action("ClearLogActivities")),
    host("symlink-shadow", &["Create Symlink Over Sensitive Files"], |t| {
        t.action("CreateSymlinkOverSensitiveFiles")
    }),
    host("hardlink-sensitive", &["Create Hardlink Over Sensitive Files"], |t| {
        t.action("CreateHardlinkOverSensitiveFiles")
    }),
    host("find-private-keys", &["Search Private Keys or Passwords"], |t| {
        t.action("SearchPrivateKeysOrPasswords")
    }),
    host("find-aws-credentials", &["Find AWS Credentials"], |t| t.action("FindAWSCredentials")),
    host("shred", &["Remove Bulk Data from Disk"], |t| t.action("RemoveBulkDataFromDisk")),
    // Writes below the directories the sandbox rules watch.
    host("write-usr-bin", &["Write below binary dir"], |t| create_remove(t, "/usr/bin", "bin")),
    host("rename-usr-bin", &["Modify binary dirs"], rename_in_usr_bin),
    host("mkdir-usr-bin", &["Mkdir binary dirs"], |t| {
        let d = format!("/usr/bin/{}", t.unique("dir"));
        std::fs::create_dir(&d).with_context(|| format!("mkdir {d}"))?;
        Ok(std::fs::remove_dir(&d)?)
    }),
    host("write-etc", &["Write below etc"], |t| create_remove(t, "/etc", "etc")),
    host("write-root", &["Write below root"], |t| create_remove(t, "/root", "root")),
    host("write-usr-local-lib", &["Write below monitored dir"], |t| {
        create_remove(t, "/usr/local/lib", "lib")
    }),
    host("write-rpm-db", &["Write below rpm database"], |t| {
        if !Path::new("/var/lib/rpm").exists() {
            std::fs::create_dir(t.made("/var/lib/rpm"))?;
        }
        create_remove(t, "/var/lib/rpm", "rpm")
    }),
    host("write-cron-d", &["Schedule Cron Jobs"], |t| create_remove(t, "/etc/cron.d", "cron")),
    host("crontab", &["Schedule Cron Jobs"], |t| t.run(&t.tool("/bin/true", "crontab")?, &["-l"])),
    host("write-apt-sources", &["Update Package Repository"], |t| {
        create_remove(t, "/etc/apt/sources.list.d", "repo.list")
    }),
    host("create-below-dev", &["Create files below dev"], |t| create_remove(t, "/dev", "dev")),
    host("hidden-files", &[], |t| {
        // "Create Hidden Files or Directories" is disabled in Falco's sandbox file.
        let d = t.path(".hidden-dir");
        std::fs::create_dir(&d)?;
        std::fs::write(t.path(".hidden-file"), "x")?;
        std::fs::remove_dir(&d)?;
        Ok(std::fs::remove_file(t.path(".hidden-file"))?)
    }),
    // Permissions, history, shell configuration, ssh keys.
    host("chmod-setuid", &["Set Setuid or Setgid bit"], |t| {
        let f = t.tool("/bin/true", "hrsuid")?;
        t.run(Path::new("/usr/bin/chmod"), &["u+s", f.to_str().context("path")?])
    }),
    host("remove-bash-history", &["Delete or rename shell history"], |t| {
        let h = t.path(".bash_history");
        std::fs::write(&h, "ls\n")?;
        t.run(Path::new("/usr/bin/rm"), &[h.to_str().context("path")?])
    }),
    host("truncate-zsh-history", &["Delete or rename shell history"], |t| {
        let h = t.path(".zsh_history");
        std::fs::write(&h, "ls\n")?;
        b::truncate(&h)?;
        Ok(std::fs::remove_file(&h)?)
    }),
    host("write-bashrc", &["Modify Shell Configuration File"], |t| {
        let f = t.path(".bashrc");
        std::fs::write(&f, "# battery\n")?;
        Ok(std::fs::remove_file(&f)?)
    }),
    host("read-root-ssh", &["Read ssh information"], |t| {
        root_ssh(t)?;
        let k = format!("/root/.ssh/{}", t.unique("key"));
        std::fs::write(t.made(&k), "not a key\n")?;
        t.run(&t.tool("/bin/cat", "hrcat")?, &[&k])
    }),
    host("write-authorized-keys", &["Adding ssh keys to authorized_keys"], |t| {
        root_ssh(t)?;
        let d = t.made(format!("/root/.ssh/{}", t.unique("dir")));
        std::fs::create_dir_all(&d)?;
        let f = t.made(d.join("authorized_keys"));
        Ok(std::fs::write(f, "ssh-ed25519 AAAA battery\n")?)
    }),
    // Users and ids.
    host("useradd-userdel", &["User mgmt binaries"], |t| {
        let u = t.user("bat", false)?;
        t.run(Path::new("/usr/sbin/userdel"), &[&u])
    }),
    host("system-user-interactive", &["System user interactive"], system_user_interactive),
    host("non-sudo-setuid", &["Non sudo setuid"], |_| {
        as_nobody(|| unsafe {
            libc::syscall(libc::SYS_setuid, 0);
        })
    }),
    host(
        "userfaultfd-unprivileged",
        &["Unprivileged Delegation of Page Faults Handling to a Userspace Process"],
        |_| {
            as_nobody(|| unsafe {
                libc::syscall(libc::SYS_userfaultfd, 0);
            })
        },
    ),
    // Programs by name, arguments and environment.
    host("nmap-on-host", &["Launch Suspicious Network Tool on Host"], |t| {
        t.run(&t.tool("/bin/true", "nmap")?, &[])
    }),
    host("nc-exec-on-host", &["Launch Suspicious Network Tool on Host"], |t| {
        t.run(&t.tool("/bin/true", "nc")?, &["-e", "/bin/sh", "127.0.0.1", "9"])
    }),
    host("curl-with-proxy-env", &["Program run with disallowed http proxy env"], |t| {
        t.run_env(
            &t.tool("/bin/true", "curl")?,
            &["http://127.0.0.1:9/"],
            &[("HTTP_PROXY", "http://127.0.0.1:3128")],
        )
    }),
    host("glibc-tunables", &["Potential Local Privilege Escalation via Environment Variables Misuse"], |t| {
        t.run_env(&t.tool("/bin/true", "hrtunable")?, &[], &[("GLIBC_TUNABLES", "glibc.malloc.mxfast=0")])
    }),
    host("stratum-miner", &["Detect crypto miners using the Stratum protocol"], |t| {
        t.run(&t.tool("/bin/true", "hrminer")?, &["-o", "stratum+tcp://127.0.0.1:3333"])
    }),
    host("xmrig", &["Known Cryptominer Process Executed"], |t| t.run(&t.tool("/bin/true", "xmrig")?, &[])),
    host("sudoedit-backslash", &["Sudo Potential Privilege Escalation"], |t| {
        t.run(&t.tool("/bin/true", "sudoedit")?, &["-s", "\\"])
    }),
    host("pkexec-no-args", &["Polkit Local Privilege Escalation Vulnerability (CVE-2021-4034)"], |t| {
        t.run(&t.tool("/bin/true", "pkexec")?, &[])
    }),
    host("whoami-on-a-terminal", &["Basic Interactive Reconnaissance"], |t| {
        let w = t.tool("/usr/bin/whoami", "whoami")?;
        t.run(Path::new("/usr/bin/script"), &["-qec", &format!("exec {}", w.display()), "/dev/null"])
    }),
    host("nginx-runs-id", &["Web Server Spawned Suspicious Child Process"], |t| {
        let id = t.tool("/usr/bin/id", "id")?;
        t.run(&t.kit_nginx()?, &["-c", &format!("{}; true", id.display())])
    }),
    host("nginx-runs-bash-i", &["Reverse Shell from Web Server", "Run shell untrusted"], |t| {
        let bash = t.tool("/bin/true", "bash")?;
        t.run(&t.kit_nginx()?, &["-c", &format!("{} -i; true", bash.display())])
    }),
    host("mysqld-spawns", &["DB program spawned process"], |t| {
        let child = t.tool("/bin/true", "hrdbchild")?;
        t.run(&t.tool("/bin/dash", "mysqld")?, &["-c", &format!("{}; true", child.display())])
    }),
    host("nginx-reads-shadow-later", &["Read sensitive file trusted after startup"], |t| {
        // The server must have run for more than 5 s (Falco's proc_is_new).
        t.run(&t.kit_nginx()?, &["-c", "sleep 6; read x < /etc/shadow; true"])
    }),
    host("logrotate-truncates", &[], |t| {
        let log = t.made(format!("/var/log/{}", t.unique("rot")));
        std::fs::write(&log, "line\n")?;
        let sh = t.tool("/bin/dash", "logrotate")?;
        t.run(&sh, &["-c", &format!(": > {}", log.display())])
    }),
    // Network behaviours, loopback only.
    host("cat-connects", &["System procs network activity"], |t| {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port().to_string();
        let cat = t.tool("/usr/bin/perl", "cat")?;
        let code = "use IO::Socket::INET; IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ARGV[0]) or die";
        t.run(&cat, &["-e", code, &port])
    }),
    host("udp-to-loopback", &["Unexpected UDP Traffic"], |t| {
        let s = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let port = s.local_addr()?.port().to_string();
        let p = t.tool("/usr/bin/perl", "hrudp")?;
        let code = "use IO::Socket::INET; my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ARGV[0], Proto => 'udp') or die; $s->send('x')";
        t.run(&p, &["-e", code, &port])
    }),
    host("ssh-to-port-443", &["Disallowed SSH Connection Non Standard Port"], |t| {
        connect_in_netns(&t.tool("/usr/bin/perl", "hr-ssh")?, 443)
    }),
    host("bpf-prog-load", &["BPF Program Not Profiled"], |_| bpf_prog_load()),
];

impl Tools {
    /// A shell named nginx (a web server, for the rules).
    fn kit_nginx(&self) -> Result<std::path::PathBuf> {
        self.tool("/bin/dash", "nginx")
    }
}

/// Creates a file below `dir` (O_CREAT|O_WRONLY) and removes it.
fn create_remove(t: &Tools, dir: &str, tag: &str) -> Result<()> {
    b::create_and_remove(&t.made(Path::new(dir).join(t.unique(tag))))
}

/// A file written in /usr/bin, renamed there, removed.
fn rename_in_usr_bin(t: &Tools) -> Result<()> {
    let from = t.made(format!("/usr/bin/{}", t.unique("mv-a")));
    let to = t.made(format!("/usr/bin/{}", t.unique("mv-b")));
    std::fs::write(&from, "x")?;
    std::fs::rename(&from, &to)?;
    Ok(std::fs::remove_file(&to)?)
}

/// Falco's system users include `daemon`: a program it runs below a shell named
/// sshd (an ssh session), and `login` run as daemon.
fn system_user_interactive(t: &Tools) -> Result<()> {
    let sshd = t.tool("/bin/bash", "sshd")?;
    let id = t.tool("/usr/bin/id", "hr-id")?;
    let login = t.tool("/bin/true", "login")?;
    let as_daemon = "setpriv --reuid=daemon --regid=daemon --clear-groups";
    t.run(&sshd, &["-c", &format!("{as_daemon} {} -u; exit $?", id.display())])?;
    t.sh(&format!("exec {as_daemon} {}", login.display()))
}

/// Runs `f` in a forked child that first becomes nobody (raw syscalls only: the
/// caller may have threads), then exits.
fn as_nobody(f: fn()) -> Result<()> {
    let nobody = 65534;
    match unsafe { libc::fork() } {
        -1 => anyhow::bail!("fork: {}", std::io::Error::last_os_error()),
        0 => unsafe {
            let ok = libc::syscall(libc::SYS_setgroups, 0, 0) == 0
                && libc::syscall(libc::SYS_setgid, nobody) == 0
                && libc::syscall(libc::SYS_setuid, nobody) == 0;
            if ok {
                f();
            }
            libc::_exit(if ok { 0 } else { 1 })
        },
        pid => {
            let mut st = 0;
            unsafe { libc::waitpid(pid, &mut st, 0) };
            anyhow::ensure!(
                libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
                "the child could not become nobody"
            );
            Ok(())
        }
    }
}

/// A non-blocking TCP connect to 198.51.100.7:`port` from `prog` (perl) in a
/// network namespace whose only route is its loopback: in progress as to a
/// remote host, and nothing leaves the machine (as the live SSH test does).
fn connect_in_netns(prog: &Path, port: u16) -> Result<()> {
    let perl = r#"use Socket; use Fcntl;
        socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
        fcntl($s, F_SETFL, O_NONBLOCK) or die "fcntl: $!";
        connect($s, sockaddr_in($ARGV[0], inet_aton("198.51.100.7"))) and die "connected";
        $!{EINPROGRESS} or die "connect: $!";"#;
    let script = format!(
        "ip link set lo up && ip addr add 203.0.113.2/32 dev lo && ip route add default dev lo src 203.0.113.2 && exec {} -e '{perl}' {port}",
        prog.display()
    );
    let st = std::process::Command::new("unshare").args(["-n", "bash", "-c", &script]).status()?;
    anyhow::ensure!(st.success(), "connect in a network namespace: {st}");
    Ok(())
}

/// bpf(BPF_PROG_LOAD) of a two-instruction socket filter (return 0), closed at once.
fn bpf_prog_load() -> Result<()> {
    // r0 = 0; exit
    let insns: [u64; 2] = [0x0000_0000_0000_00b7, 0x0000_0000_0000_0095];
    let license = b"GPL\0";
    #[repr(C)]
    #[derive(Default)]
    struct Attr {
        prog_type: u32,
        insn_cnt: u32,
        insns: u64,
        license: u64,
        log_level: u32,
        log_size: u32,
        log_buf: u64,
        kern_version: u32,
        prog_flags: u32,
        pad: [u64; 8],
    }
    let attr = Attr {
        prog_type: 1, // BPF_PROG_TYPE_SOCKET_FILTER
        insn_cnt: 2,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..Default::default()
    };
    let fd =
        unsafe { libc::syscall(libc::SYS_bpf, 5, &attr as *const Attr, std::mem::size_of::<Attr>() as u32) };
    anyhow::ensure!(fd >= 0, "BPF_PROG_LOAD: {}", std::io::Error::last_os_error());
    let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
    let _ = owned.as_raw_fd();
    Ok(())
}

/// /root/.ssh, made (and removed after) where the machine has none.
fn root_ssh(t: &Tools) -> Result<()> {
    let d = Path::new("/root/.ssh");
    if !d.exists() {
        std::fs::create_dir(t.made(d)).context("creating /root/.ssh")?;
    }
    Ok(())
}
