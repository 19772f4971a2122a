//! utrace's Python script engine, a plugin: `utrace` embeds this library, writes it out and
//! `dlopen`s it only when a `.py` script is run, so that `utrace` itself never needs libpython.
//! The interface is `script-abi`'s: C functions taking plain records; errors come back as
//! [`Message`]s holding the Python traceback.
//!
//! The script is run as a module named after its file (as uftrace imports it), with its
//! directory on `sys.path`. Each record calls `uftrace_entry(ctx)`, `uftrace_exit(ctx)` or
//! `uftrace_event(ctx)` with a new `dict` holding uftrace's context fields: `tid`, `depth`,
//! `timestamp`, `address`, `name`, `duration` (exits), `args` (a tuple; an event's is a
//! string, empty for an event without data) and `retval` where recorded. Functions the
//! script does not define are skipped.

use pyo3::exceptions::PyBrokenPipeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use script_abi::{flags, kind, Bytes, Record, Value};
use std::ffi::CString;

/// An error text owned by the plugin until `utrace_script_message_free`.
pub struct Message(Vec<u8>);

/// A loaded script: its module and the functions it defines.
pub struct Engine {
    module: Py<PyModule>,
    begin: Option<PyObject>,
    entry: Option<PyObject>,
    exit: Option<PyObject>,
    event: Option<PyObject>,
    end: Option<PyObject>,
}

fn message(text: String) -> *mut Message {
    Box::into_raw(Box::new(Message(text.into_bytes())))
}

/// The traceback of `err`, as Python prints it.
fn traceback(py: Python<'_>, err: &PyErr) -> String {
    let formatted = py.import("traceback").and_then(|tb| {
        let lines = tb.call_method1("format_exception", (err.clone_ref(py),))?;
        let parts: Vec<String> = lines.extract()?;
        Ok(parts.concat())
    });
    match formatted {
        Ok(text) => text.trim_end().to_string(),
        Err(_) => err.to_string(),
    }
}

fn load(py: Python<'_>, path: &str) -> Result<Engine, String> {
    let code = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let code = CString::new(code).map_err(|_| format!("{path}: the script holds a NUL byte"))?;
    let file = CString::new(path).map_err(|_| "the path holds a NUL byte".to_string())?;
    let p = std::path::Path::new(path);
    let stem = p
        .file_stem()
        .map_or("script".into(), |s| s.to_string_lossy().into_owned());
    let name = CString::new(stem).map_err(|_| "the path holds a NUL byte".to_string())?;
    let dir = p
        .parent()
        .map(|d| d.to_string_lossy().into_owned())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| ".".into());
    let run = || -> PyResult<Engine> {
        py.import("sys")?
            .getattr("path")?
            .call_method1("insert", (0, dir))?;
        let module = PyModule::from_code(py, &code, &file, &name)?;
        let get = |f: &str| -> PyResult<Option<PyObject>> {
            Ok(match module.getattr(f) {
                Ok(v) if v.is_callable() => Some(v.unbind()),
                _ => None,
            })
        };
        Ok(Engine {
            begin: get("uftrace_begin")?,
            entry: get("uftrace_entry")?,
            exit: get("uftrace_exit")?,
            event: get("uftrace_event")?,
            end: get("uftrace_end")?,
            module: module.unbind(),
        })
    };
    run().map_err(|e| traceback(py, &e))
}

fn to_py(py: Python<'_>, v: &Value) -> PyObject {
    match v {
        Value::Int(i) => i
            .into_pyobject(py)
            .map_or_else(|_| py.None(), |o| o.into_any().unbind()),
        Value::Float(f) => f
            .into_pyobject(py)
            .map_or_else(|_| py.None(), |o| o.into_any().unbind()),
        Value::Str(s) => s
            .into_pyobject(py)
            .map_or_else(|_| py.None(), |o| o.into_any().unbind()),
    }
}

/// Flushes Python's `sys.stdout` and `sys.stderr` (both, even when the first fails); the
/// first error.
fn flush_stdio(py: Python<'_>) -> PyResult<()> {
    let sys = py.import("sys")?;
    let mut result = Ok(());
    for stream in ["stdout", "stderr"] {
        let flushed = sys.getattr(stream).and_then(|s| s.call_method0("flush"));
        result = result.and(flushed.map(|_| ()));
    }
    result
}

impl Engine {
    fn call(&self, py: Python<'_>, rec: &Record, name: &[u8], values: &[u8]) -> PyResult<()> {
        let func = match rec.kind {
            kind::BEGIN => &self.begin,
            kind::ENTRY => &self.entry,
            kind::EXIT => &self.exit,
            kind::EVENT => &self.event,
            kind::END => {
                if let Some(end) = &self.end {
                    end.call0(py)?;
                }
                // What the script printed comes before what utrace prints next.
                return flush_stdio(py);
            }
            _ => &None,
        };
        let Some(func) = func else {
            return Ok(());
        };
        let values = script_abi::decode(values).unwrap_or_default();
        let name = String::from_utf8_lossy(name);
        let ctx = PyDict::new(py);
        if rec.kind == kind::BEGIN {
            ctx.set_item("record", rec.flags & flags::RECORD != 0)?;
            ctx.set_item("version", name)?;
            let cmds = PyTuple::new(py, values.iter().map(|v| to_py(py, v)))?;
            ctx.set_item("cmds", cmds)?;
            func.call1(py, (ctx,))?;
            return Ok(());
        }
        ctx.set_item(pyo3::intern!(py, "tid"), rec.tid)?;
        ctx.set_item(pyo3::intern!(py, "depth"), rec.depth)?;
        ctx.set_item(pyo3::intern!(py, "timestamp"), rec.timestamp)?;
        if rec.kind == kind::EXIT {
            ctx.set_item(pyo3::intern!(py, "duration"), rec.duration)?;
        }
        ctx.set_item(pyo3::intern!(py, "address"), rec.address)?;
        ctx.set_item(pyo3::intern!(py, "name"), name)?;
        if rec.kind == kind::EVENT {
            // An event without data has an empty string, as uftrace gives it.
            match values.first().filter(|_| rec.flags & flags::ARGS != 0) {
                Some(v) => ctx.set_item(pyo3::intern!(py, "args"), to_py(py, v))?,
                None => ctx.set_item(pyo3::intern!(py, "args"), "")?,
            }
        } else if rec.flags & flags::ARGS != 0 {
            let args = PyTuple::new(py, values.iter().map(|v| to_py(py, v)))?;
            ctx.set_item(pyo3::intern!(py, "args"), args)?;
        }
        if rec.flags & flags::RETVAL != 0 {
            if let Some(v) = values.first() {
                ctx.set_item(pyo3::intern!(py, "retval"), to_py(py, v))?;
            }
        }
        func.call1(py, (ctx,))?;
        Ok(())
    }
}

