//! `-a`, and `-A`/`-R` entries without items: argument specs of the program's own functions
//! from its DWARF (data-format §8), as the `<exe>.dbg` file the runtime reads at start-up and
//! the readers read afterwards.
//!
//! Each defined function gets an `A:` line for its parameters and an `R:` line for its return
//! value, as uftrace 0.13 writes them: integers of any size plain (`arg1`), plain `char` as
//! `/c`, `char *` and `char &` as `/s`, other pointers and references as `/p`, enums as
//! `/e:NAME` (with an `E:` line), `float`/`double`/`long double` as `fparg/32`/`/64`/`/80`
//! (counted apart from the other arguments), structs, classes and unions by value as
//! `/tSIZE:NAME` and `std::string` as `/S`, each with the registers or stack slot the SysV
//! x86-64 convention passes it in ([`abi`], [`place`]). A parameter of a type without spec
//! (complex numbers, vectors, varargs) ends the function's list.
//!
//! Where uftrace 0.13 places a value against the convention, the convention wins, so that the
//! value is read from where it is: a union of an integer and a double is one INTEGER eightbyte
//! (uftrace: `%RDI+XMM0`); arrays, nested structs, base classes and bit-fields in a struct
//! count with their bytes (uftrace: one register per array, no location for nested structs,
//! bases left out); `__int128` and pointers to member functions take two registers; a double
//! after a `long double` is read from `xmm0` (`fparg2/64%XMM0`); an empty class with member
//! functions (a lambda without captures) passes nothing (`/t0`); a class only declared in the
//! unit is placed when passed by reference. `std::wstring` is a class, not `/S`.
//!
//! `--srcline` and `-L` need only each function's `L:` line (its declaration line and file,
//! [`srcfile`]): then the types are not read. The libraries get theirs at the end of the
//! recording ([`files`]); `-L` at record time becomes hide triggers ([`hide`]).

mod abi;
pub mod files;
pub mod hide;
mod place;
mod records;
mod srcfile;
mod types;

use gimli::{
    AttributeValue, DebuggingInformationEntry, Dwarf, EndianSlice, RunTimeEndian, Unit, UnitOffset,
};
use record_format::demangle::{demangle, Demangle};
use record_format::elf::{link_base, Elf};
use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use types::{udata, Ty};

type R<'a> = EndianSlice<'a, RunTimeEndian>;

struct Ctx<'d, 'a> {
    dwarf: &'d Dwarf<R<'a>>,
    unit: &'d Unit<R<'a>>,
    /// Enum definitions seen: name → `E:` text.
    enums: &'d RefCell<BTreeMap<String, String>>,
    /// The unit's types read so far.
    types: RefCell<HashMap<UnitOffset, Ty>>,
    /// The sizes of the classes defined in the file, by name (read when first needed).
    sizes: &'d OnceCell<HashMap<String, u64>>,
}

impl Ctx<'_, '_> {
    fn name(&self, e: &DebuggingInformationEntry<R<'_>>, at: gimli::DwAt) -> Option<String> {
        let v = e.attr_value(at).ok()??;
        let s = self.dwarf.attr_string(self.unit, v).ok()?;
        Some(s.to_string_lossy().into_owned())
    }

    /// Records the `E:` line of an enum; `false` if its values cannot be read.
    fn enum_def(&self, ty: &DebuggingInformationEntry<R<'_>>, name: &str) -> bool {
        if self.enums.borrow().contains_key(name) {
            return true;
        }
        let Ok(mut tree) = self.unit.entries_tree(Some(ty.offset())) else {
            return false;
        };
        let Ok(root) = tree.root() else {
            return false;
        };
        let mut children = root.children();
        let mut values = Vec::new();
        let mut next = 0i64;
        while let Ok(Some(child)) = children.next() {
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_enumerator {
                continue;
            }
            let Some(n) = self.name(e, gimli::DW_AT_name) else {
                return false;
            };
            let v = match e.attr_value(gimli::DW_AT_const_value).ok().flatten() {
                Some(AttributeValue::Sdata(v)) => v,
                Some(AttributeValue::Udata(v)) => v as i64,
                Some(AttributeValue::Data1(v)) => i64::from(v),
                Some(AttributeValue::Data2(v)) => i64::from(v),
                Some(AttributeValue::Data4(v)) => i64::from(v),
                Some(AttributeValue::Data8(v)) => v as i64,
                _ => return false,
            };
            values.push(if v == next { n } else { format!("{n}={v}") });
            next = v.wrapping_add(1);
        }
        self.enums.borrow_mut().insert(
            name.to_string(),
            format!("enum {name} {{{}}}", values.join(",")),
        );
        true
    }
}

