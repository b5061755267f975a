//! Any bytes as a capture file: the reader must end with items, a stop or an
//! error, never a panic, a hang or an allocation beyond the limits.
#![no_main]

use harrier_capfile::{Item, Reader};
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = Reader::new(Cursor::new(data)) else { return };
    let _ = r.index();
    let mut n = 0u64;
    while let Ok(Some(item)) = r.next() {
        if let Item::Foreign(f) = item {
            n += f.params().count() as u64;
        }
        n += 1;
    }
    // Seeking then reading again must be as safe.
    if let Ok(true) = r.seek_time(n) {
        while let Ok(Some(_)) = r.next() {}
    }
});
