//! The Lua engine (LuaJIT, built into `utrace` by mlua's `vendored` feature: no library is
//! needed at run time). The script's functions get a new table per call with uftrace's
//! context fields; numbers are Lua numbers, so an integer value is its 64 bits read as a
//! signed integer (as uftrace pushes them), and an entry's `duration` is 0.

use super::{
    c_stdout_closed, flush_c_stdio, CallError, Ctx, Engine, Kind, LoadError, ScriptError, Value,
};
use mlua::{ffi, Function, Lua, Table};

pub struct LuaEngine {
    lua: Lua,
    /// The script's functions, by [`Kind`] order.
    funcs: [Option<Function>; 5],
}

fn script_error(e: mlua::Error) -> ScriptError {
    ScriptError(e.to_string())
}

impl LuaEngine {
    /// Loads and runs the script at `path`.
    pub fn open(path: &str) -> Result<LuaEngine, LoadError> {
        let source = std::fs::read(path)
            .map_err(|e| LoadError::Engine(anyhow::anyhow!("cannot read {path}: {e}")))?;
        // A state of LuaJIT's own (its allocator, as the `luajit` program has, rather than
        // mlua's accounting one, which cost a fifth of a run over a large trace) with every
        // standard library (`ffi` and `debug` too), as uftrace opens them.
        // SAFETY: luaL_newstate has no preconditions; the state is checked and handed to mlua,
        // which then owns the only use of it (it is never closed: one per process).
        let lua = unsafe {
            let state = ffi::luaL_newstate();
            if state.is_null() {
                return Err(LoadError::Engine(anyhow::anyhow!(
                    "cannot create a Lua state: out of memory"
                )));
            }
            ffi::luaL_openlibs(state);
            Lua::init_from_ptr(state)
        };
        lua.load(&source[..])
            .set_name(format!("@{path}"))
            .exec()
            .map_err(|e| LoadError::Script(script_error(e)))?;
        let globals = lua.globals();
        let get = |name: &str| globals.get::<Option<Function>>(name).ok().flatten();
        let funcs = [
            get(Kind::Begin.function()),
            get(Kind::Entry.function()),
            get(Kind::Exit.function()),
            get(Kind::Event.function()),
            get(Kind::End.function()),
        ];
        drop(globals);
        Ok(LuaEngine { lua, funcs })
    }
}

/// Pushes a new table with the fields of `ctx` (a table per record, as uftrace makes; built
/// through Lua's C API: through mlua's `Table::raw_set` it cost more than the rest of the
/// walk).
///
/// # Safety
/// `state` is a live Lua state in protected mode with room for 3 more values. It pushes the
/// table, and above it one value (or an array table and one value) at a time, each popped by
/// lua_setfield/lua_rawseti: it leaves exactly the table.
unsafe fn push_context(state: *mut ffi::lua_State, ctx: &Ctx<'_>) {
    // SAFETY: the caller's promise; the field names are NUL-terminated literals.
    unsafe {
        ffi::lua_createtable(state, 0, 8);
        if ctx.kind == Kind::Begin {
            ffi::lua_pushboolean(state, i32::from(ctx.record));
            ffi::lua_setfield(state, -2, c"record".as_ptr());
            push_str(state, ctx.name);
            ffi::lua_setfield(state, -2, c"version".as_ptr());
            push_list(state, ctx.values.unwrap_or_default());
            ffi::lua_setfield(state, -2, c"cmds".as_ptr());
            return;
        }
        let numbers = [
            (c"tid", ctx.tid as f64),
            (c"depth", ctx.depth as f64),
            (c"timestamp", ctx.timestamp as f64),
            (c"duration", ctx.duration as f64),
            (c"address", ctx.address as f64),
        ];
        for (key, v) in numbers {
            ffi::lua_pushnumber(state, v);
            ffi::lua_setfield(state, -2, key.as_ptr());
        }
        push_str(state, ctx.name);
        ffi::lua_setfield(state, -2, c"name".as_ptr());
        let Some(values) = ctx.values else { return };
        match (ctx.kind, values.first()) {
            (Kind::Exit, Some(v)) => {
                push_value(state, v);
                ffi::lua_setfield(state, -2, c"retval".as_ptr());
            }
            (Kind::Event, Some(v)) => {
                push_value(state, v);
                ffi::lua_setfield(state, -2, c"args".as_ptr());
            }
            (Kind::Entry, _) => {
                push_list(state, values);
                ffi::lua_setfield(state, -2, c"args".as_ptr());
            }
            _ => {}
        }
    }
}

