//! `-a`: argument specs of the program's own functions from its DWARF (data-format §8), as the
//! `<exe>.dbg` file the runtime reads at start-up and the readers read afterwards.
//!
//! Each defined function gets an `A:` line for its parameters and an `R:` line for its return
//! value, with uftrace's choices per type: integers of any size plain (`arg1`), `char` as
//! `/c`, `char *` and `char &` as `/s`, other pointers and references as `/p`, enums as `/e:NAME` (with an
//! `E:` line), `float`/`double` as `fparg/32`/`fparg/64` (counted apart from the integer
//! arguments, as the SysV ABI passes them), integer arguments past the sixth on the stack
//! (`arg7%stack+1`). A parameter whose type has no such spec (a struct by value, `long double`,
//! varargs) ends the function's list: the items after it would be read from the wrong place.

use gimli::{AttributeValue, DebuggingInformationEntry, Dwarf, EndianSlice, RunTimeEndian, Unit};
use record_format::demangle::{demangle, Demangle};
use record_format::elf::{link_base, Elf};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;

type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// How one value is recorded.
enum Item {
    /// An integer-class value with this format suffix (`""`, `/c`, `/s`, `/p`, `/e:NAME`).
    Int(String),
    /// A floating-point value of this many bits.
    Float(u32),
    /// An empty struct or class by value (tag types such as `std::forward_iterator_tag`):
    /// nothing stored, shown as `NAME{}`.
    Empty(String),
    /// No spec fits (structs, `long double`, …).
    Unsupported,
}

struct Ctx<'d, 'a> {
    dwarf: &'d Dwarf<R<'a>>,
    unit: &'d Unit<R<'a>>,
    /// Enum definitions seen: name → `E:` text.
    enums: &'d RefCell<BTreeMap<String, String>>,
}

impl Ctx<'_, '_> {
    fn name(&self, e: &DebuggingInformationEntry<R<'_>>, at: gimli::DwAt) -> Option<String> {
        let v = e.attr_value(at).ok()??;
        let s = self.dwarf.attr_string(self.unit, v).ok()?;
        Some(s.to_string_lossy().into_owned())
    }

    fn type_of<'u>(
        &'u self,
        e: &DebuggingInformationEntry<R<'_>>,
    ) -> Option<DebuggingInformationEntry<'u, 'u, R<'u>>>
    where
        Self: 'u,
    {
        match e.attr_value(gimli::DW_AT_type).ok()?? {
            AttributeValue::UnitRef(off) => self.unit.entry(off).ok(),
            _ => None,
        }
    }

    /// A type with typedefs and qualifiers stripped (`None`: void).
    fn strip<'u>(
        &'u self,
        mut e: DebuggingInformationEntry<'u, 'u, R<'u>>,
    ) -> Option<DebuggingInformationEntry<'u, 'u, R<'u>>> {
        for _ in 0..32 {
            match e.tag() {
                gimli::DW_TAG_typedef
                | gimli::DW_TAG_const_type
                | gimli::DW_TAG_volatile_type
                | gimli::DW_TAG_restrict_type
                | gimli::DW_TAG_atomic_type => e = self.type_of(&e)?,
                _ => return Some(e),
            }
        }
        None
    }

    fn udata(e: &DebuggingInformationEntry<R<'_>>, at: gimli::DwAt) -> Option<u64> {
        e.attr_value(at).ok()??.udata_value()
    }

    /// The item for a value of type `ty` (`None`: void).
    fn classify(&self, ty: Option<DebuggingInformationEntry<'_, '_, R<'_>>>) -> Option<Item> {
        let ty = self.strip(ty?)?;
        Some(match ty.tag() {
            gimli::DW_TAG_base_type => {
                let size = Self::udata(&ty, gimli::DW_AT_byte_size).unwrap_or(0);
                let enc = match ty.attr_value(gimli::DW_AT_encoding).ok().flatten() {
                    Some(AttributeValue::Encoding(e)) => e,
                    _ => return Some(Item::Unsupported),
                };
                match enc {
                    gimli::DW_ATE_float if size == 4 || size == 8 => Item::Float(size as u32 * 8),
                    gimli::DW_ATE_float => Item::Unsupported,
                    gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char => {
                        Item::Int("/c".into())
                    }
                    gimli::DW_ATE_signed | gimli::DW_ATE_unsigned | gimli::DW_ATE_boolean
                        if size <= 8 =>
                    {
                        Item::Int(String::new())
                    }
                    _ => Item::Unsupported,
                }
            }
            // References are pointers too (uftrace shows `const char &` as a string).
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => {
                let pointee = self.type_of(&ty).and_then(|t| self.strip(t));
                let is_char = pointee.as_ref().is_some_and(|p| {
                    p.tag() == gimli::DW_TAG_base_type
                        && matches!(
                            p.attr_value(gimli::DW_AT_encoding).ok().flatten(),
                            Some(AttributeValue::Encoding(
                                gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char
                            ))
                        )
                });
                Item::Int(if is_char { "/s" } else { "/p" }.into())
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type
                if Self::udata(&ty, gimli::DW_AT_byte_size) == Some(1)
                    && self.is_empty_class(&ty) =>
            {
                match self.name(&ty, gimli::DW_AT_name) {
                    Some(name) => Item::Empty(name),
                    None => Item::Unsupported,
                }
            }
            gimli::DW_TAG_enumeration_type => match self.name(&ty, gimli::DW_AT_name) {
                Some(name) if self.enum_def(&ty, &name) => Item::Int(format!("/e:{name}")),
                _ => Item::Int(String::new()),
            },
            _ => Item::Unsupported,
        })
    }

    /// Whether a class has no data members (its children are only base classes, methods,
    /// types and templates parameters).
    fn is_empty_class(&self, ty: &DebuggingInformationEntry<R<'_>>) -> bool {
        let Ok(mut tree) = self.unit.entries_tree(Some(ty.offset())) else {
            return false;
        };
        let Ok(root) = tree.root() else {
            return false;
        };
        let mut children = root.children();
        while let Ok(Some(child)) = children.next() {
            if child.entry().tag() == gimli::DW_TAG_member {
                return false;
            }
        }
        true
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
    line: Option<(u64, String)>,
    args: String,
    ret: Option<String>,
}

/// The `.dbg` text for the ELF file `bytes` at `path` (build id `build_id`), or `None` when it
/// has no DWARF.
pub fn dbg_text(path: &str, bytes: &[u8], build_id: Option<&str>) -> Option<String> {
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
    let mut funcs = Vec::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let ctx = Ctx {
            dwarf: &dwarf,
            unit: &unit,
            enums: &enums,
        };
        let mut entries = unit.entries();
        while let Ok(Some((_, e))) = entries.next_dfs() {
            if e.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let e = e.clone();
            if let Some(f) = function(&ctx, &e, base) {
                funcs.push(f);
            }
        }
    }
    funcs.sort_by_key(|f| f.addr);
    funcs.dedup_by_key(|f| f.addr);
    let mut out = format!(
        "# path name: {path}\n# build-id: {}\n",
        build_id.unwrap_or("")
    );
    for e in enums.borrow().values() {
        let _ = writeln!(out, "E: {e}");
    }
    for f in funcs {
        let _ = writeln!(out, "F: {:x} {}", f.addr, f.name);
        if let Some((line, file)) = f.line {
            let _ = writeln!(out, "L: {line} {file}");
        }
        if !f.args.is_empty() {
            let _ = writeln!(out, "A: @{}", f.args);
        }
        if let Some(r) = f.ret {
            let _ = writeln!(out, "R: @{r}");
        }
    }
    Some(out)
}