/// One function's lines.
struct Func {
    addr: u64,
    name: String,
    /// Declaration line and file (relative to the common compile directory, [`srcfile`]).
    line: Option<(u64, String)>,
    /// The file as the line program names it (what record-time `-L` matches).
    path: Option<String>,
    args: String,
    ret: Option<String>,
}

/// What a module's DWARF says about its defined functions: their locations and, when asked
/// for, their argument specs and the enums these name.
pub struct ModuleDebug {
    funcs: Vec<Func>,
    /// Enum definitions seen: name → `E:` text.
    enums: BTreeMap<String, String>,
    args: bool,
}

/// Reads the functions of the ELF file `bytes`; `None` when it has no DWARF. Without `args`
/// only their locations (`F:` and `L:` lines, what `--srcline` and `-L` need), as uftrace
/// writes them for `--srcline` alone.
pub fn read(bytes: &[u8], args: bool) -> Option<ModuleDebug> {
    let elf = Elf::parse(bytes).ok()?;
    let section = |name: &str| -> &[u8] {
        elf.section_headers
            .iter()
            .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(name))
            .and_then(|sh| {
                let start = sh.sh_offset as usize;
                bytes.get(start..start + sh.sh_size as usize)
            })
            .unwrap_or(&[])
    };
    if section(".debug_info").is_empty() {
        return None;
    }
    let endian = if elf.little_endian {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let dwarf = Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
        Ok(EndianSlice::new(section(id.name()), endian))
    })
    .ok()?;
    // Addresses in `.sym`/`.dbg` are relative to the module's link base.
    let base = link_base(&elf.program_headers);
    let enums = RefCell::new(BTreeMap::new());
    let sizes = OnceCell::new();
    let mut funcs = Vec::new();
    let mut comp_dirs = Vec::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        if let Some(dir) = unit.comp_dir {
            comp_dirs.push(dir.to_string_lossy().into_owned());
        }
        let ctx = Ctx {
            dwarf: &dwarf,
            unit: &unit,
            enums: &enums,
            types: RefCell::default(),
            sizes: &sizes,
        };
        let mut entries = unit.entries();
        while let Ok(Some((_, e))) = entries.next_dfs() {
            if e.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let e = e.clone();
            if let Some(f) = function(&ctx, &e, base, args) {
                funcs.push(f);
            }
        }
    }
    funcs.sort_by_key(|f| f.addr);
    funcs.dedup_by_key(|f| f.addr);
    srcfile::relative_to(&mut funcs, &comp_dirs);
    Some(ModuleDebug {
        funcs,
        enums: enums.into_inner(),
        args,
    })
}

impl ModuleDebug {
    /// The `.dbg` text of the module at `path`.
    pub fn text(&self, path: &str, build_id: Option<&str>) -> String {
        let mut out = format!(
            "# path name: {path}\n# build-id: {}\n",
            build_id.unwrap_or("")
        );
        // In uftrace's order: by name, last first.
        for e in self.enums.values().rev() {
            let _ = writeln!(out, "E: {e}");
        }
        for f in &self.funcs {
            if !self.args && f.line.is_none() {
                continue;
            }
            let _ = writeln!(out, "F: {:x} {}", f.addr, f.name);
            if let Some((line, file)) = &f.line {
                let _ = writeln!(out, "L: {line} {file}");
            }
            if !f.args.is_empty() {
                let _ = writeln!(out, "A: @{}", f.args);
            }
            if let Some(r) = &f.ret {
                let _ = writeln!(out, "R: @{r}");
            }
        }
        out
    }

