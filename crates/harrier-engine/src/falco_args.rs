//! `evt.arg.<name>` and `evt.args` for the syscalls Falco's parameter lists
//! map (harrier_schema::falco_params): each parameter written as libsinsp
//! writes it, a number (`argstr`) and what it resolves to (`resolved`: an
//! fd's name, an errno, an absolute path, a user...). `evt.arg` shows the
//! resolved text when there is one, `evt.args` both: `name=argstr(resolved)`.

use crate::source::Source;
use crate::view::StateView;
use harrier_schema::decode::Value as Param;
use harrier_schema::falco_params::{Kind, Param as FalcoParam};
use harrier_schema::view::SyscallView;
use std::fmt::Write;

/// AT_FDCWD.
const FDCWD: i64 = -100;
const SOCK_NONBLOCK: u64 = 0o4000;
const SOCK_CLOEXEC: u64 = 0o2000000;

impl<S: StateView + ?Sized> Source<'_, S> {
    /// Writes parameter `p` of `v` into `s`: as `evt.arg` shows it, or (`both`) as
    /// `evt.args` does.
    pub(crate) fn falco_arg(&self, v: &SyscallView, p: &FalcoParam, s: &mut String, both: bool) {
        let start = s.len();
        let value = match p.src {
            "ret" if v.header.no_ret => None,
            "ret" => Some(Param::Int(v.ret)),
            src => v.named(src),
        };
        let Some(value) = value.filter(|x| !matches!(x, Param::Missing)) else {
            s.push_str("<NA>");
            return;
        };
        let num = value.as_i64().unwrap_or(0);
        let bytes = match value {
            Param::Bytes(b) => &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())],
            _ => &[][..],
        };
        // The number (or text) first; then what it resolves to, after `mid`.
        match p.kind {
            Kind::Str | Kind::Path | Kind::RelPath(_) => s.push_str(&String::from_utf8_lossy(bytes)),
            Kind::Hex => {
                let _ = write!(s, "{:X}", num as u64);
            }
            Kind::Oct => s.push_str(&harrier_schema::falco::oct(num as u64)),
            Kind::Named(r) => match harrier_schema::falco::parts(r, num as u64) {
                Some((n, _)) => s.push_str(&n),
                None => {
                    let _ = write!(s, "{num}");
                }
            },
            Kind::SockFlags => {
                let _ = write!(s, "{}", sock_flags(num as u64));
            }
            Kind::Uid | Kind::Gid if num as u32 == u32::MAX => s.push_str("-1"),
            Kind::Uid | Kind::Gid => {
                let _ = write!(s, "{}", num as u32 as i32);
            }
            _ => {
                let _ = write!(s, "{num}");
            }
        }
        let mid = s.len();
        s.push('(');
        let before = s.len();
        self.resolve(v, p, num, bytes, s);
        let resolved = s.len() > before;
        if !resolved {
            s.truncate(mid);
        } else if both {
            s.push(')');
        } else {
            // evt.arg: the resolved text alone.
            s.replace_range(start..=mid, "");
        }
    }

    /// What Falco resolves a parameter to ("" for nothing).
    fn resolve(&self, v: &SyscallView, p: &FalcoParam, num: i64, bytes: &[u8], s: &mut String) {
        match p.kind {
            Kind::Fd => self.fd_text(num, s),
            Kind::Errno if num < 0 => s.push_str(harrier_schema::falco::errno_name(-num).unwrap_or("")),
            Kind::Path | Kind::RelPath(_) if bytes.is_empty() || bytes[0] == b'/' => {}
            Kind::Path => self.join_cwd(bytes, s),
            Kind::RelPath(dirfd) => {
                let fd = v.named(dirfd).and_then(|d| d.as_i64()).unwrap_or(FDCWD);
                if fd == FDCWD {
                    return self.join_cwd(bytes, s);
                }
                let Some(dir) = self.state.fd(self.tid, fd as i32) else {
                    return join(b"<UNKNOWN>", bytes, s);
                };
                join(dir.name, bytes, s)
            }
            Kind::Named(r) => {
                if let Some((_, names)) = harrier_schema::falco::parts(r, num as u64) {
                    s.push_str(&names);
                } else if let Some(t) = harrier_schema::render::render(r, num as u64) {
                    // Harrier's own renderers: a name unless they fell back to the number.
                    if t != num.to_string() && t != "0" {
                        s.push_str(&t);
                    }
                }
            }
            Kind::SockFlags => s.push_str(&harrier_schema::falco::open_flag_names(sock_flags(num as u64))),
            Kind::Uid if num as u32 == u32::MAX => s.push_str("<NONE>"),
            Kind::Gid if num as u32 == u32::MAX => s.push_str("<NONE>"),
            Kind::Uid => s.push_str(self.state.user(num as u32).map_or("<NA>", |u| u.name)),
            Kind::Gid => s.push_str(self.state.group(num as u32).unwrap_or("<NA>")),
            Kind::Pid => {
                if let Some(p) = self.state.process(num as u32) {
                    s.push_str(&String::from_utf8_lossy(p.comm));
                }
            }
            _ => {}
        }
    }

    /// An fd as Falco resolves it: `<f>/etc/passwd`, `<4t>1.2.3.4:5->...`, AT_FDCWD, an errno.
    fn fd_text(&self, fd: i64, s: &mut String) {
        if fd == FDCWD {
            s.push_str("AT_FDCWD");
        } else if fd < 0 {
            s.push_str(harrier_schema::falco::errno_name(-fd).unwrap_or(""));
        } else if let Some(f) = self.state.fd(self.tid, fd as i32) {
            let proto = match f.tuple.map(|t| t.l4proto) {
                Some("tcp") => "t",
                Some("udp") => "u",
                Some("icmp") => "i",
                Some("raw") => "r",
                _ => "",
            };
            let _ = write!(s, "<{}{proto}>{}", f.typechar, String::from_utf8_lossy(f.name));
        }
    }

    /// A relative path against the process's cwd (which Falco keeps with a trailing '/').
    fn join_cwd(&self, path: &[u8], s: &mut String) {
        join(self.state.process(self.tid).map_or(&b""[..], |p| p.cwd), path, s)
    }
}

