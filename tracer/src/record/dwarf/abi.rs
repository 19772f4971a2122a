//! The SysV x86-64 classification of a value (psABI §3.2.3): each eightbyte of a value of up
//! to 16 bytes gets a class from the scalars that overlap it, merged; larger values, and those
//! with unaligned fields, go to memory.

use super::types::Ty;

/// The class of one eightbyte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    None,
    Integer,
    Sse,
    SseUp,
    X87,
    X87Up,
    ComplexX87,
    Memory,
}

/// Two classes of one eightbyte merged.
fn merge(a: Class, b: Class) -> Class {
    use Class::*;
    match (a, b) {
        _ if a == b => a,
        (None, c) | (c, None) => c,
        (Memory, _) | (_, Memory) => Memory,
        (Integer, _) | (_, Integer) => Integer,
        (X87 | X87Up | ComplexX87, _) | (_, X87 | X87Up | ComplexX87) => Memory,
        _ => Sse,
    }
}

/// The classes of the eightbytes of a value of type `ty`, or `None` when it is passed in
/// memory (larger than 16 bytes, an unaligned field, a type without classification). The
/// caller decides about `X87` classes: memory for arguments, `st0` for return values.
pub fn eightbytes(ty: &Ty) -> Option<Vec<Class>> {
    let size = ty.size();
    if size > 16 {
        return None;
    }
    let mut classes = vec![Class::None; size.div_ceil(8) as usize];
    classify(ty, 0, &mut classes)?;
    for i in 0..classes.len() {
        let prev = i.checked_sub(1).map(|p| classes[p]);
        match classes[i] {
            Class::Memory => return None,
            Class::X87Up if prev != Some(Class::X87) => return None,
            Class::SseUp if !matches!(prev, Some(Class::Sse | Class::SseUp)) => {
                classes[i] = Class::Sse
            }
            _ => {}
        }
    }
    Some(classes)
}

