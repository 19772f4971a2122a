//! Argument payloads: split into values by the items of their spec ([`decode_payload`],
//! [`payload_len`]) and written from values ([`encode_payload`]); long doubles in the x87
//! 80-bit format.

use super::{align, ArgFormat, ArgItem};

/// A decoded payload item.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    Int {
        raw: u64,
        size: usize,
    },
    Float(f64),
    /// A long double (80-bit) converted to f64.
    LongDouble(f64),
    Char(u8),
    Str(Vec<u8>),
    Bytes(Vec<u8>),
}

/// Splits a payload into values, one per item. Returns `None` when the payload is too short.
pub fn decode_payload(items: &[&ArgItem], payload: &[u8]) -> Option<Vec<ArgValue>> {
    let mut pos = 0;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let data = payload.get(pos..)?;
        let len = item.stored_len(data)?;
        let data = data.get(..len)?;
        let v = match &item.format {
            ArgFormat::Str | ArgFormat::StdString => {
                let n = u16::from_le_bytes([data[0], data[1]]) as usize;
                ArgValue::Str(data.get(2..2 + n)?.to_vec())
            }
            ArgFormat::Char => ArgValue::Char(data[0]),
            ArgFormat::Float => match item.size {
                4 => ArgValue::Float(f64::from(f32::from_le_bytes(data[..4].try_into().ok()?))),
                10 => ArgValue::LongDouble(f80_to_f64(data[..10].try_into().ok()?)),
                _ => ArgValue::Float(f64::from_le_bytes(data[..8].try_into().ok()?)),
            },
            ArgFormat::Struct(_) => ArgValue::Bytes(data[..item.size].to_vec()),
            _ => {
                let mut buf = [0u8; 8];
                let n = item.size.min(8);
                buf[..n].copy_from_slice(&data[..n]);
                ArgValue::Int {
                    raw: u64::from_le_bytes(buf),
                    size: n,
                }
            }
        };
        out.push(v);
        pos += len;
    }
    Some(out)
}

/// Total payload bytes for the given items (including the final 8-byte padding); `None` when
/// `payload` is shorter than that.
pub fn payload_len(items: &[&ArgItem], payload: &[u8]) -> Option<usize> {
    let mut pos = 0;
    for item in items {
        pos += item.stored_len(payload.get(pos..)?)?;
    }
    let total = align(pos, 8);
    (total <= payload.len()).then_some(total)
}

/// Encodes values for items (the writer side). Strings longer than 98 bytes are cut as
/// libmcount does (95 bytes + `...`).
pub fn encode_payload(items: &[&ArgItem], values: &[ArgValue], out: &mut Vec<u8>) {
    let start = out.len();
    for (item, v) in items.iter().zip(values) {
        let at = out.len();
        match v {
            ArgValue::Str(s) => {
                let mut s = s.clone();
                if s.len() > 98 {
                    s.truncate(95);
                    s.extend_from_slice(b"...");
                }
                out.extend_from_slice(&(s.len() as u16).to_le_bytes());
                out.extend_from_slice(&s);
            }
            ArgValue::Char(c) => out.push(*c),
            ArgValue::Float(f) if item.size == 4 => {
                out.extend_from_slice(&(*f as f32).to_le_bytes())
            }
            ArgValue::Float(f) | ArgValue::LongDouble(f) if item.size == 10 => {
                out.extend_from_slice(&f64_to_f80(*f))
            }
            ArgValue::Float(f) | ArgValue::LongDouble(f) => out.extend_from_slice(&f.to_le_bytes()),
            ArgValue::Int { raw, .. } => {
                out.extend_from_slice(&raw.to_le_bytes()[..item.size.min(8)])
            }
            ArgValue::Bytes(b) => out.extend_from_slice(b),
        }
        let used = out.len() - at;
        let want = match item.format {
            ArgFormat::Str | ArgFormat::StdString => align(used, 4),
            ArgFormat::Char => 4,
            _ => align(item.size, 4),
        };
        out.resize(at + want, 0);
    }
    let total = align(out.len() - start, 8);
    out.resize(start + total, 0);
}

