//! Users and groups from the system databases (NSS: getpwuid_r/getgrgid_r,
//! so /etc/passwd, LDAP, sssd... whatever nsswitch.conf says), cached, with
//! unknown ids cached too so a missing uid costs one lookup, not one per event.

use crate::IdMap;
use std::ffi::CStr;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub name: Arc<str>,
    pub homedir: Arc<str>,
    pub shell: Arc<str>,
}

#[derive(Debug, Default)]
pub struct Users {
    pub(crate) users: IdMap<u32, Option<User>>,
    pub(crate) groups: IdMap<u32, Option<Arc<str>>>,
    buf: Vec<u8>,
}

fn text(p: *const libc::c_char) -> Arc<str> {
    if p.is_null() {
        return Arc::from("");
    }
    // SAFETY: NSS filled the strings inside our buffer, NUL-terminated.
    Arc::from(unsafe { CStr::from_ptr(p) }.to_string_lossy().as_ref())
}

impl Users {
    /// The user with this uid, or None if the databases do not know it.
    pub fn user(&mut self, uid: u32) -> Option<&User> {
        if !self.users.contains_key(&uid) {
            let u = self.lookup_user(uid);
            self.users.insert(uid, u);
        }
        self.users.get(&uid)?.as_ref()
    }

    /// The group name for this gid.
    pub fn group(&mut self, gid: u32) -> Option<&str> {
        if !self.groups.contains_key(&gid) {
            let g = self.lookup_group(gid);
            self.groups.insert(gid, g);
        }
        self.groups.get(&gid)?.as_deref()
    }

    /// A user already looked up (None if never asked or unknown): for
    /// readers that only hold a shared borrow, after `user` warmed the cache.
    pub fn cached_user(&self, uid: u32) -> Option<&User> {
        self.users.get(&uid)?.as_ref()
    }

    pub fn cached_group(&self, gid: u32) -> Option<&str> {
        self.groups.get(&gid)?.as_deref()
    }

    /// Forgets everything (e.g. on SIGHUP, after /etc/passwd changed).
    pub fn clear(&mut self) {
        self.users.clear();
        self.groups.clear();
    }

    fn lookup_user(&mut self, uid: u32) -> Option<User> {
        self.buf.resize(self.buf.len().max(1024), 0);
        loop {
            // SAFETY: pwd and result are written by getpwuid_r; buf outlives the call
            // and the strings are copied out before it is reused.
            let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
            let mut result: *mut libc::passwd = std::ptr::null_mut();
            let rc = unsafe {
                libc::getpwuid_r(uid, &mut pwd, self.buf.as_mut_ptr().cast(), self.buf.len(), &mut result)
            };
            if rc == libc::ERANGE && self.buf.len() < 1 << 20 {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
                continue;
            }
            if rc != 0 || result.is_null() {
                return None;
            }
            return Some(User {
                uid,
                name: text(pwd.pw_name),
                homedir: text(pwd.pw_dir),
                shell: text(pwd.pw_shell),
            });
        }
    }

    fn lookup_group(&mut self, gid: u32) -> Option<Arc<str>> {
        self.buf.resize(self.buf.len().max(1024), 0);
        loop {
            // SAFETY: as in lookup_user.
            let mut grp: libc::group = unsafe { std::mem::zeroed() };
            let mut result: *mut libc::group = std::ptr::null_mut();
            let rc = unsafe {
                libc::getgrgid_r(gid, &mut grp, self.buf.as_mut_ptr().cast(), self.buf.len(), &mut result)
            };
            if rc == libc::ERANGE && self.buf.len() < 1 << 20 {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
                continue;
            }
            if rc != 0 || result.is_null() {
                return None;
            }
            return Some(text(grp.gr_name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_resolves_and_unknown_ids_are_cached_as_unknown() {
        let mut u = Users::default();
        let root = u.user(0).expect("uid 0 is in every passwd").clone();
        assert_eq!(&*root.name, "root");
        assert_eq!(&*root.homedir, "/root");
        assert!(!root.shell.is_empty());
        assert_eq!(u.group(0), Some("root"));
        assert!(u.user(3_999_999_999).is_none());
        assert!(u.users.contains_key(&3_999_999_999), "the miss is cached");
    }
}