/// Merges the classes of a value of type `ty` at byte `offset` into `out`.
fn classify(ty: &Ty, offset: u64, out: &mut [Class]) -> Option<()> {
    fn put(out: &mut [Class], at: u64, class: Class) -> Option<()> {
        let slot = out.get_mut((at / 8) as usize)?;
        *slot = merge(*slot, class);
        Some(())
    }
    match ty {
        Ty::Int { size, .. } | Ty::Ptr { size, .. } | Ty::Enum { size, .. } => {
            let mut at = offset;
            while at < offset + size {
                put(out, at, Class::Integer)?;
                at = (at / 8 + 1) * 8;
            }
        }
        Ty::Float { size: 16, x87 } => {
            let (lo, hi) = match x87 {
                true => (Class::X87, Class::X87Up),
                false => (Class::Sse, Class::SseUp),
            };
            put(out, offset, lo)?;
            put(out, offset + 8, hi)?;
        }
        Ty::Float { .. } => put(out, offset, Class::Sse)?,
        Ty::Complex { size: 32.. } => put(out, offset, Class::ComplexX87)?,
        Ty::Complex { size } => {
            put(out, offset, Class::Sse)?;
            if *size == 16 {
                put(out, offset + 8, Class::Sse)?;
            }
        }
        Ty::Record(r) => {
            if r.by_ref {
                return None;
            }
            for f in &r.fields {
                let at = offset + f.bit_offset / 8;
                match f.bits {
                    Some(bits) => {
                        let end = offset + (f.bit_offset + bits.max(1) - 1) / 8;
                        put(out, at, Class::Integer)?;
                        put(out, end, Class::Integer)?;
                    }
                    None if !f.bit_offset.is_multiple_of(8) || !at.is_multiple_of(f.ty.align()) => {
                        return None
                    }
                    None => classify(&f.ty, at, out)?,
                }
            }
        }
        Ty::Array { elem, count } => {
            let n = elem.size();
            for i in 0..*count {
                classify(elem, offset + i * n, out)?;
            }
        }
        Ty::Unsupported => return None,
    }
    Some(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::Class::{Integer, Sse, X87Up, X87};
    use super::*;
    use crate::record::dwarf::types::{Field, Record};
    use std::rc::Rc;

    pub fn int(size: u64) -> Ty {
        Ty::Int {
            size,
            plain_char: false,
        }
    }

    pub fn float(size: u64) -> Ty {
        Ty::Float {
            size,
            x87: size == 16,
        }
    }

    /// A record of `fields` laid out one after the other at their alignment.
    pub fn record(fields: &[Ty]) -> Ty {
        let mut at = 0u64;
        let mut align = 1;
        let mut out = Vec::new();
        for ty in fields {
            at = at.next_multiple_of(ty.align());
            align = ty.align().max(align);
            out.push(Field {
                bit_offset: at * 8,
                bits: None,
                ty: ty.clone(),
            });
            at += ty.size();
        }
        Ty::Record(Rc::new(Record {
            size: at.next_multiple_of(align),
            align,
            fields: out,
            ..Record::default()
        }))
    }

    pub fn union(fields: &[Ty]) -> Ty {
        let size = fields.iter().map(Ty::size).max().unwrap_or(0);
        let align = fields.iter().map(Ty::align).max().unwrap_or(1);
        Ty::Record(Rc::new(Record {
            size: size.next_multiple_of(align),
            align,
            fields: fields
                .iter()
                .map(|ty| Field {
                    bit_offset: 0,
                    bits: None,
                    ty: ty.clone(),
                })
                .collect(),
            ..Record::default()
        }))
    }

    #[test]
    fn structs_by_eightbyte() {
        assert_eq!(eightbytes(&record(&[int(4), int(4)])), Some(vec![Integer]));
        assert_eq!(
            eightbytes(&record(&[int(4), int(4), int(4)])),
            Some(vec![Integer, Integer])
        );
        assert_eq!(
            eightbytes(&record(&[int(4), float(8)])),
            Some(vec![Integer, Sse])
        );
        assert_eq!(
            eightbytes(&record(&[float(8), float(8)])),
            Some(vec![Sse, Sse])
        );
        // Two floats share an eightbyte; a float and an int make it INTEGER.
        assert_eq!(eightbytes(&record(&[float(4), float(4)])), Some(vec![Sse]));
        assert_eq!(
            eightbytes(&record(&[float(4), float(4), float(4), int(4)])),
            Some(vec![Sse, Integer])
        );
        assert_eq!(eightbytes(&record(&vec![int(8); 3])), None);
        assert_eq!(eightbytes(&record(&[float(16)])), Some(vec![X87, X87Up]));
    }

    #[test]
    fn unions_arrays_and_nesting() {
        assert_eq!(eightbytes(&union(&[int(8), float(8)])), Some(vec![Integer]));
        assert_eq!(eightbytes(&union(&[int(4), float(4)])), Some(vec![Integer]));
        assert_eq!(eightbytes(&union(&[float(4), float(8)])), Some(vec![Sse]));
        let arr = |elem: Ty, count| Ty::Array {
            elem: Rc::new(elem),
            count,
        };
        assert_eq!(
            eightbytes(&record(&[arr(int(4), 3)])),
            Some(vec![Integer, Integer])
        );
        assert_eq!(
            eightbytes(&record(&[arr(float(4), 4)])),
            Some(vec![Sse, Sse])
        );
        let point = record(&[int(4), int(4)]);
        assert_eq!(
            eightbytes(&record(&[point.clone(), float(8)])),
            Some(vec![Integer, Sse])
        );
        assert_eq!(
            eightbytes(&record(&[float(4), record(&[float(4), int(4)])])),
            Some(vec![Sse, Integer])
        );
        // Empty records take no class.
        assert_eq!(eightbytes(&record(&[])), Some(vec![]));
    }

    #[test]
    fn bitfields_and_unaligned_fields() {
        let bits = |bit_offset, bits| Field {
            bit_offset,
            bits: Some(bits),
            ty: int(4),
        };
        let r = Ty::Record(Rc::new(Record {
            size: 8,
            align: 4,
            fields: vec![
                bits(0, 3),
                bits(3, 5),
                Field {
                    bit_offset: 32,
                    bits: None,
                    ty: int(4),
                },
            ],
            ..Record::default()
        }));
        assert_eq!(eightbytes(&r), Some(vec![Integer]));
        let packed = Ty::Record(Rc::new(Record {
            size: 9,
            align: 1,
            fields: vec![
                Field {
                    bit_offset: 0,
                    bits: None,
                    ty: int(1),
                },
                Field {
                    bit_offset: 8,
                    bits: None,
                    ty: float(8),
                },
            ],
            ..Record::default()
        }));
        assert_eq!(eightbytes(&packed), None);
    }
}
