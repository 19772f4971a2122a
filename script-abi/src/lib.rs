//! The C ABI between `utrace` and a script-engine plugin (`script-python`), kept small so that
//! nothing but plain bytes crosses it.
//!
//! `utrace` runs Lua scripts itself, but a Python script needs libpython, which `utrace` must
//! not need at run time: its engine is a separate shared library that `utrace` embeds, writes
//! out and `dlopen`s only when a `.py` script is run. Both sides depend on this crate.
//!
//! ```text
//! utrace                                   plugin (cdylib)
//!   utrace_script_abi_version() ─────────▶  ABI_VERSION
//!   utrace_script_open(path, &engine) ───▶  compiles and runs the script       → Message on error
//!   utrace_script_funcs(engine) ─────────▶  UFTRACE_FUNCS as encoded strings    (null: none)
//!   utrace_script_call(engine, &Record) ─▶  uftrace_begin/entry/exit/event/end  → Message on error
//!                                                                        (OUTPUT_CLOSED on EPIPE)
//!   utrace_script_message(msg) / _free(msg)  the text of a Message, then freeing it
//!   utrace_script_close(engine)
//! ```
//!
//! A [`Record`] is plain data whose pointers are valid only during the call. Values (the
//! arguments, a return value, the command line given to `uftrace_begin`) are a byte string
//! of [`Value`]s (see [`encode`]); a [`Message`] is a byte string the plugin owns until
//! `utrace_script_message_free`.

/// Bumped whenever a signature or a layout below changes.
pub const ABI_VERSION: u32 = 2;

/// The [`Message`] of a call that failed because standard output is a pipe whose reader is
/// gone (EPIPE, `| head`): the run stops quietly. A traceback never begins with a NUL byte.
pub const OUTPUT_CLOSED: &[u8] = b"\0output closed";

/// The exported names, NUL-terminated for `dlsym`.
pub mod symbols {
    pub const ABI_VERSION: &[u8] = b"utrace_script_abi_version\0";
    pub const OPEN: &[u8] = b"utrace_script_open\0";
    pub const FUNCS: &[u8] = b"utrace_script_funcs\0";
    pub const CALL: &[u8] = b"utrace_script_call\0";
    pub const CLOSE: &[u8] = b"utrace_script_close\0";
    pub const MESSAGE: &[u8] = b"utrace_script_message\0";
    pub const MESSAGE_FREE: &[u8] = b"utrace_script_message_free\0";
}

/// Which script function a [`Record`] calls.
pub mod kind {
    /// `uftrace_begin(ctx)`: `name` is the version, `values` the script's command line,
    /// [`super::flags::RECORD`] when it runs while recording.
    pub const BEGIN: u32 = 0;
    pub const ENTRY: u32 = 1;
    pub const EXIT: u32 = 2;
    /// `uftrace_event(ctx)`: `values` holds the event's text (one string) when it has any.
    pub const EVENT: u32 = 3;
    /// `uftrace_end()`.
    pub const END: u32 = 4;
}

/// Bits of [`Record::flags`].
pub mod flags {
    /// `uftrace_begin`: the script runs at record time.
    pub const RECORD: u32 = 1;
    /// `values` holds the arguments (entry) or the event's text (event).
    pub const ARGS: u32 = 2;
    /// `values` holds the return value (exit).
    pub const RETVAL: u32 = 4;
}

/// A byte string borrowed for the duration of a call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Bytes {
    pub ptr: *const u8,
    pub len: usize,
}

impl Bytes {
    pub fn of(s: &[u8]) -> Bytes {
        Bytes {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// The bytes.
    ///
    /// # Safety
    /// `ptr` must point to `len` readable bytes (or `len` be 0) that stay unchanged for `'a`.
    pub unsafe fn as_slice<'a>(self) -> &'a [u8] {
        if self.len == 0 || self.ptr.is_null() {
            return &[];
        }
        // SAFETY: the caller promises `len` readable bytes at `ptr` for 'a.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// One call of a script function: the fields of uftrace's script context.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Record {
    /// One of [`kind`].
    pub kind: u32,
    /// Bits of [`flags`].
    pub flags: u32,
    pub tid: i64,
    pub depth: i64,
    pub timestamp: u64,
    /// Exits only.
    pub duration: u64,
    pub address: u64,
    /// The function or event name (the version for `uftrace_begin`).
    pub name: Bytes,
    /// Encoded [`Value`]s.
    pub values: Bytes,
}

/// A value handed to a script, as uftrace hands them: integers zero-extended from their
/// recorded size (a Python `int`; Lua sees the same 64 bits as a signed number), floats,
/// strings (a C string, a char, an event's text).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
    Str(String),
}

const TAG_INT: u8 = b'i';
const TAG_FLOAT: u8 = b'f';
const TAG_STR: u8 = b's';

/// Appends `values` to `out`: per value a tag byte, then 8 little-endian bytes (int, float)
/// or a 4-byte little-endian length and the UTF-8 bytes (string).
pub fn encode(values: &[Value], out: &mut Vec<u8>) {
    for v in values {
        match v {
            Value::Int(i) => {
                out.push(TAG_INT);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Float(f) => {
                out.push(TAG_FLOAT);
                out.extend_from_slice(&f.to_le_bytes());
            }
            Value::Str(s) => {
                out.push(TAG_STR);
                let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&s.as_bytes()[..len as usize]);
            }
        }
    }
}

/// The values in `bytes`; `None` when they do not decode.
pub fn decode(mut bytes: &[u8]) -> Option<Vec<Value>> {
    let mut out = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        let (v, rest) = match tag {
            TAG_INT | TAG_FLOAT => {
                let (b, rest) = rest.split_first_chunk::<8>()?;
                let v = if tag == TAG_INT {
                    Value::Int(u64::from_le_bytes(*b))
                } else {
                    Value::Float(f64::from_le_bytes(*b))
                };
                (v, rest)
            }
            TAG_STR => {
                let (len, rest) = rest.split_first_chunk::<4>()?;
                let len = u32::from_le_bytes(*len) as usize;
                let s = rest.get(..len)?;
                (
                    Value::Str(String::from_utf8_lossy(s).into_owned()),
                    &rest[len..],
                )
            }
            _ => return None,
        };
        out.push(v);
        bytes = rest;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let values = vec![
            Value::Int(u64::MAX),
            Value::Float(-2.5),
            Value::Str("héllo".into()),
            Value::Str(String::new()),
            Value::Int(0),
        ];
        let mut bytes = Vec::new();
        encode(&values, &mut bytes);
        assert_eq!(decode(&bytes), Some(values));
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode(b"x"), None);
        assert_eq!(decode(b""), Some(vec![]));
    }
}
