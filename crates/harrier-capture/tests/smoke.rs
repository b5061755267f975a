use harrier_capture::{parse_syscalls, Config, Session};
use std::cell::RefCell;
use std::rc::Rc;

#[test]
fn smoke_getpid() {
    let mut cfg = Config::new(parse_syscalls("getpid,openat,getppid").unwrap());
    cfg.pid = Some(std::process::id());
    let got = Rc::new(RefCell::new(Vec::new()));
    let g = got.clone();
    let mut s = Session::start(&cfg, Box::new(move |b| g.borrow_mut().push(b.to_vec()))).unwrap();
    for _ in 0..10 {
        unsafe { libc::syscall(libc::SYS_getpid) };
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    let _ = std::fs::File::open("/etc/hostname");
    let st = s.stop().unwrap();
    eprintln!("{}", st.report());
    for b in got.borrow().iter() {
        eprintln!("{:?}", harrier_schema::decode::decode(b));
    }
}
