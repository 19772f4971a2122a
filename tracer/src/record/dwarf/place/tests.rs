//! Items of crafted signatures, against the lines uftrace 0.13 writes for the same C++
//! declarations (where it follows the convention).

use super::{arg_items, ret_item};
use crate::record::dwarf::abi::tests::{float, int, record};
use crate::record::dwarf::types::{Record, Ty};
use std::rc::Rc;

fn named(ty: Ty, name: &str) -> Ty {
    match ty {
        Ty::Record(r) => Ty::Record(Rc::new(Record {
            name: Some(name.to_string()),
            ..(*r).clone()
        })),
        t => t,
    }
}

fn by_ref(size: u64, name: &str, string: bool) -> Ty {
    Ty::Record(Rc::new(Record {
        name: Some(name.to_string()),
        size,
        align: 8,
        by_ref: true,
        string,
        ..Record::default()
    }))
}

fn a(params: &[Ty], ret: Option<&Ty>) -> String {
    let params: Vec<Option<Ty>> = params.iter().cloned().map(Some).collect();
    arg_items(&params, ret).join(",")
}

fn point() -> Ty {
    named(record(&[int(4), int(4)]), "Point")
}

#[test]
fn plain_arguments_need_no_location() {
    assert_eq!(
        a(&[int(4), float(4), int(8), float(4)], None),
        "arg1,fparg1/32,arg2,fparg2/32"
    );
    let ptr = Ty::Ptr {
        size: 8,
        to_char: true,
    };
    let ch = Ty::Int {
        size: 1,
        plain_char: true,
    };
    assert_eq!(a(&[ptr, ch], None), "arg1/s,arg2/c");
    // Past the registers: the stack, always with its location.
    let mut nine = vec![float(8); 9];
    nine.push(int(4));
    assert_eq!(
        a(&nine, None),
        "fparg1/64,fparg2/64,fparg3/64,fparg4/64,fparg5/64,fparg6/64,fparg7/64,fparg8/64,\
         fparg9/64%stack+1,arg1"
    );
}

#[test]
fn structs_in_registers_and_memory() {
    assert_eq!(a(&[point()], None), "arg1/t8:Point%RDI");
    let klass = named(record(&[int(4), float(8)]), "Klass");
    assert_eq!(a(&[klass], None), "arg1/t16:Klass%RDI+XMM0");
    let big = named(record(&vec![int(8); 4]), "Big");
    assert_eq!(a(std::slice::from_ref(&big), None), "arg1/t32:Big%stack+1");
    let di = named(record(&[float(8), int(4)]), "DI");
    // After a struct, every item has its location.
    assert_eq!(
        a(&[int(4), di, float(4)], None),
        "arg1,arg2/t16:DI%XMM0+RSI,fparg1/32%XMM1"
    );
    let mut many = vec![int(4); 5];
    many.extend([point(), big, int(4), int(4)]);
    assert_eq!(
        a(&many, None),
        "arg1,arg2,arg3,arg4,arg5,arg6/t8:Point%R9,arg7/t32:Big%stack+1,arg8%stack+5,arg9%stack+6"
    );
    // Two registers needed, one left: the whole struct goes to the stack.
    let iii = named(record(&vec![int(4); 3]), "III");
    let mut three = vec![int(4); 5];
    three.extend([iii, int(4)]);
    assert_eq!(
        a(&three, None),
        "arg1,arg2,arg3,arg4,arg5,arg6/t12:III%stack+1,arg7%R9"
    );
    let dd = named(record(&[float(8), float(8)]), "DD");
    let mut f = vec![float(8); 7];
    f.extend([dd, float(8), float(8)]);
    assert_eq!(
        a(&f, None),
        "fparg1/64,fparg2/64,fparg3/64,fparg4/64,fparg5/64,fparg6/64,fparg7/64,\
         arg1/t16:DD%stack+1,fparg8/64%XMM7,fparg9/64%stack+3"
    );
}

