//! Any bytes as a legacy .scap capture (plain or gzip): the converter must end
//! with its stats or an error naming a byte offset, never a panic, a hang or an
//! allocation the input does not justify.
#![no_main]

use harrier_scap::{Converted, Converter};
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    let Ok(c) = Converter::from_reader(Cursor::new(data.to_vec()), Some(len)) else { return };
    let mut n = 0u64;
    let _ = c.run(|item| {
        match item {
            // What the converter emits must be a record Harrier's decoder accepts.
            Converted::Event(b) => {
                if let Err(e) = harrier_schema::decode::decode(b) {
                    panic!("converter emitted an undecodable record: {e:?}");
                }
                n += 1;
            }
            Converted::Foreign(f) => n += f.params.len() as u64,
            Converted::Snapshot(_) => n += 1,
        }
        Ok(())
    });
    std::hint::black_box(n);
});