/// Converts an f64 to the x87 80-bit extended format.
fn f64_to_f80(f: f64) -> [u8; 10] {
    let bits = f.to_bits();
    let sign = ((bits >> 63) as u16) << 15;
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    let (e, mant) = match exp {
        0 if frac == 0 => (0u16, 0u64),
        0 => {
            // Subnormal: normalise the fraction.
            let shift = frac.leading_zeros() - 11;
            (
                (1 - 1023 + 16383 - shift as i32) as u16,
                frac << (11 + shift),
            )
        }
        0x7ff => (0x7fff, (1 << 63) | (frac << 11)),
        _ => ((exp - 1023 + 16383) as u16, (1 << 63) | (frac << 11)),
    };
    let mut out = [0u8; 10];
    out[..8].copy_from_slice(&mant.to_le_bytes());
    out[8..].copy_from_slice(&(sign | e).to_le_bytes());
    out
}

/// Converts an x87 80-bit extended float to f64 (enough precision for display).
fn f80_to_f64(b: [u8; 10]) -> f64 {
    let mant = u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
    let se = u16::from_le_bytes([b[8], b[9]]);
    let sign = if se & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from(se & 0x7fff);
    if exp == 0 && mant == 0 {
        return 0.0 * sign;
    }
    if exp == 0x7fff {
        return if mant << 1 == 0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    let e = exp - 16383 + 1023;
    if (1..2047).contains(&e) {
        let bits = ((se as u64 & 0x8000) << 48) | ((e as u64) << 52) | ((mant << 1) >> 12);
        return f64::from_bits(bits);
    }
    // Outside f64's normal range: scale in two steps to avoid an early underflow.
    sign * (mant as f64 / 2f64.powi(63)) * 2f64.powi(exp - 16383)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argspec::parse_spec_list;

    #[test]
    fn payload_round_trip() {
        let specs = parse_spec_list("f@arg1/s,arg2/c,fparg1,arg3/i32,fparg2/32", 8, |_| {});
        let items: Vec<&ArgItem> = specs[0].items.iter().collect();
        let values = vec![
            ArgValue::Str(b"hello world".to_vec()),
            ArgValue::Char(b'z'),
            ArgValue::Float(3.0),
            ArgValue::Int {
                raw: 0xffff_fffe,
                size: 4,
            },
            ArgValue::Float(1.5),
        ];
        let mut buf = Vec::new();
        encode_payload(&items, &values, &mut buf);
        assert_eq!(&buf[..16], b"\x0b\x00hello world\x00\x00\x00");
        assert_eq!(buf.len() % 8, 0);
        assert_eq!(payload_len(&items, &buf), Some(buf.len()));
        assert_eq!(decode_payload(&items, &buf).unwrap(), values);
    }

    #[test]
    fn long_double_payloads() {
        let specs = parse_spec_list("f@fparg1/80%stack+1,arg1/i32,fparg2/80", 8, |_| {});
        let items: Vec<&ArgItem> = specs[0].items.iter().collect();
        // 6.0: mantissa 0xC000000000000000, exponent 16385; then 2 bytes of padding.
        let mut six = 0xC000_0000_0000_0000u64.to_le_bytes().to_vec();
        six.extend_from_slice(&16385u16.to_le_bytes());
        let mut payload = six.clone();
        payload.extend_from_slice(&[0, 0, 7, 0, 0, 0]);
        payload.extend_from_slice(&f64_to_f80(-1.5));
        payload.extend_from_slice(&[0; 6]);
        assert_eq!(payload_len(&items, &payload), Some(32));
        let want = vec![
            ArgValue::LongDouble(6.0),
            ArgValue::Int { raw: 7, size: 4 },
            ArgValue::LongDouble(-1.5),
        ];
        assert_eq!(decode_payload(&items, &payload).unwrap(), want);
        let mut buf = Vec::new();
        encode_payload(&items, &want, &mut buf);
        assert_eq!(buf, payload);
    }

    #[test]
    fn long_double() {
        // 1.5 as x87 extended: mantissa 0xC000000000000000, exponent 16383.
        let mut b = [0u8; 10];
        b[..8].copy_from_slice(&0xC000_0000_0000_0000u64.to_le_bytes());
        b[8..].copy_from_slice(&16383u16.to_le_bytes());
        assert_eq!(f80_to_f64(b), 1.5);
        assert_eq!(f64_to_f80(1.5), b);
        assert_eq!(f80_to_f64(f64_to_f80(-3.25e-300)), -3.25e-300);
    }
}