#[test]
fn empty_and_by_reference() {
    let empty = named(record(&[]), "Empty");
    assert_eq!(
        a(&[empty.clone(), int(4)], None),
        "arg1/t0:Empty%stack+1,arg2%RDI"
    );
    // An empty struct takes no stack word.
    let mut seven = vec![int(4); 7];
    seven.extend([empty, int(4)]);
    assert_eq!(
        a(&seven, None),
        "arg1,arg2,arg3,arg4,arg5,arg6,arg7%stack+1,arg8/t0:Empty%stack+2,arg9%stack+2"
    );
    assert_eq!(
        a(&[by_ref(24, "vector", false)], None),
        "arg1/t24:vector%RDI"
    );
    assert_eq!(
        a(
            &[
                Ty::Ptr {
                    size: 8,
                    to_char: false
                },
                by_ref(32, "basic_string", true)
            ],
            None
        ),
        "arg1/p,arg2/S%RSI"
    );
}

#[test]
fn long_double_on_the_stack() {
    let ld = float(16);
    assert_eq!(
        a(&[ld.clone(), ld.clone()], None),
        "fparg1/80%stack+1,fparg2/80%stack+3"
    );
    // Aligned to 16 bytes after one word.
    let mut eight = vec![int(4); 7];
    eight.extend([ld.clone(), int(4)]);
    assert_eq!(
        a(&eight, None),
        "arg1,arg2,arg3,arg4,arg5,arg6,arg7%stack+1,fparg1/80%stack+3,arg8%stack+5"
    );
    // A double after a long double is in xmm0, not where `fparg2` alone would put it.
    assert_eq!(
        a(&[ld.clone(), int(4), float(8)], None),
        "fparg1/80%stack+1,arg1,fparg2/64%XMM0"
    );
    assert_eq!(ret_item(Some(&ld)).text.as_deref(), Some("retval/f80"));
}

#[test]
fn returned_structs() {
    let p = point();
    let r = ret_item(Some(&p));
    assert_eq!(
        (r.text.as_deref(), r.hidden),
        (Some("retval/t8:Point"), false)
    );
    assert_eq!(a(&[int(4), int(4)], Some(&p)), "arg1%RDI,arg2%RSI");
    let b24 = named(record(&vec![int(8); 3]), "B24");
    assert!(ret_item(Some(&b24)).hidden);
    assert_eq!(a(&[int(4), int(8)], Some(&b24)), "arg1%RSI,arg2%RDX");
    // `struct { long double }` comes back in st0: no hidden pointer.
    let lds = named(record(&[float(16)]), "LDs");
    assert!(!ret_item(Some(&lds)).hidden);
    assert_eq!(a(&[int(4)], Some(&lds)), "arg1%RDI");
    let s = by_ref(32, "basic_string", true);
    assert_eq!(ret_item(Some(&s)).text.as_deref(), Some("retval/S"));
    assert_eq!(a(&[int(4)], Some(&s)), "arg1%RSI");
    let empty = named(record(&[]), "Empty");
    assert_eq!(
        ret_item(Some(&empty)).text.as_deref(),
        Some("retval/t0:Empty")
    );
    assert_eq!(a(&[int(4)], Some(&empty)), "arg1%RDI");
}

#[test]
fn a_struct_of_float128_takes_one_vector_register() {
    let q = named(
        record(&[Ty::Float {
            size: 16,
            x87: false,
        }]),
        "Q",
    );
    assert_eq!(a(&[q, float(8)], None), "arg1/t16:Q%XMM0,fparg1/64%XMM1");
}

#[test]
fn unsupported_types_end_the_list() {
    let params = vec![Some(int(4)), Some(Ty::Complex { size: 16 }), Some(int(4))];
    assert_eq!(arg_items(&params, None), ["arg1"]);
    let varargs = vec![Some(int(4)), None];
    assert_eq!(arg_items(&varargs, None), ["arg1"]);
}