/// socket's SOCK_NONBLOCK/SOCK_CLOEXEC as Falco's open flags (PPM_O_NONBLOCK, PPM_O_CLOEXEC).
fn sock_flags(ty: u64) -> u64 {
    let mut f = 0;
    if ty & SOCK_NONBLOCK != 0 {
        f |= 1 << 6;
    }
    if ty & SOCK_CLOEXEC != 0 {
        f |= 1 << 12;
    }
    f
}

/// `dir` + `rel`, normalised as libsinsp's concatenate_paths does: "." and empty
/// components dropped, ".." climbing (never above the root). Allocates nothing.
fn join(dir: &[u8], rel: &[u8], s: &mut String) {
    let base = s.len();
    for c in dir.split(|&b| b == b'/').chain(rel.split(|&b| b == b'/')) {
        match c {
            b"" | b"." => {}
            b".." => {
                if let Some(i) = s[base..].rfind('/') {
                    s.truncate(base + i);
                }
            }
            c => {
                s.push('/');
                s.push_str(&String::from_utf8_lossy(c));
            }
        }
    }
    if s.len() == base {
        s.push('/');
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_join_as_falco_normalises_them() {
        let j = |d: &str, r: &str| {
            let mut s = String::new();
            super::join(d.as_bytes(), r.as_bytes(), &mut s);
            s
        };
        assert_eq!(j("/tmp/", "a"), "/tmp/a");
        assert_eq!(j("/tmp/x/", "../a/./b"), "/tmp/a/b");
        assert_eq!(j("/", ".."), "/");
    }
}
