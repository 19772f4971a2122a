//! The Lua engine (LuaJIT, built into `utrace` by mlua's `vendored` feature: no library is
//! needed at run time). The script's functions get a new table per call with uftrace's
//! context fields; numbers are Lua numbers, so an integer value is its 64 bits read as a
//! signed integer (as uftrace pushes them), and an entry's `duration` is 0.

use super::{Ctx, Engine, Kind, LoadError, ScriptError, Value};
use mlua::{Function, Lua, Table};

pub struct LuaEngine {
    lua: Lua,
    /// The script's functions, by [`Kind`] order.
    funcs: [Option<Function>; 5],
}

fn script_error(e: mlua::Error) -> ScriptError {
    ScriptError(e.to_string())
}

fn number(v: &Value, lua: &Lua) -> mlua::Result<mlua::Value> {
    Ok(match v {
        Value::Int(i) => mlua::Value::Number(*i as i64 as f64),
        Value::Float(f) => mlua::Value::Number(*f),
        Value::Str(s) => mlua::Value::String(lua.create_string(s)?),
    })
}

impl LuaEngine {
    /// Loads and runs the script at `path`.
    pub fn open(path: &str) -> Result<LuaEngine, LoadError> {
        let source = std::fs::read(path)
            .map_err(|e| LoadError::Engine(anyhow::anyhow!("cannot read {path}: {e}")))?;
        let lua = Lua::new();
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

    fn context(&self, ctx: &Ctx<'_>) -> mlua::Result<Table> {
        let lua = &self.lua;
        let t = lua.create_table_with_capacity(0, 8)?;
        if ctx.kind == Kind::Begin {
            t.raw_set("record", ctx.record)?;
            t.raw_set("version", ctx.name)?;
            let cmds = lua.create_table()?;
            for (i, v) in ctx.values.unwrap_or_default().iter().enumerate() {
                cmds.raw_set(i + 1, number(v, lua)?)?;
            }
            t.raw_set("cmds", cmds)?;
            return Ok(t);
        }
        t.raw_set("tid", ctx.tid as f64)?;
        t.raw_set("depth", ctx.depth as f64)?;
        t.raw_set("timestamp", ctx.timestamp as f64)?;
        t.raw_set("duration", ctx.duration as f64)?;
        t.raw_set("address", ctx.address as f64)?;
        t.raw_set("name", ctx.name)?;
        if let Some(values) = ctx.values {
            match ctx.kind {
                Kind::Exit => {
                    if let Some(v) = values.first() {
                        t.raw_set("retval", number(v, lua)?)?;
                    }
                }
                Kind::Event => {
                    if let Some(v) = values.first() {
                        t.raw_set("args", number(v, lua)?)?;
                    }
                }
                _ => {
                    let args = lua.create_table_with_capacity(values.len(), 0)?;
                    for (i, v) in values.iter().enumerate() {
                        args.raw_set(i + 1, number(v, lua)?)?;
                    }
                    t.raw_set("args", args)?;
                }
            }
        }
        Ok(t)
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

    fn call(&mut self, ctx: &Ctx<'_>) -> Result<(), ScriptError> {
        if ctx.kind == Kind::End {
            let ended = match &self.funcs[ctx.kind as usize] {
                Some(f) => f.call::<()>(()).map_err(script_error),
                None => Ok(()),
            };
            flush_c_stdio();
            return ended;
        }
        let Some(f) = &self.funcs[ctx.kind as usize] else {
            return Ok(());
        };
        let t = self.context(ctx).map_err(script_error)?;
        f.call::<()>(t).map_err(script_error)
    }
}

/// Lua's `print` writes through C's stdout buffer: flushed at the end of the script, so
/// that its output comes before what utrace prints next.
fn flush_c_stdio() {
    // SAFETY: fflush(NULL) flushes every C stream; no stream is being closed meanwhile.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}

impl Drop for LuaEngine {
    fn drop(&mut self) {
        flush_c_stdio();
    }
}