    /// The source file of each function with one, as the line program names it (the whole
    /// path of a file in a compile directory, not the `.dbg` file's relative one: uftrace
    /// 0.13's record-time `-L` matches that): (module-relative address, file).
    pub fn files(&self) -> impl Iterator<Item = (u64, &str)> {
        self.funcs
            .iter()
            .filter_map(|f| Some((f.addr, f.path.as_deref()?)))
    }
}

/// The lines of a defined function (`e` has a `low_pc`).
fn function<'a>(
    ctx: &Ctx<'_, 'a>,
    e: &DebuggingInformationEntry<R<'a>>,
    base: u64,
    args: bool,
) -> Option<Func> {
    let low = e.attr_value(gimli::DW_AT_low_pc).ok()??;
    let addr = ctx.dwarf.attr_address(ctx.unit, low).ok()??;
    // The declarations behind a definition (an abstract instance for constructors and inlined
    // copies, the in-class declaration of a member) hold its names and types.
    let mut decls = Vec::new();
    let mut cur = e.clone();
    for _ in 0..4 {
        let next = match cur
            .attr_value(gimli::DW_AT_specification)
            .ok()
            .flatten()
            .or_else(|| cur.attr_value(gimli::DW_AT_abstract_origin).ok().flatten())
        {
            Some(AttributeValue::UnitRef(off)) => ctx.unit.entry(off).ok(),
            _ => None,
        };
        let Some(next) = next else {
            break;
        };
        decls.push(next.clone());
        cur = next;
    }
    let named = |at| {
        ctx.name(e, at)
            .or_else(|| decls.iter().find_map(|d| ctx.name(d, at)))
    };
    // Named as the readers name it: the simple demangled name.
    let name =
        match named(gimli::DW_AT_linkage_name).or_else(|| named(gimli::DW_AT_MIPS_linkage_name)) {
            Some(linkage) => demangle(&linkage, Demangle::Simple),
            None => named(gimli::DW_AT_name)?,
        };
    let line = udata(e, gimli::DW_AT_decl_line)
        .or_else(|| decls.iter().find_map(|d| udata(d, gimli::DW_AT_decl_line)))
        .zip(
            srcfile::file_name(ctx, e)
                .or_else(|| decls.iter().find_map(|d| srcfile::file_name(ctx, d))),
        );
    let addr = addr.checked_sub(base)?;
    if !args {
        return Some(Func {
            addr,
            name,
            path: line.as_ref().map(|l| l.1.clone()),
            line,
            args: String::new(),
            ret: None,
        });
    }
    let ret_ty = ctx.ty(ctx
        .type_ref(e)
        .or_else(|| decls.iter().find_map(|d| ctx.type_ref(d))));
    // Parameters in order; `None` for `...` or a type that cannot be read.
    let mut params = Vec::new();
    let mut varargs = false;
    ctx.children(e.offset(), |c| match c.tag() {
        gimli::DW_TAG_formal_parameter if !varargs => {
            // A concrete instance's parameter refers to the abstract one for its type.
            let ty = ctx.type_ref(c).or_else(|| {
                match c.attr_value(gimli::DW_AT_abstract_origin).ok().flatten() {
                    Some(AttributeValue::UnitRef(off)) => {
                        ctx.entry(off).and_then(|o| ctx.type_ref(&o))
                    }
                    _ => None,
                }
            });
            params.push(ty);
        }
        gimli::DW_TAG_unspecified_parameters => varargs = true,
        _ => {}
    });
    let mut params: Vec<Option<Ty>> = params.into_iter().map(|t| ctx.ty(t)).collect();
    if varargs {
        params.push(None);
    }
    let ret = place::ret_item(ret_ty.as_ref()).text;
    let args = place::arg_items(&params, ret_ty.as_ref()).join(",");
    Some(Func {
        addr,
        name,
        path: line.as_ref().map(|l| l.1.clone()),
        line,
        args,
        ret,
    })
}
