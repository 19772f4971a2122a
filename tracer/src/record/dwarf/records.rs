//! Structs, classes and unions: their fields, and whether C++ passes them by invisible
//! reference (not trivially copyable for calls: a user-provided copy or move constructor or
//! destructor, virtual functions or bases, a member or base that is so, every copy and move
//! constructor deleted; `DW_AT_calling_convention` when the compiler gives it).

use super::types::{flag, udata, Field, Record, Ty};
use super::{Ctx, R};
use gimli::{AttributeValue, DebuggingInformationEntry, UnitOffset};
use std::collections::HashMap;
use std::rc::Rc;

/// The name of a class without its template arguments.
fn base_name(name: &str) -> &str {
    name.split('<').next().unwrap_or(name)
}

impl<'a> Ctx<'_, 'a> {
    /// A struct, class or union of `size` bytes: its fields, name and way of passing.
    pub(super) fn record(&self, e: &DebuggingInformationEntry<R<'a>>, size: u64, depth: u32) -> Ty {
        let raw = self.name(e, gimli::DW_AT_name);
        let mut rec = Record {
            name: raw.as_deref().map(|n| base_name(n).to_string()),
            size,
            string: raw
                .as_deref()
                .is_some_and(|n| n.starts_with("basic_string<char,") || n == "basic_string<char>"),
            ..Record::default()
        };
        let (mut copies, mut deleted) = (0u32, 0u32);
        let mut offsets = Vec::new();
        self.children(e.offset(), |c| match c.tag() {
            gimli::DW_TAG_member | gimli::DW_TAG_inheritance => {
                // Static members (DWARF 4) are declarations.
                if flag(c, gimli::DW_AT_declaration) || flag(c, gimli::DW_AT_external) {
                    return;
                }
                if c.tag() == gimli::DW_TAG_inheritance && virtuality(c) {
                    rec.by_ref = true;
                }
                let bytes = udata(c, gimli::DW_AT_data_member_location).unwrap_or(0);
                let bits = udata(c, gimli::DW_AT_bit_size);
                let bit_offset = match (udata(c, gimli::DW_AT_data_bit_offset), bits) {
                    (Some(o), _) => o,
                    // DWARF 2/3 bit-fields count from the top of their storage unit.
                    (None, Some(b)) => match (
                        udata(c, gimli::DW_AT_bit_offset),
                        udata(c, gimli::DW_AT_byte_size),
                    ) {
                        (Some(o), Some(unit)) => (bytes * 8 + unit * 8).saturating_sub(o + b),
                        _ => bytes * 8,
                    },
                    (None, None) => bytes * 8,
                };
                offsets.push((bit_offset, bits, self.type_ref(c)));
            }
            gimli::DW_TAG_subprogram => {
                if virtuality(c) {
                    rec.by_ref = true;
                }
                let Some(name) = self.name(c, gimli::DW_AT_name) else {
                    return;
                };
                let artificial = flag(c, gimli::DW_AT_artificial);
                // `= default` in the class: trivial when the members are.
                let defaulted = udata(c, gimli::DW_AT_defaulted) == Some(1);
                if name.starts_with('~') {
                    rec.by_ref |= !artificial && !defaulted;
                } else if Some(name.as_str()) == rec.name.as_deref()
                    && self.is_copy_or_move(c, e.offset())
                {
                    copies += 1;
                    if flag(c, gimli::DW_AT_deleted) {
                        deleted += 1;
                    } else {
                        rec.by_ref |= !artificial && !defaulted;
                    }
                }
            }
            _ => {}
        });
        // Every copy and move constructor deleted: passed by reference too.
        rec.by_ref |= copies > 0 && copies == deleted;
        rec.align = udata(e, gimli::DW_AT_alignment).unwrap_or(1);
        for (bit_offset, bits, ty) in offsets {
            let ty = ty
                .and_then(|t| self.ty_at(t, depth + 1))
                .unwrap_or(Ty::Unsupported);
            if bits.is_none() {
                rec.align = rec.align.max(ty.align());
            }
            rec.by_ref |= nontrivial(&ty);
            rec.fields.push(Field {
                bit_offset,
                bits,
                ty,
            });
        }
        match e.attr_value(gimli::DW_AT_calling_convention).ok().flatten() {
            Some(AttributeValue::CallingConvention(gimli::DW_CC_pass_by_reference)) => {
                rec.by_ref = true
            }
            Some(AttributeValue::CallingConvention(gimli::DW_CC_pass_by_value)) => {
                rec.by_ref = false
            }
            _ => {}
        }
        Ty::Record(Rc::new(rec))
    }

    /// A class only declared in this unit (its definition is in the unit of its key function):
    /// what its declared members tell, with the size of the definition of that name. Only a
    /// class passed by reference can be placed without its layout.
    pub(super) fn declared(&self, e: &DebuggingInformationEntry<R<'a>>, depth: u32) -> Ty {
        let size = self
            .name(e, gimli::DW_AT_name)
            .and_then(|n| self.defined_sizes().get(&n).copied());
        match self.record(e, size.unwrap_or(0), depth) {
            Ty::Record(r) if r.by_ref => Ty::Record(r),
            _ => Ty::Unsupported,
        }
    }

    /// The sizes of the classes defined in any unit, by name (the first definition of a name).
    fn defined_sizes(&self) -> &HashMap<String, u64> {
        self.sizes.get_or_init(|| {
            let mut sizes = HashMap::new();
            let mut units = self.dwarf.units();
            while let Ok(Some(header)) = units.next() {
                let Ok(unit) = self.dwarf.unit(header) else {
                    continue;
                };
                let mut entries = unit.entries();
                while let Ok(Some((_, e))) = entries.next_dfs() {
                    let record = matches!(
                        e.tag(),
                        gimli::DW_TAG_structure_type
                            | gimli::DW_TAG_class_type
                            | gimli::DW_TAG_union_type
                    );
                    if !record || flag(e, gimli::DW_AT_declaration) {
                        continue;
                    }
                    let name = e
                        .attr_value(gimli::DW_AT_name)
                        .ok()
                        .flatten()
                        .and_then(|v| self.dwarf.attr_string(&unit, v).ok())
                        .map(|s| s.to_string_lossy().into_owned());
                    if let (Some(name), Some(size)) = (name, udata(e, gimli::DW_AT_byte_size)) {
                        sizes.entry(name).or_insert(size);
                    }
                }
            }
            sizes
        })
    }

    /// Whether the member function `f` of the class at `class` takes one argument besides
    /// `this`: a reference to the class.
    fn is_copy_or_move(&self, f: &DebuggingInformationEntry<R<'a>>, class: UnitOffset) -> bool {
        let mut params = Vec::new();
        self.children(f.offset(), |c| {
            if c.tag() == gimli::DW_TAG_formal_parameter && !flag(c, gimli::DW_AT_artificial) {
                params.push(self.type_ref(c));
            }
        });
        let [Some(p)] = params[..] else {
            return false;
        };
        let Some(r) = self.strip(p) else {
            return false;
        };
        matches!(
            r.tag(),
            gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type
        ) && self
            .type_ref(&r)
            .and_then(|t| self.strip(t))
            .is_some_and(|t| t.offset() == class)
    }
}

/// Whether a member of this type makes its record non-trivial for calls.
fn nontrivial(ty: &Ty) -> bool {
    match ty {
        Ty::Record(r) => r.by_ref,
        Ty::Array { elem, .. } => nontrivial(elem),
        _ => false,
    }
}

fn virtuality(e: &DebuggingInformationEntry<R<'_>>) -> bool {
    match e.attr_value(gimli::DW_AT_virtuality).ok().flatten() {
        Some(AttributeValue::Virtuality(v)) => v != gimli::DW_VIRTUALITY_none,
        Some(v) => v.udata_value().is_some_and(|v| v != 0),
        None => false,
    }
}