/// The message handler of a script call: the error and the stack traceback where it was
/// raised, as `lua` prints them.
unsafe extern "C-unwind" fn traceback(state: *mut ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: called by lua_pcall with the error value at index 1; the message pointer stays
    // valid while that value is on the stack; luaL_traceback pushes one string.
    unsafe {
        let mut msg = ffi::lua_tolstring(state, 1, std::ptr::null_mut());
        if msg.is_null() {
            msg = c"(error object is not a string)".as_ptr();
        }
        ffi::luaL_traceback(state, state, msg, 1);
    }
    1
}

/// Pushes `s` as a Lua string.
///
/// # Safety
/// `state` is a live Lua state with room for one more value, in protected mode.
unsafe fn push_str(state: *mut ffi::lua_State, s: &str) {
    // SAFETY: the caller's promise; the pointer and length describe `s`.
    unsafe { ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len()) };
}

/// Pushes `v` as uftrace does: integers are their 64 bits as a signed number.
///
/// # Safety
/// As [`push_str`].
unsafe fn push_value(state: *mut ffi::lua_State, v: &Value) {
    // SAFETY: the caller's promise.
    unsafe {
        match v {
            Value::Int(i) => ffi::lua_pushnumber(state, *i as i64 as f64),
            Value::Float(f) => ffi::lua_pushnumber(state, *f),
            Value::Str(s) => push_str(state, s),
        }
    }
}

/// Pushes a new array table of `values`.
///
/// # Safety
/// `state` is a live Lua state with room for two more values, in protected mode.
unsafe fn push_list(state: *mut ffi::lua_State, values: &[Value]) {
    // SAFETY: the caller's promise: the table, then one value at a time (popped by rawseti).
    unsafe {
        ffi::lua_createtable(state, values.len() as i32, 0);
        for (i, v) in values.iter().enumerate() {
            push_value(state, v);
            ffi::lua_rawseti(state, -2, i as i64 + 1);
        }
    }
}

impl Engine for LuaEngine {
    fn funcs(&mut self) -> Option<Vec<String>> {
        let list: Table = self.lua.globals().get("UFTRACE_FUNCS").ok()?;
        Some(
            list.sequence_values::<mlua::Value>()
                .filter_map(|v| v.ok()?.as_string()?.to_str().ok().map(|s| s.to_string()))
                .collect(),
        )
    }

    fn call(&mut self, ctx: &Ctx<'_>) -> Result<(), CallError> {
        let Some(f) = &self.funcs[ctx.kind as usize] else {
            return Ok(());
        };
        let with_ctx = ctx.kind != Kind::End;
        // SAFETY: exec_raw runs the closure in protected mode with the function `f` pushed
        // and room for 3 values: the handler is pushed and moved under `f` (2 values), the
        // context table pushed above (3); lua_pcall pops `f` and its argument and leaves the
        // message or nothing; the handler is removed, leaving one result (nil or the
        // message), which exec_raw returns.
        let failed = unsafe {
            self.lua.exec_raw::<Option<String>>(f, |state| {
                ffi::lua_pushcfunction(state, traceback);
                ffi::lua_insert(state, -2);
                let nargs = if with_ctx {
                    push_context(state, ctx);
                    1
                } else {
                    0
                };
                if ffi::lua_pcall(state, nargs, 0, -2 - nargs) == 0 {
                    ffi::lua_pushnil(state);
                }
                ffi::lua_remove(state, -2);
            })
        };
        match failed {
            // `print` ignores write errors: a closed pipe is seen on the stream.
            Ok(None) if c_stdout_closed() => Err(CallError::OutputClosed),
            Ok(None) => Ok(()),
            Ok(Some(msg)) => Err(ScriptError(msg).into()),
            Err(e) => Err(script_error(e).into()),
        }
    }
}

impl Drop for LuaEngine {
    fn drop(&mut self) {
        flush_c_stdio();
    }
}