/// The ABI this plugin implements (`script_abi::ABI_VERSION`).
#[no_mangle]
pub extern "C" fn utrace_script_abi_version() -> u32 {
    script_abi::ABI_VERSION
}

/// Loads the script at `path` (UTF-8); on success stores the engine in `*engine` and returns
/// null, else returns the error.
///
/// # Safety
/// `path` must be a valid [`Bytes`] and `engine` a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn utrace_script_open(path: Bytes, engine: *mut *mut Engine) -> *mut Message {
    // SAFETY: the caller passes a valid byte string for the duration of the call.
    let path = String::from_utf8_lossy(unsafe { path.as_slice() }).into_owned();
    match Python::with_gil(|py| load(py, &path)) {
        Ok(e) => {
            // SAFETY: the caller passes a writable pointer.
            unsafe { *engine = Box::into_raw(Box::new(e)) };
            std::ptr::null_mut()
        }
        Err(text) => message(text),
    }
}

/// The strings of the script's `UFTRACE_FUNCS` list, encoded as `script_abi` values in a
/// [`Message`]; null when the script has none.
///
/// # Safety
/// `engine` must come from `utrace_script_open` and not be closed.
#[no_mangle]
pub unsafe extern "C" fn utrace_script_funcs(engine: *const Engine) -> *mut Message {
    // SAFETY: the caller passes a live engine.
    let engine = unsafe { &*engine };
    Python::with_gil(|py| {
        let module = engine.module.bind(py);
        let Ok(list) = module.getattr("UFTRACE_FUNCS") else {
            return std::ptr::null_mut();
        };
        let Ok(items) = list.extract::<Vec<PyObject>>() else {
            return std::ptr::null_mut();
        };
        let values: Vec<Value> = items
            .iter()
            .filter_map(|o| o.extract::<String>(py).ok())
            .map(Value::Str)
            .collect();
        let mut bytes = Vec::new();
        script_abi::encode(&values, &mut bytes);
        Box::into_raw(Box::new(Message(bytes)))
    })
}

/// Calls the script function `rec` names; returns null, the traceback of an exception, or
/// [`script_abi::OUTPUT_CLOSED`] for a `BrokenPipeError` (EPIPE on standard output).
///
/// # Safety
/// `engine` must come from `utrace_script_open` and not be closed; `rec` must point to a
/// valid [`Record`] whose byte strings are valid for the call.
#[no_mangle]
pub unsafe extern "C" fn utrace_script_call(
    engine: *const Engine,
    rec: *const Record,
) -> *mut Message {
    // SAFETY: the caller passes a live engine and a valid record.
    let (engine, rec) = unsafe { (&*engine, &*rec) };
    // SAFETY: the record's byte strings are valid for the duration of the call.
    let (name, values) = unsafe { (rec.name.as_slice(), rec.values.as_slice()) };
    Python::with_gil(|py| match engine.call(py, rec, name, values) {
        Ok(()) => std::ptr::null_mut(),
        // Standard output is a pipe whose reader is gone (`| head`): not the script's fault.
        Err(e) if e.is_instance_of::<PyBrokenPipeError>(py) => {
            Box::into_raw(Box::new(Message(script_abi::OUTPUT_CLOSED.to_vec())))
        }
        Err(e) => message(traceback(py, &e)),
    })
}

/// Frees the engine; the script's output is flushed.
///
/// # Safety
/// `engine` must come from `utrace_script_open`; it is not used again.
#[no_mangle]
pub unsafe extern "C" fn utrace_script_close(engine: *mut Engine) {
    if engine.is_null() {
        return;
    }
    // SAFETY: the engine was made by Box::into_raw in utrace_script_open and is closed once.
    let engine = unsafe { Box::from_raw(engine) };
    Python::with_gil(|py| {
        drop(engine);
        let _ = flush_stdio(py);
    });
}

/// The bytes of `msg`, valid until it is freed.
///
/// # Safety
/// `msg` must come from this plugin and not be freed.
#[no_mangle]
pub unsafe extern "C" fn utrace_script_message(msg: *const Message) -> Bytes {
    // SAFETY: the caller passes a live message.
    Bytes::of(unsafe { &(*msg).0 })
}

/// Frees `msg`.
///
/// # Safety
/// `msg` must come from this plugin; it is not used again.
#[no_mangle]
pub unsafe extern "C" fn utrace_script_message_free(msg: *mut Message) {
    if !msg.is_null() {
        // SAFETY: made by Box::into_raw in this plugin, freed once.
        drop(unsafe { Box::from_raw(msg) });
    }
}
