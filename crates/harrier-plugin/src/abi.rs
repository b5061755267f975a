//! The C ABI of Falco's plugin API, version 3 (what Falco 0.44.1 hosts: 3.12), written from
//! its documented layout. Only what the host passes or reads is spelled out; the state-table
//! vtables, which Harrier does not offer, are opaque pointers left null.

use std::ffi::{c_char, c_void};

/// The API version the host implements: plugins requiring up to this minor load.
pub const API_MAJOR: u32 = 3;
pub const API_MINOR: u32 = 12;

pub type Rc = i32;
pub const SUCCESS: Rc = 0;
pub const FAILURE: Rc = 1;
pub const TIMEOUT: Rc = -1;
pub const EOF: Rc = 2;
pub const NOT_SUPPORTED: Rc = 3;

/// Field types of `extract_fields` (libscap's parameter type codes).
pub const FTYPE_UINT64: u32 = 8;
pub const FTYPE_STRING: u32 = 9;
pub const FTYPE_RELTIME: u32 = 20;
pub const FTYPE_ABSTIME: u32 = 21;
pub const FTYPE_BOOL: u32 = 25;
pub const FTYPE_IPADDR: u32 = 40;
pub const FTYPE_IPNET: u32 = 41;

/// The plugin event's type code (PPME_PLUGINEVENT_E) and where its payload starts: the
/// 26-byte header, two 4-byte parameter lengths, the 4-byte plugin id.
pub const PLUGIN_EVENT_TYPE: u16 = 322;
pub const PLUGIN_EVENT_PAYLOAD_OFFSET: usize = 38;

/// The header of an event in libscap's layout (packed: 26 bytes).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub ts: u64,
    pub tid: u64,
    /// The whole event's length, header included.
    pub len: u32,
    pub ty: u16,
    pub nparams: u32,
}

#[repr(C)]
pub struct EventInput {
    pub evt: *const Event,
    pub evtnum: u64,
    pub evtsrc: *const c_char,
}

#[repr(C)]
pub struct ByteBuffer {
    pub len: u32,
    pub ptr: *const c_void,
}

/// One field asked of `extract_fields`; the plugin fills `res` (an array of `res_len`
/// values of the field's type, in the plugin's memory until its next call).
#[repr(C)]
pub struct ExtractField {
    pub res: *const c_void,
    pub res_len: u64,
    pub field_id: u32,
    pub field: *const c_char,
    pub arg_key: *const c_char,
    pub arg_index: u64,
    pub arg_present: u32,
    pub ftype: u32,
    pub flist: u32,
}

pub type Owner = c_void;
pub type OwnerLastError = unsafe extern "C" fn(*mut Owner) -> *const c_char;
pub type LogFn = unsafe extern "C" fn(*mut Owner, *const c_char, *const c_char, u32);

/// libsinsp's table reader vtable: four entry points (null: no tables offered).
#[repr(C)]
pub struct TableReader {
    pub fns: [*const c_void; 4],
}

#[repr(C)]
pub struct FieldExtractInput {
    pub owner: *mut Owner,
    pub get_owner_last_error: Option<OwnerLastError>,
    pub num_fields: u32,
    pub fields: *mut ExtractField,
    pub table_reader: TableReader,
    pub table_reader_ext: *mut c_void,
    pub value_offsets: *mut c_void,
}

#[repr(C)]
pub struct InitInput {
    pub config: *const c_char,
    pub owner: *mut Owner,
    pub get_owner_last_error: Option<OwnerLastError>,
    /// Null: the host offers no state tables.
    pub tables: *const c_void,
    pub log_fn: Option<LogFn>,
}

/// One metric of `get_metrics` (its value a union of 8 bytes).
#[repr(C)]
pub struct Metric {
    pub name: *const c_char,
    pub ty: u32,
    pub value: u64,
    pub value_type: u32,
}

pub const METRIC_U32: u32 = 0;
pub const METRIC_S32: u32 = 1;
pub const METRIC_U64: u32 = 2;
pub const METRIC_S64: u32 = 3;
pub const METRIC_D: u32 = 4;
pub const METRIC_F: u32 = 5;
pub const METRIC_I: u32 = 6;

#[cfg(test)]
mod tests {
    use std::mem::size_of;
    #[test]
    fn layouts_are_the_abis() {
        assert_eq!(size_of::<super::Event>(), 26);
        assert_eq!(size_of::<super::ExtractField>(), 64);
        assert_eq!(size_of::<super::FieldExtractInput>(), 80);
        assert_eq!(size_of::<super::InitInput>(), 40);
        assert_eq!(size_of::<super::Metric>(), 32);
        assert_eq!(size_of::<super::EventInput>(), 24);
    }
}
