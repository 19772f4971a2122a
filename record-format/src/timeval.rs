//! Time values as the command line writes them (`1.5us`, `10ms`, `2s`) and as output shows
//! them (10-character durations).

const NSEC_PER_SEC: u64 = 1_000_000_000;

/// A time value whose integer part has more digits than allowed. uftrace treats this as fatal
/// so that `1000us` is written `1ms`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Limited {limit} digits (before and after decimal point)")]
pub struct TooManyDigits {
    pub limit: u32,
}

/// A parsed time value, and the unit that was not understood (uftrace warns
/// `The unit 'x' isn't supported` and uses the bare number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedTime {
    pub ns: u64,
    pub unknown_unit: Option<String>,
}

/// Splits `s` into its leading ASCII digits and the rest.
fn leading_digits(s: &str) -> (&str, &str) {
    let end = s
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    s.split_at(end)
}

/// Parses digits as a number, saturating instead of overflowing (an over-long number is then
/// rejected by the digit limit rather than silently wrapped).
fn saturating_number(digits: &str) -> u64 {
    digits.bytes().fold(0u64, |acc, b| {
        acc.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    })
}

/// Parses `NUMBER[.FRACTION][UNIT]` into nanoseconds. UNIT is one of `ns nsec us usec ms msec
/// s sec m min` (any case); no unit means nanoseconds. The integer part must have at most
/// `limit` digits and at most `limit` fraction digits are used (dropped, not rounded).
pub fn parse_time(text: &str, limit: u32) -> Result<ParsedTime, TooManyDigits> {
    let (int_digits, rest) = leading_digits(text);
    let int = saturating_number(int_digits);
    let (frac_digits, unit) = match rest.strip_prefix('.') {
        Some(after_dot) => leading_digits(after_dot),
        None => ("", rest),
    };
    if int >= 10u64.saturating_pow(limit) {
        return Err(TooManyDigits { limit });
    }
    let frac_digits = &frac_digits[..frac_digits.len().min(limit as usize)];
    let frac = saturating_number(frac_digits);
    let frac_scale = 10u64.pow(frac_digits.len() as u32);
    let bare = |unknown_unit| {
        Ok(ParsedTime {
            ns: int,
            unknown_unit,
        })
    };
    let unit_ns = match unit.to_ascii_lowercase().as_str() {
        "" | "ns" | "nsec" => return bare(None),
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => NSEC_PER_SEC,
        "m" | "min" => 60 * NSEC_PER_SEC,
        _ => return bare(Some(unit.to_string())),
    };
    // frac < frac_scale, so the fractional part is below one unit and fits in u64.
    let frac_ns = (u128::from(frac) * u128::from(unit_ns) / u128::from(frac_scale)) as u64;
    Ok(ParsedTime {
        ns: int.saturating_mul(unit_ns).saturating_add(frac_ns),
        unknown_unit: None,
    })
}

/// Parses an absolute timestamp `SEC[.NSEC]` as printed by `-f time`; a fraction with fewer
/// than 9 digits is scaled (`.5` is half a second), extra digits are dropped.
pub fn parse_timestamp(text: &str) -> u64 {
    let (sec_digits, rest) = leading_digits(text);
    let sec = saturating_number(sec_digits);
    let frac_digits = rest.strip_prefix('.').map_or("", |r| leading_digits(r).0);
    let frac_digits = &frac_digits[..frac_digits.len().min(9)];
    let nsec = saturating_number(frac_digits) * 10u64.pow(9 - frac_digits.len() as u32);
    sec.saturating_mul(NSEC_PER_SEC).saturating_add(nsec)
}

