//! The Python engine: the `script-python` plugin, built with `utrace` (tracer/build.rs),
//! embedded in it, written out to the cache directory like libmcount.so
//! (`record::embedded`) and `dlopen`ed only when a `.py` script is run, so that `utrace`
//! itself does not need libpython. The calls cross `script-abi`'s C interface: plain
//! records in, error messages (Python tracebacks) out.

use super::{CallError, Ctx, Engine, Kind, LoadError, ScriptError};
use script_abi::{flags, kind, Bytes, Record};
use std::ffi::c_void;

/// The plugin's bytes.
static PLUGIN_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libutrace_python.so"));

type Message = c_void;
type EngineHandle = c_void;
type AbiVersionFn = unsafe extern "C" fn() -> u32;
type OpenFn = unsafe extern "C" fn(Bytes, *mut *mut EngineHandle) -> *mut Message;
type FuncsFn = unsafe extern "C" fn(*const EngineHandle) -> *mut Message;
type CallFn = unsafe extern "C" fn(*const EngineHandle, *const Record) -> *mut Message;
type CloseFn = unsafe extern "C" fn(*mut EngineHandle);
type MessageFn = unsafe extern "C" fn(*const Message) -> Bytes;
type MessageFreeFn = unsafe extern "C" fn(*mut Message);

/// The plugin's functions.
struct Plugin {
    open: OpenFn,
    funcs: FuncsFn,
    call: CallFn,
    close: CloseFn,
    message: MessageFn,
    message_free: MessageFreeFn,
}

fn dlerror() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "unknown error".into();
    }
    // SAFETY: non-null, NUL-terminated (above).
    unsafe { std::ffi::CStr::from_ptr(e) }
        .to_string_lossy()
        .into_owned()
}

impl Plugin {
    /// Writes the plugin out and loads it. The library stays loaded for the life of the
    /// process (an interpreter cannot be unloaded safely).
    fn load() -> anyhow::Result<Plugin> {
        let path = crate::record::embedded::install_library("libutrace_python", PLUGIN_SO)?;
        let cpath = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())?;
        // RTLD_GLOBAL: Python's extension modules (`import math`) take libpython's symbols
        // from the global scope.
        // SAFETY: a NUL-terminated path; the plugin's constructors are Rust's and pyo3's,
        // which run no user code.
        let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if handle.is_null() {
            anyhow::bail!(
                "cannot load the Python engine (is libpython3 installed?): {}",
                dlerror()
            );
        }
        let sym = |name: &[u8]| -> anyhow::Result<*mut c_void> {
            // SAFETY: `handle` is a live dlopen handle and `name` is NUL-terminated.
            let p = unsafe { libc::dlsym(handle, name.as_ptr().cast()) };
            if p.is_null() {
                anyhow::bail!("the Python engine lacks {}", dlerror());
            }
            Ok(p)
        };
        use script_abi::symbols as s;
        // SAFETY: each symbol is the plugin's function of that name, whose signature
        // script-abi fixes (checked through the ABI version first).
        unsafe {
            let version: AbiVersionFn = std::mem::transmute(sym(s::ABI_VERSION)?);
            if version() != script_abi::ABI_VERSION {
                anyhow::bail!("the Python engine does not match this utrace");
            }
            Ok(Plugin {
                open: std::mem::transmute::<*mut c_void, OpenFn>(sym(s::OPEN)?),
                funcs: std::mem::transmute::<*mut c_void, FuncsFn>(sym(s::FUNCS)?),
                call: std::mem::transmute::<*mut c_void, CallFn>(sym(s::CALL)?),
                close: std::mem::transmute::<*mut c_void, CloseFn>(sym(s::CLOSE)?),
                message: std::mem::transmute::<*mut c_void, MessageFn>(sym(s::MESSAGE)?),
                message_free: std::mem::transmute::<*mut c_void, MessageFreeFn>(sym(
                    s::MESSAGE_FREE,
                )?),
            })
        }
    }

    /// Takes the bytes of a message of the plugin and frees it.
    fn take(&self, msg: *mut Message) -> Vec<u8> {
        // SAFETY: `msg` is a live message of this plugin; its bytes are copied before it is
        // freed, once.
        unsafe {
            let bytes = (self.message)(msg).as_slice().to_vec();
            (self.message_free)(msg);
            bytes
        }
    }
}

pub struct PythonEngine {
    plugin: Plugin,
    handle: *mut EngineHandle,
    /// Encoded values of the record being passed.
    buf: Vec<u8>,
}

impl PythonEngine {
    pub fn open(path: &str) -> Result<PythonEngine, LoadError> {
        let plugin = Plugin::load().map_err(LoadError::Engine)?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: the path's bytes live across the call; `handle` is writable.
        let err = unsafe { (plugin.open)(Bytes::of(path.as_bytes()), &mut handle) };
        if !err.is_null() {
            let text = String::from_utf8_lossy(&plugin.take(err)).into_owned();
            return Err(LoadError::Script(ScriptError(text)));
        }
        Ok(PythonEngine {
            plugin,
            handle,
            buf: Vec::new(),
        })
    }
}

impl Engine for PythonEngine {
    fn funcs(&mut self) -> Option<Vec<String>> {
        // SAFETY: `handle` is the live engine of this plugin.
        let msg = unsafe { (self.plugin.funcs)(self.handle) };
        if msg.is_null() {
            return None;
        }
        let bytes = self.plugin.take(msg);
        let values = script_abi::decode(&bytes)?;
        Some(
            values
                .into_iter()
                .filter_map(|v| match v {
                    script_abi::Value::Str(s) => Some(s),
                    _ => None,
                })
                .collect(),
        )
    }

    fn call(&mut self, ctx: &Ctx<'_>) -> Result<(), CallError> {
        self.buf.clear();
        let mut fl = 0;
        if let Some(values) = ctx.values {
            script_abi::encode(values, &mut self.buf);
            fl |= match ctx.kind {
                Kind::Exit => flags::RETVAL,
                _ => flags::ARGS,
            };
        }
        if ctx.record {
            fl |= flags::RECORD;
        }
        let rec = Record {
            kind: match ctx.kind {
                Kind::Begin => kind::BEGIN,
                Kind::Entry => kind::ENTRY,
                Kind::Exit => kind::EXIT,
                Kind::Event => kind::EVENT,
                Kind::End => kind::END,
            },
            flags: fl,
            tid: ctx.tid,
            depth: ctx.depth,
            timestamp: ctx.timestamp,
            duration: ctx.duration,
            address: ctx.address,
            name: Bytes::of(ctx.name.as_bytes()),
            values: Bytes::of(&self.buf),
        };
        // SAFETY: `handle` is the live engine; the record and the bytes it points to live
        // across the call.
        let err = unsafe { (self.plugin.call)(self.handle, &rec) };
        if err.is_null() {
            return Ok(());
        }
        let text = self.plugin.take(err);
        if text == script_abi::OUTPUT_CLOSED {
            return Err(CallError::OutputClosed);
        }
        Err(ScriptError(String::from_utf8_lossy(&text).into_owned()).into())
    }
}

impl Drop for PythonEngine {
    fn drop(&mut self) {
        // SAFETY: the engine is closed once, here; it is not used afterwards.
        unsafe { (self.plugin.close)(self.handle) };
    }
}
