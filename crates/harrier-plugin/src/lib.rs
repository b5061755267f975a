//! A host for Falco's plugin API (plugin_api.h, version 3): plugin shared objects load
//! unmodified, as Falco 0.44.1 loads them.
//!
//! - [`Library`]: `dlopen`, the required API version checked, the symbols resolved, what the
//!   plugin declares read (name, version, capabilities, event source, fields).
//! - [`Plugin`]: one `plugin_init` with its init_config, used by one thread (Falco makes a
//!   plugin state per event source too): `open`/`next_batch`/`close` for a source plugin,
//!   `extract` for fields, `event_to_string`, progress, metrics.
//! - [`fields`]: the plugin's `get_fields` as [`harrier_rules::fields::PluginField`]s, which
//!   rules of its sources compile against.
//!
//! What is not offered: libsinsp's state tables (a plugin asking for them at init gets
//! none), async events and event parsing (declared capabilities are reported, not used).

pub mod abi;
pub mod fields;
mod library;
mod plugin;

pub use library::{api_supported, Caps, Library};
pub use plugin::{Batch, Instance, Plugin};

/// The payload of a plugin event (after its header, lengths and plugin id).
///
/// # Safety
/// `ev` must point to a whole event of `len` bytes, as `next_batch` gives them.
pub unsafe fn payload<'a>(ev: *const abi::Event) -> &'a [u8] {
    let len = unsafe { std::ptr::addr_of!((*ev).len).read_unaligned() } as usize;
    if len <= abi::PLUGIN_EVENT_PAYLOAD_OFFSET {
        return &[];
    }
    unsafe {
        std::slice::from_raw_parts(
            (ev as *const u8).add(abi::PLUGIN_EVENT_PAYLOAD_OFFSET),
            len - abi::PLUGIN_EVENT_PAYLOAD_OFFSET,
        )
    }
}
