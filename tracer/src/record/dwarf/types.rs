//! The types of parameters and return values, read from DWARF into the small model the
//! calling-convention code works on: scalars by their register class, records (structs,
//! classes, unions) with their fields, size, alignment and whether C++ passes them by
//! invisible reference.

use super::{Ctx, R};
use gimli::{AttributeValue, DebuggingInformationEntry, UnitOffset};
use std::rc::Rc;

/// A type as far as argument passing cares.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// An integer-class scalar: `bool`, characters, integers of 1 to 16 bytes, `nullptr_t`.
    /// `plain_char`: the type is `char` itself (shown as a character; `signed char` and
    /// `unsigned char` are numbers).
    Int {
        size: u64,
        plain_char: bool,
    },
    /// `float`, `double`, `long double` (`x87`) or a 16-byte SSE float (`__float128`).
    Float {
        size: u64,
        x87: bool,
    },
    /// A complex floating-point type of this total size.
    Complex {
        size: u64,
    },
    /// A pointer or reference (`to_char`: to plain `char`, shown as a string); a pointer to
    /// member function is 16 bytes.
    Ptr {
        size: u64,
        to_char: bool,
    },
    /// An enum; `name` when its values were recorded for the `E:` line.
    Enum {
        size: u64,
        name: Option<String>,
    },
    Record(Rc<Record>),
    Array {
        elem: Rc<Ty>,
        count: u64,
    },
    /// Anything else (vectors, incomplete types, types of another unit).
    Unsupported,
}

/// A struct, class or union.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Record {
    /// The name without template arguments (`vector` for `vector<int, …>`); none for
    /// anonymous types and lambdas.
    pub name: Option<String>,
    pub size: u64,
    pub align: u64,
    /// Data members and base classes (static members left out).
    pub fields: Vec<Field>,
    /// Not trivially copyable for calls (C++): passed by invisible reference and returned
    /// through a hidden pointer.
    pub by_ref: bool,
    /// `std::basic_string<char>` (recorded as `/S`).
    pub string: bool,
}

/// A data member or base class at a bit offset.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub bit_offset: u64,
    /// Width of a bit-field.
    pub bits: Option<u64>,
    pub ty: Ty,
}

impl Ty {
    pub fn size(&self) -> u64 {
        match self {
            Ty::Int { size, .. }
            | Ty::Float { size, .. }
            | Ty::Complex { size }
            | Ty::Ptr { size, .. }
            | Ty::Enum { size, .. } => *size,
            Ty::Record(r) => r.size,
            Ty::Array { elem, count } => elem.size().saturating_mul(*count),
            Ty::Unsupported => 0,
        }
    }

    pub fn align(&self) -> u64 {
        match self {
            Ty::Complex { size } => (size / 2).clamp(1, 16),
            Ty::Record(r) => r.align,
            Ty::Array { elem, .. } => elem.align(),
            Ty::Unsupported => 1,
            t => t.size().clamp(1, 16),
        }
    }
}

impl Record {
    /// A trivially copyable record without data (tag types): nothing of it is passed.
    pub fn is_empty(&self) -> bool {
        !self.by_ref
            && self
                .fields
                .iter()
                .all(|f| matches!(&f.ty, Ty::Record(r) if r.is_empty()))
    }
}

/// Typedefs, qualifiers and nested records deeper than this are not followed.
const MAX_DEPTH: u32 = 12;

