//! Time values given on the command line: `-t 1.5us`, `time=` triggers and the two ends of
//! `-r START~STOP` (cli.md §2.1 and §2.3). Everything is converted to nanoseconds.

use crate::notice::Notices;
use replay::{TimePoint, TimeRange};
use std::fmt;

const NSEC_PER_SEC: u64 = 1_000_000_000;

/// A time value whose integer part has more digits than allowed. uftrace treats this as fatal
/// so that `1000us` is written `1ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyDigits {
    pub limit: u32,
}

impl fmt::Display for TooManyDigits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Limited {} digits (before and after decimal point)",
            self.limit
        )
    }
}

impl std::error::Error for TooManyDigits {}

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
/// `limit` digits and at most `limit` fraction digits are used. An unknown unit is reported
/// as a warning and the bare integer is used.
pub fn parse_time(text: &str, limit: u32, notices: &mut Notices) -> Result<u64, TooManyDigits> {
    let (int_digits, rest) = leading_digits(text);
    let int = saturating_number(int_digits);
    let (frac_digits, unit) = match rest.strip_prefix('.') {
        Some(after_dot) => leading_digits(after_dot),
        None => ("", rest),
    };
    if int >= 10u64.saturating_pow(limit) {
        return Err(TooManyDigits { limit });
    }
    // Fraction digits past the limit are dropped, not rounded.
    let frac_digits = &frac_digits[..frac_digits.len().min(limit as usize)];
    let frac = saturating_number(frac_digits);
    let frac_scale = 10u64.pow(frac_digits.len() as u32);

    let unit_ns = match unit.to_ascii_lowercase().as_str() {
        "" | "ns" | "nsec" => return Ok(int),
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => NSEC_PER_SEC,
        "m" | "min" => 60 * NSEC_PER_SEC,
        _ => {
            notices.warn(format!("The unit '{unit}' isn't supported"));
            return Ok(int);
        }
    };
    // frac < frac_scale, so the fractional part is below one unit and fits in u64.
    let frac_ns = (u128::from(frac) * u128::from(unit_ns) / u128::from(frac_scale)) as u64;
    Ok(int.saturating_mul(unit_ns).saturating_add(frac_ns))
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

/// One end of a time range: with a unit it is an elapsed time since the first record,
/// a bare number is an absolute timestamp.
fn parse_time_point(text: &str, notices: &mut Notices) -> Result<TimePoint, TooManyDigits> {
    if text.bytes().any(|b| b.is_ascii_alphabetic()) {
        parse_time(text, 3, notices).map(TimePoint::Elapsed)
    } else {
        Ok(TimePoint::Absolute(parse_timestamp(text)))
    }
}

/// Parses `-r START~STOP`; either side may be empty. Without `~` the range is ignored with a
/// `Usage:` notice and `None` is returned.
pub fn parse_time_range(
    text: &str,
    notices: &mut Notices,
) -> Result<Option<TimeRange>, TooManyDigits> {
    let Some((start, stop)) = text.split_once('~') else {
        notices.usage(format!("invalid time range: {text} (ignoring...)"));
        return Ok(None);
    };
    let mut side = |s: &str| -> Result<Option<TimePoint>, TooManyDigits> {
        if s.is_empty() {
            Ok(None)
        } else {
            parse_time_point(s, notices).map(Some)
        }
    };
    let start = side(start)?;
    let stop = side(stop)?;
    Ok(Some(TimeRange { start, stop }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(s: &str) -> Result<u64, TooManyDigits> {
        parse_time(s, 3, &mut Notices::silent())
    }

    #[test]
    fn units() {
        assert_eq!(time("1.5us"), Ok(1500));
        assert_eq!(time("1us"), Ok(1000));
        assert_eq!(time("1USEC"), Ok(1000));
        assert_eq!(time("250"), Ok(250));
        assert_eq!(time("250ns"), Ok(250));
        assert_eq!(time("2ms"), Ok(2_000_000));
        assert_eq!(time("2.25msec"), Ok(2_250_000));
        assert_eq!(time("1s"), Ok(NSEC_PER_SEC));
        assert_eq!(time("1.5sec"), Ok(1_500_000_000));
        assert_eq!(time("1.5m"), Ok(90 * NSEC_PER_SEC));
        assert_eq!(time("2min"), Ok(120 * NSEC_PER_SEC));
        assert_eq!(time("1.05us"), Ok(1050));
    }

    #[test]
    fn extra_fraction_digits_are_dropped() {
        assert_eq!(time("1.2345us"), Ok(1234));
        assert_eq!(time("1.9999ms"), Ok(1_999_000));
    }

    #[test]
    fn digit_limit_is_fatal() {
        let err = time("1000us").unwrap_err();
        assert_eq!(
            err.to_string(),
            "Limited 3 digits (before and after decimal point)"
        );
        assert!(time("1500").is_err());
        assert!(time("99999999999999999999999999ms").is_err());
        assert_eq!(time("999us"), Ok(999_000));
        assert_eq!(
            parse_time("1000us", 9, &mut Notices::silent()),
            Ok(1_000_000)
        );
    }

    #[test]
    fn unknown_unit_warns_and_uses_bare_number() {
        let mut n = Notices::silent();
        assert_eq!(parse_time("5xs", 3, &mut n), Ok(5));
        assert_eq!(n.stderr_lines(), ["WARN: The unit 'xs' isn't supported"]);
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("502716.387320101"), 502_716_387_320_101);
        assert_eq!(parse_timestamp("12.5"), 12_500_000_000);
        assert_eq!(parse_timestamp("12"), 12_000_000_000);
        assert_eq!(parse_timestamp("1.0000000019"), 1_000_000_001);
    }

    #[test]
    fn ranges() {
        let mut n = Notices::silent();
        let r = parse_time_range("200us~11ms", &mut n).unwrap().unwrap();
        assert_eq!(r.start, Some(TimePoint::Elapsed(200_000)));
        assert_eq!(r.stop, Some(TimePoint::Elapsed(11_000_000)));

        let r = parse_time_range("~300us", &mut n).unwrap().unwrap();
        assert_eq!(r.start, None);
        assert_eq!(r.stop, Some(TimePoint::Elapsed(300_000)));

        let r = parse_time_range("1385.335560518~", &mut n)
            .unwrap()
            .unwrap();
        assert_eq!(r.start, Some(TimePoint::Absolute(1_385_335_560_518)));
        assert_eq!(r.stop, None);
        assert!(n.stdout_lines().is_empty());

        assert!(parse_time_range("1000us~", &mut n).is_err());
    }

    #[test]
    fn range_without_tilde_is_ignored() {
        let mut n = Notices::silent();
        assert_eq!(parse_time_range("bogus", &mut n), Ok(None));
        assert_eq!(
            n.stdout_lines(),
            ["Usage: invalid time range: bogus (ignoring...)"]
        );
    }
}
