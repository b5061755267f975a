//! A plugin's state (one `plugin_init`), used by one thread: open, next_batch, extract.

use crate::abi::{
    self, ByteBuffer, Event, EventInput, ExtractField, FieldExtractInput, InitInput, TableReader,
};
use crate::library::{owned, Library};
use anyhow::{bail, Result};
use harrier_rules::fields::PluginSel;
use harrier_rules::Value;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::net::IpAddr;
use std::sync::Arc;

/// More values than this for one field is a malformed answer, not a list.
const MAX_VALUES: u64 = 1 << 16;

/// What the host gives the plugin as its owner: its name for log lines.
struct Owner {
    name: CString,
    last_error: CString,
}

unsafe extern "C" fn owner_last_error(o: *mut c_void) -> *const c_char {
    if o.is_null() {
        return std::ptr::null();
    }
    unsafe { (*(o as *const Owner)).last_error.as_ptr() }
}

/// Plugin log lines at warning or worse go to stderr, named; the rest are debug noise.
unsafe extern "C" fn owner_log(o: *mut c_void, component: *const c_char, msg: *const c_char, sev: u32) {
    if sev > 4 || msg.is_null() {
        return;
    }
    let name =
        if o.is_null() { "?".into() } else { unsafe { (*(o as *const Owner)).name.to_string_lossy() } };
    let comp = owned(component).unwrap_or_default();
    let msg = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
    eprintln!("harrier: plugin {name}{}{comp}: {msg}", if comp.is_empty() { "" } else { " " });
}

/// What `next_batch` said besides its events: more may come, none now, or the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    More,
    Timeout,
    Eof,
}

/// A plugin initialized with its config.
pub struct Plugin {
    pub lib: Arc<Library>,
    state: *mut c_void,
    owner: Box<Owner>,
    /// extract_fields answers that were not values (null pointers, absurd counts).
    pub malformed: Cell<u64>,
    /// extract_fields calls that failed (the plugin said why in get_last_error).
    pub failed: Cell<u64>,
}

// SAFETY: a Plugin is used by the one thread that holds it; moving it between threads
// before use is what Falco does with an inspector's plugins too.
unsafe impl Send for Plugin {}

/// An open event stream of a source plugin.
pub struct Instance(*mut c_void);
unsafe impl Send for Instance {}

impl Plugin {
    /// `plugin_init` with `config` (Falco's init_config, as a string).
    pub fn init(lib: Arc<Library>, config: &str) -> Result<Plugin> {
        let name = lib.name.clone();
        let owner = Box::new(Owner { name: CString::new(name.clone())?, last_error: CString::default() });
        // An empty config is "{}" for a plugin with a JSON schema (libsinsp does the same).
        let config = if config.trim().is_empty() && lib.init_schema.is_some() { "{}" } else { config };
        let cfg =
            CString::new(config).map_err(|_| anyhow::anyhow!("plugin {name}: init_config has a NUL byte"))?;
        let input = InitInput {
            config: cfg.as_ptr(),
            owner: &*owner as *const Owner as *mut c_void,
            get_owner_last_error: Some(owner_last_error),
            tables: std::ptr::null(),
            log_fn: Some(owner_log),
        };
        let mut rc = abi::FAILURE;
        let init = lib.api.init.expect("checked at load");
        let state = unsafe { init(&input, &mut rc) };
        if rc != abi::SUCCESS || state.is_null() {
            let why = match state.is_null() {
                true => "no state returned".to_string(),
                false => Self::error_of(&lib, state),
            };
            if !state.is_null() {
                unsafe { lib.api.destroy.expect("checked at load")(state) };
            }
            bail!("plugin {name}: init failed: {why}");
        }
        Ok(Plugin { lib, state, owner, malformed: Cell::new(0), failed: Cell::new(0) })
    }

    fn error_of(lib: &Library, state: *mut c_void) -> String {
        let e = lib.api.get_last_error.and_then(|f| owned(unsafe { f(state) })).unwrap_or_default();
        if e.is_empty() {
            "(no error given)".into()
        } else {
            e
        }
    }

    /// The plugin's last error (get_last_error).
    pub fn last_error(&self) -> String {
        Self::error_of(&self.lib, self.state)
    }

    pub fn name(&self) -> &str {
        &self.lib.name
    }

    /// Opens its event stream with Falco's open_params.
    pub fn open(&mut self, params: &str) -> Result<Instance> {
        let Some(open) = self.lib.api.open.filter(|_| self.lib.caps.sourcing) else {
            bail!("plugin {}: not an event source", self.name());
        };
        let p = CString::new(params)
            .map_err(|_| anyhow::anyhow!("plugin {}: open_params has a NUL byte", self.name()))?;
        let mut rc = abi::FAILURE;
        let h = unsafe { open(self.state, p.as_ptr(), &mut rc) };
        if rc != abi::SUCCESS || h.is_null() {
            bail!("plugin {}: open failed: {}", self.name(), self.last_error());
        }
        Ok(Instance(h))
    }

    pub fn close(&mut self, inst: Instance) {
        if let Some(close) = self.lib.api.close {
            unsafe { close(self.state, inst.0) };
        }
    }

