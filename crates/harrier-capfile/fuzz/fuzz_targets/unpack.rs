//! Any bytes as a packed event-block payload: unpacking ends with records or
//! an error, never a panic or an allocation past the limits; and whatever
//! unpacks, packed again and unpacked, gives the same records back.
#![no_main]

use harrier_capfile::pack::{unpack, Packer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut wire = Vec::new();
    let Ok(n) = unpack(data, u32::MAX, &mut wire) else { return };
    let mut packer = Packer::new();
    let mut packed = Vec::new();
    let mut i = 0;
    while i < wire.len() {
        let len = u16::from_le_bytes([wire[i + 14], wire[i + 15]]) as usize;
        assert!(packer.pack(&wire[i..i + len], &mut packed), "unpacked record at {i} is not whole");
        i += len;
    }
    let mut again = Vec::new();
    assert_eq!(unpack(&packed, u32::MAX, &mut again), Ok(n));
    assert!(again == wire, "records differ after packing them again");
});
