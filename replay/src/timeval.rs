//! Time values as the command line writes them (`1.5us`, `10ms`, `2s`) and as output shows
//! them (10-character durations).

use std::fmt::Write as _;

/// Why a time value was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    #[error("Limited 3 digits (before and after decimal point)")]
    TooManyDigits,
    #[error("invalid time: {0}")]
    Invalid(String),
    #[error("The unit '{0}' isn't supported")]
    UnknownUnit(String),
}

fn unit_ns(unit: &str) -> Option<u64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        _ => return None,
    })
}

/// Parses `NUMBER[.FRACTION][UNIT]` into nanoseconds; the integer part must be < 1000, extra
/// fraction digits beyond 3 are dropped. An unknown unit is an error carrying the bare number's
/// interpretation in ns (uftrace warns and uses it).
pub fn parse_time(s: &str) -> Result<u64, TimeError> {
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(num_end);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(TimeError::Invalid(s.to_string()));
    }
    let int_v: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| TimeError::Invalid(s.to_string()))?
    };
    if int_v >= 1000 {
        return Err(TimeError::TooManyDigits);
    }
    let frac3: String = frac.chars().take(3).collect();
    let frac_v: u64 = if frac3.is_empty() {
        0
    } else {
        format!("{frac3:0<3}")
            .parse()
            .map_err(|_| TimeError::Invalid(s.to_string()))?
    };
    let Some(mult) = unit_ns(unit) else {
        return Err(TimeError::UnknownUnit(unit.to_string()));
    };
    Ok(int_v * mult + frac_v * mult / 1000)
}

/// Appends `v` right-aligned in at least 3 columns.
fn push_int3(out: &mut String, v: u64) {
    if v >= 1000 {
        let _ = write!(out, "{v}");
        return;
    }
    let v = v as u32;
    let (h, t, o) = (v / 100, v / 10 % 10, v % 10);
    out.push(if h > 0 { (b'0' + h as u8) as char } else { ' ' });
    out.push(if h > 0 || t > 0 {
        (b'0' + t as u8) as char
    } else {
        ' '
    });
    out.push((b'0' + o as u8) as char);
}

/// Appends a 10-character duration (`  1.234 us`, ` 10.130 ms`, `  1.200  s`, blank for 0).
/// Digits are truncated, not rounded. With `color`, the unit is wrapped in ANSI codes.
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
    push_int3(out, int);
    out.push('.');
    let f = frac.min(999) as u32;
    out.push((b'0' + (f / 100) as u8) as char);
    out.push((b'0' + (f / 10 % 10) as u8) as char);
    out.push((b'0' + (f % 10) as u8) as char);
    out.push(' ');
    match (color, code) {
        (true, Some(c)) => {
            let _ = write!(out, "{c}{unit}\x1b[0m");
        }
        _ => out.push_str(unit),
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
    }

    #[test]
    fn parse() {
        assert_eq!(parse_time("1.5us"), Ok(1500));
        assert_eq!(parse_time("1ms"), Ok(1_000_000));
        assert_eq!(parse_time("10"), Ok(10));
        assert_eq!(parse_time("2S"), Ok(2_000_000_000));
        assert_eq!(parse_time("1000us"), Err(TimeError::TooManyDigits));
        assert!(matches!(parse_time("3x"), Err(TimeError::UnknownUnit(_))));
    }
}