    /// The next events (the plugin's until its next call) and what comes after them: an
    /// end of stream may come with the last events, as the Go SDK gives it.
    pub fn next_batch(&mut self, inst: &mut Instance) -> Result<(&[*const Event], Batch)> {
        let f = self.lib.api.next_batch.expect("sourcing checked at open");
        let (mut n, mut evts) = (0u32, std::ptr::null_mut());
        let rc = unsafe { f(self.state, inst.0, &mut n, &mut evts) };
        let status = match rc {
            abi::SUCCESS => Batch::More,
            abi::TIMEOUT => Batch::Timeout,
            abi::EOF => Batch::Eof,
            _ => bail!("plugin {}: next_batch failed: {}", self.name(), self.last_error()),
        };
        if n > 0 && evts.is_null() {
            bail!("plugin {}: next_batch gave {n} events and no array", self.name());
        }
        let events = match n {
            0 => &[][..],
            _ => unsafe { std::slice::from_raw_parts(evts as *const *const Event, n as usize) },
        };
        Ok((events, status))
    }

    /// get_progress: (percent, text) when the plugin says.
    pub fn progress(&mut self, inst: &Instance) -> Option<(u32, String)> {
        let f = self.lib.api.get_progress?;
        let mut pct = 0u32;
        let s = owned(unsafe { f(self.state, inst.0, &mut pct) });
        Some((pct, s.unwrap_or_default()))
    }

    /// event_to_string (evt.plugininfo), borrowed until the next call.
    pub fn event_to_string(&self, ev: &EventInput) -> Option<&CStr> {
        let f = self.lib.api.event_to_string?;
        let p = unsafe { f(self.state, ev) };
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
    }

    /// list_open_params: the JSON the plugin gives, if any.
    pub fn list_open_params(&mut self) -> Option<String> {
        let f = self.lib.api.list_open_params?;
        let mut rc = abi::FAILURE;
        let s = owned(unsafe { f(self.state, &mut rc) });
        s.filter(|_| rc == abi::SUCCESS)
    }

    /// get_metrics, as (name, value).
    pub fn metrics(&mut self) -> Vec<(String, f64)> {
        let Some(f) = self.lib.api.get_metrics else { return Vec::new() };
        let mut n = 0u32;
        let m = unsafe { f(self.state, &mut n) };
        if m.is_null() {
            return Vec::new();
        }
        let all = unsafe { std::slice::from_raw_parts(m, n as usize) };
        all.iter()
            .filter_map(|m| {
                let v = m.value;
                let value = match m.value_type {
                    abi::METRIC_U32 => v as u32 as f64,
                    abi::METRIC_S32 | abi::METRIC_I => v as u32 as i32 as f64,
                    abi::METRIC_U64 => v as f64,
                    abi::METRIC_S64 => v as i64 as f64,
                    abi::METRIC_D => f64::from_bits(v),
                    abi::METRIC_F => f32::from_bits(v as u32) as f64,
                    _ => return None,
                };
                Some((owned(m.name)?, value))
            })
            .collect()
    }

    /// Extracts one field of `ev` and gives each value to `out` (stops when it returns true).
    /// A failed or malformed answer gives no value and is counted.
    pub fn extract(&self, ev: &EventInput, sel: &PluginSel, out: &mut dyn FnMut(Value<'_>) -> bool) {
        let Some(f) = self.lib.api.extract_fields else { return };
        let mut field = ExtractField {
            res: std::ptr::null(),
            res_len: 0,
            field_id: sel.id,
            field: sel.name.as_ptr(),
            arg_key: sel.key.as_ref().map_or(std::ptr::null(), |k| k.as_ptr()),
            arg_index: sel.index.unwrap_or(0),
            arg_present: sel.key.is_some() as u32,
            ftype: crate::fields::ftype(sel.ty),
            flist: sel.list as u32,
        };
        let input = FieldExtractInput {
            owner: &*self.owner as *const Owner as *mut c_void,
            get_owner_last_error: Some(owner_last_error),
            num_fields: 1,
            fields: &mut field,
            table_reader: TableReader { fns: [std::ptr::null(); 4] },
            table_reader_ext: std::ptr::null_mut(),
            value_offsets: std::ptr::null_mut(),
        };
        if unsafe { f(self.state, ev, &input) } != abi::SUCCESS {
            self.failed.set(self.failed.get() + 1);
            return;
        }
        let n = field.res_len;
        if n == 0 {
            return;
        }
        if field.res.is_null() || n > MAX_VALUES || (!sel.list && n > 1) {
            self.malformed.set(self.malformed.get() + 1);
            return;
        }
        for i in 0..n as usize {
            let v = unsafe {
                match field.ftype {
                    abi::FTYPE_STRING => {
                        let p = *(field.res as *const *const c_char).add(i);
                        if p.is_null() {
                            self.malformed.set(self.malformed.get() + 1);
                            return;
                        }
                        Value::Str(CStr::from_ptr(p).to_bytes())
                    }
                    abi::FTYPE_BOOL => Value::Bool(*(field.res as *const u32).add(i) != 0),
                    abi::FTYPE_IPADDR | abi::FTYPE_IPNET => {
                        let b = &*(field.res as *const ByteBuffer).add(i);
                        match (b.ptr.is_null(), b.len) {
                            (false, 4) => Value::Ip(IpAddr::from(*(b.ptr as *const [u8; 4]))),
                            (false, 16) => Value::Ip(IpAddr::from(*(b.ptr as *const [u8; 16]))),
                            _ => {
                                self.malformed.set(self.malformed.get() + 1);
                                return;
                            }
                        }
                    }
                    _ => Value::U64(*(field.res as *const u64).add(i)),
                }
            };
            if out(v) {
                return;
            }
        }
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        if let Some(d) = self.lib.api.destroy {
            unsafe { d(self.state) };
        }
    }
}