/// Appends a 10-character duration (`  1.234 us`, ` 10.130 ms`, `  1.200  s`, blank for 0).
/// Digits are truncated, not rounded. With `color`, the unit is wrapped in ANSI codes.
#[inline]
pub fn push_duration(out: &mut String, ns: u64, color: bool) {
    if ns == 0 {
        out.push_str("          ");
        return;
    }
    let (int, frac, unit, code) = if ns < 1_000_000 {
        (ns / 1000, ns % 1000, "us", None)
    } else if ns < 1_000_000_000 {
        (ns / 1_000_000, ns / 1000 % 1000, "ms", Some("\x1b[32m"))
    } else if ns < 60_000_000_000 {
        (
            ns / 1_000_000_000,
            ns / 1_000_000 % 1000,
            " s",
            Some("\x1b[33m"),
        )
    } else if ns < 24 * 60_000_000_000 {
        let secs = ns / 1_000_000_000;
        (secs / 60, secs % 60, " m", Some("\x1b[31m"))
    } else {
        let mins = ns / 60_000_000_000;
        (
            (mins / 60).min(999),
            (mins % 60).min(999),
            " h",
            Some("\x1b[31m"),
        )
    };
    // Every branch above keeps `int` below 1000: three columns, right-aligned.
    let (i, f) = (int.min(999) as usize * 3, frac.min(999) as usize * 3);
    out.push_str(&INT3[i..i + 3]);
    out.push('.');
    out.push_str(&FRAC3[f..f + 3]);
    out.push(' ');
    match (color, code) {
        (true, Some(c)) => {
            out.push_str(c);
            out.push_str(unit);
            out.push_str("\x1b[0m");
        }
        _ => out.push_str(unit),
    }
}

/// `0` to `999` as three characters each: right-aligned (`INT3`) or zero-padded (`FRAC3`).
const INT3: &str = digits3(&INT3_BYTES);
const FRAC3: &str = digits3(&FRAC3_BYTES);
const INT3_BYTES: [u8; 3000] = table3(b' ');
const FRAC3_BYTES: [u8; 3000] = table3(b'0');

const fn table3(pad: u8) -> [u8; 3000] {
    let mut t = [0u8; 3000];
    let mut v = 0;
    while v < 1000 {
        let (h, d, o) = (v / 100, v / 10 % 10, v % 10);
        t[v * 3] = if h > 0 { b'0' + h as u8 } else { pad };
        t[v * 3 + 1] = if h > 0 || d > 0 { b'0' + d as u8 } else { pad };
        t[v * 3 + 2] = b'0' + o as u8;
        v += 1;
    }
    t
}

const fn digits3(t: &'static [u8; 3000]) -> &'static str {
    match std::str::from_utf8(t) {
        Ok(s) => s,
        Err(_) => panic!("digit tables are ASCII"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ns: u64) -> String {
        let mut s = String::new();
        push_duration(&mut s, ns, false);
        s
    }

    #[test]
    fn durations() {
        assert_eq!(d(0), "          ");
        assert_eq!(d(921), "  0.921 us");
        assert_eq!(d(1234567), "  1.234 ms");
        assert_eq!(d(189_943), "189.943 us");
        assert_eq!(d(10_130_000), " 10.130 ms");
        assert_eq!(d(1_200_000_000), "  1.200  s");
        assert_eq!(d(301_800_000_000), "  5.001  m");
        assert_eq!(d(90_061_000_000_000), " 25.001  h");
        assert_eq!(d(u64::MAX), "999.034  h");
        let mut s = String::new();
        push_duration(&mut s, 1_234_567, true);
        assert_eq!(s, "  1.234 \x1b[32mms\x1b[0m");
        s.clear();
        push_duration(&mut s, 921, true);
        assert_eq!(s, "  0.921 us");
    }

    #[test]
    fn parse() {
        let ns = |t| parse_time(t, 3).map(|p| p.ns);
        assert_eq!(ns("1.5us"), Ok(1500));
        assert_eq!(ns("1ms"), Ok(1_000_000));
        assert_eq!(ns("10"), Ok(10));
        assert_eq!(ns("2S"), Ok(2_000_000_000));
        assert_eq!(ns("1.2345ms"), Ok(1_234_000));
        assert_eq!(ns("1000us"), Err(TooManyDigits { limit: 3 }));
        assert_eq!(
            parse_time("3x", 3).unwrap().unknown_unit.as_deref(),
            Some("x")
        );
        assert_eq!(parse_timestamp("502716.5"), 502_716_500_000_000);
    }
}
