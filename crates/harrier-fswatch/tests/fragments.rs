//! fragments resolution across a directory rename: FSProbe's known bug is
//! that cached descendants keep the old name. Here a child touched after
//! its parent was renamed gets the new path, and an event from before the
//! rename, read after it, is flagged unresolved rather than given a path it
//! never had.

mod common;

use common::*;
use harrier_capture::testing::bpf_available;
use harrier_fswatch::wire::F_UNRESOLVED;
use harrier_fswatch::Resolution;
use std::path::Path;

fn touch(p: &Path) {
    let fd = ok(
        unsafe { libc::open(c(p).as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644) } as i64,
        "open",
    );
    unsafe { libc::close(fd as i32) };
}

#[test]
fn a_renamed_parent_is_followed_and_older_events_are_not_misnamed() {
    if !bpf_available() || !common::supported() {
        return;
    }
    let m = TmpMount::new("fragments");
    let w = m.root.join("w");
    std::fs::create_dir(&w).unwrap();
    let mut watcher = watcher_in(&[&w], "open,rename", true, Resolution::Fragments, true);
    std::fs::create_dir(w.join("p")).unwrap();
    touch(&w.join("p/c0"));
    let got = drain(&mut watcher);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].path, w.join("p/c0").to_string_lossy(), "{got:?}");

    // c1's event stays unread while its directory is renamed and then
    // walked again under its new name.
    touch(&w.join("p/c1"));
    ok(unsafe { libc::rename(c(w.join("p")).as_ptr(), c(w.join("q")).as_ptr()) } as i64, "rename");
    touch(&w.join("q/c2"));
    let got = drain(&mut watcher);
    let p = |s: &str| w.join(s).to_string_lossy().into_owned();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0].kind, "open");
    assert!(
        got[0].path.is_empty() && got[0].flags & F_UNRESOLVED != 0,
        "the event from before the rename must be flagged, not renamed: {:?}",
        got[0]
    );
    assert_eq!(
        (got[1].kind.as_str(), got[1].path.clone(), got[1].source.clone()),
        ("rename", p("q"), Some(p("p")))
    );
    assert_eq!((got[2].kind.as_str(), got[2].path.clone()), ("open", p("q/c2")), "the child follows");
    assert_eq!(got[2].flags & F_UNRESOLVED, 0, "{:?}", got[2]);

    // Read promptly, an event under the renamed directory is exact.
    touch(&w.join("q/c3"));
    let got = drain(&mut watcher);
    assert_eq!(got.iter().map(|s| s.path.clone()).collect::<Vec<_>>(), [p("q/c3")]);
    let st = watcher.stop(|_| {}).unwrap();
    assert_eq!((st.paths_stale, st.paths_lost), (1, 0), "{}", st.report());
}