/// The lines of a defined function (`e` has a `low_pc`).
fn function(ctx: &Ctx<'_, '_>, e: &DebuggingInformationEntry<R<'_>>, base: u64) -> Option<Func> {
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
    let line = Ctx::udata(e, gimli::DW_AT_decl_line)
        .or_else(|| {
            decls
                .iter()
                .find_map(|d| Ctx::udata(d, gimli::DW_AT_decl_line))
        })
        .zip(file_name(ctx, e).or_else(|| decls.iter().find_map(|d| file_name(ctx, d))));
    let ret_ty = ctx
        .type_of(e)
        .or_else(|| decls.iter().find_map(|d| ctx.type_of(d)));
    let ret = match ctx.classify(ret_ty) {
        None | Some(Item::Unsupported) => None,
        Some(Item::Int(fmt)) => Some(format!("retval{fmt}")),
        Some(Item::Float(bits)) => Some(format!("retval/f{bits}")),
        Some(Item::Empty(name)) => Some(format!("retval/t0:{name}")),
    };
    let mut args = Vec::new();
    let (mut ints, mut floats, mut stack) = (0u32, 0u32, 0u32);
    let mut tree = ctx.unit.entries_tree(Some(e.offset())).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    let mut params = Vec::new();
    while let Ok(Some(child)) = children.next() {
        let c = child.entry();
        match c.tag() {
            gimli::DW_TAG_formal_parameter => params.push(Some(c.offset())),
            gimli::DW_TAG_unspecified_parameters => params.push(None),
            _ => {}
        }
    }
    for p in params {
        let Some(p) = p.and_then(|off| ctx.unit.entry(off).ok()) else {
            break;
        };
        // A concrete instance's parameter refers to the abstract one for its type.
        let ty = ctx.type_of(&p).or_else(|| {
            match p.attr_value(gimli::DW_AT_abstract_origin).ok().flatten() {
                Some(AttributeValue::UnitRef(off)) => {
                    ctx.unit.entry(off).ok().and_then(|o| ctx.type_of(&o))
                }
                _ => None,
            }
        });
        match ctx.classify(ty) {
            Some(Item::Int(fmt)) => {
                ints += 1;
                if ints <= 6 {
                    args.push(format!("arg{ints}{fmt}"));
                } else if floats <= 8 {
                    stack += 1;
                    args.push(format!("arg{ints}{fmt}%stack+{stack}"));
                } else {
                    break;
                }
            }
            // Passed in memory (nothing of it is stored).
            Some(Item::Empty(name)) => {
                ints += 1;
                stack += 1;
                args.push(format!("arg{ints}/t0:{name}%stack+{stack}"));
            }
            Some(Item::Float(bits)) if floats < 8 => {
                floats += 1;
                args.push(format!("fparg{floats}/{bits}"));
            }
            _ => break,
        }
    }
    Some(Func {
        addr: addr.checked_sub(base)?,
        name,
        line,
        args: args.join(","),
        ret,
    })
}

/// The source file of a DIE's `decl_file`, as the line program names it.
fn file_name(ctx: &Ctx<'_, '_>, e: &DebuggingInformationEntry<R<'_>>) -> Option<String> {
    let index = match e.attr_value(gimli::DW_AT_decl_file).ok()?? {
        AttributeValue::FileIndex(i) => i,
        v => v.udata_value()?,
    };
    let header = ctx.unit.line_program.as_ref()?.header();
    let file = header.file(index)?;
    let text = |v| {
        ctx.dwarf
            .attr_string(ctx.unit, v)
            .ok()
            .map(|s| s.to_string_lossy().into_owned())
    };
    let name = text(file.path_name())?;
    if name.starts_with('/') {
        return Some(name);
    }
    match file.directory(header).and_then(text) {
        Some(dir) if !dir.is_empty() => Some(format!("{dir}/{name}")),
        _ => Some(name),
    }
}