impl<'a> Ctx<'_, 'a> {
    pub(super) fn entry(
        &self,
        off: UnitOffset,
    ) -> Option<DebuggingInformationEntry<'_, '_, R<'a>>> {
        self.unit.entry(off).ok()
    }

    /// The `DW_AT_type` of `e` (`None`: void, or a reference into another unit).
    pub(super) fn type_ref(&self, e: &DebuggingInformationEntry<R<'a>>) -> Option<UnitOffset> {
        match e.attr_value(gimli::DW_AT_type).ok()?? {
            AttributeValue::UnitRef(off) => Some(off),
            _ => None,
        }
    }

    /// The type at `off` with typedefs and qualifiers stripped (`None`: void).
    pub(super) fn strip(
        &self,
        mut off: UnitOffset,
    ) -> Option<DebuggingInformationEntry<'_, '_, R<'a>>> {
        for _ in 0..MAX_DEPTH {
            let e = self.entry(off)?;
            match e.tag() {
                gimli::DW_TAG_typedef
                | gimli::DW_TAG_const_type
                | gimli::DW_TAG_volatile_type
                | gimli::DW_TAG_restrict_type
                | gimli::DW_TAG_atomic_type => off = self.type_ref(&e)?,
                _ => return Some(e),
            }
        }
        None
    }

    /// The type at `off` (`None`: void).
    pub(super) fn ty(&self, off: Option<UnitOffset>) -> Option<Ty> {
        self.ty_at(off?, 0)
    }

    pub(super) fn ty_at(&self, off: UnitOffset, depth: u32) -> Option<Ty> {
        if depth > MAX_DEPTH {
            return Some(Ty::Unsupported);
        }
        let e = self.strip(off)?;
        if let Some(t) = self.types.borrow().get(&e.offset()) {
            return Some(t.clone());
        }
        let size = udata(&e, gimli::DW_AT_byte_size);
        let ty = match e.tag() {
            gimli::DW_TAG_base_type => self.base(&e, size.unwrap_or(0)),
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => {
                // To `char`, or to an array of them (`const char (&)[N]`).
                let mut pointee = self.type_ref(&e).and_then(|t| self.strip(t));
                if let Some(a) = pointee
                    .as_ref()
                    .filter(|a| a.tag() == gimli::DW_TAG_array_type)
                {
                    pointee = self.type_ref(a).and_then(|t| self.strip(t));
                }
                let to_char = pointee.is_some_and(|p| {
                    p.tag() == gimli::DW_TAG_base_type
                        && self.name(&p, gimli::DW_AT_name).as_deref() == Some("char")
                });
                Ty::Ptr { size: 8, to_char }
            }
            gimli::DW_TAG_ptr_to_member_type => {
                let method = self
                    .type_ref(&e)
                    .and_then(|t| self.strip(t))
                    .is_some_and(|t| t.tag() == gimli::DW_TAG_subroutine_type);
                Ty::Ptr {
                    size: if method { 16 } else { 8 },
                    to_char: false,
                }
            }
            gimli::DW_TAG_unspecified_type => Ty::Int {
                size: 8,
                plain_char: false,
            },
            gimli::DW_TAG_enumeration_type => {
                let name = self
                    .name(&e, gimli::DW_AT_name)
                    .filter(|n| self.enum_def(&e, n));
                Ty::Enum {
                    size: size.unwrap_or(4),
                    name,
                }
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                if flag(&e, gimli::DW_AT_declaration) {
                    self.declared(&e, depth)
                } else {
                    match size {
                        Some(size) => self.record(&e, size, depth),
                        None => Ty::Unsupported,
                    }
                }
            }
            gimli::DW_TAG_array_type => match self.type_ref(&e) {
                Some(elem) => {
                    let elem = self.ty_at(elem, depth + 1).unwrap_or(Ty::Unsupported);
                    Ty::Array {
                        count: self.array_count(&e, &elem, size),
                        elem: Rc::new(elem),
                    }
                }
                None => Ty::Unsupported,
            },
            _ => Ty::Unsupported,
        };
        self.types.borrow_mut().insert(e.offset(), ty.clone());
        Some(ty)
    }

    fn base(&self, e: &DebuggingInformationEntry<R<'a>>, size: u64) -> Ty {
        let enc = match e.attr_value(gimli::DW_AT_encoding).ok().flatten() {
            Some(AttributeValue::Encoding(enc)) => enc,
            _ => return Ty::Unsupported,
        };
        let name = self.name(e, gimli::DW_AT_name).unwrap_or_default();
        match enc {
            gimli::DW_ATE_float if size <= 16 => Ty::Float {
                size,
                x87: name.contains("long double"),
            },
            gimli::DW_ATE_complex_float => Ty::Complex { size },
            gimli::DW_ATE_signed
            | gimli::DW_ATE_unsigned
            | gimli::DW_ATE_boolean
            | gimli::DW_ATE_signed_char
            | gimli::DW_ATE_unsigned_char
            | gimli::DW_ATE_UTF
                if (1..=16).contains(&size) =>
            {
                Ty::Int {
                    size,
                    plain_char: name == "char",
                }
            }
            _ => Ty::Unsupported,
        }
    }

    /// Elements of an array type (its subranges multiplied; a flexible array has none).
    fn array_count(
        &self,
        e: &DebuggingInformationEntry<R<'a>>,
        elem: &Ty,
        size: Option<u64>,
    ) -> u64 {
        if let (Some(size), n @ 1..) = (size, elem.size()) {
            return size / n;
        }
        let mut count = 1u64;
        let mut any = false;
        self.children(e.offset(), |c| {
            if c.tag() == gimli::DW_TAG_subrange_type {
                any = true;
                let n = udata(c, gimli::DW_AT_count)
                    .or_else(|| udata(c, gimli::DW_AT_upper_bound).map(|u| u + 1))
                    .unwrap_or(0);
                count = count.saturating_mul(n);
            }
        });
        if any {
            count
        } else {
            0
        }
    }

    /// Calls `f` on each child of the entry at `off`.
    pub(super) fn children(
        &self,
        off: UnitOffset,
        mut f: impl FnMut(&DebuggingInformationEntry<R<'a>>),
    ) {
        let Ok(mut tree) = self.unit.entries_tree(Some(off)) else {
            return;
        };
        let Ok(root) = tree.root() else {
            return;
        };
        let mut children = root.children();
        while let Ok(Some(child)) = children.next() {
            f(child.entry());
        }
    }
}

pub(super) fn udata(e: &DebuggingInformationEntry<R<'_>>, at: gimli::DwAt) -> Option<u64> {
    e.attr_value(at).ok()??.udata_value()
}

pub(super) fn flag(e: &DebuggingInformationEntry<R<'_>>, at: gimli::DwAt) -> bool {
    matches!(
        e.attr_value(at).ok().flatten(),
        Some(AttributeValue::Flag(true))
    )
}
