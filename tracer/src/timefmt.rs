//! Time values given on the command line: `-t 1.5us`, `time=` triggers and the two ends of
//! `-r START~STOP` (cli.md §2.1 and §2.3). Everything is converted to nanoseconds.

use crate::notice::Notices;
use replay::{TimePoint, TimeRange};

pub use replay::timeval::{parse_timestamp, TooManyDigits};

/// Parses a time value (see [`replay::timeval::parse_time`]); an unknown unit is reported as a
/// warning and the bare number is used, as uftrace does.
pub fn parse_time(text: &str, limit: u32, notices: &mut Notices) -> Result<u64, TooManyDigits> {
    let parsed = replay::timeval::parse_time(text, limit)?;
    if let Some(unit) = parsed.unknown_unit {
        notices.warn(format!("The unit '{unit}' isn't supported"));
    }
    Ok(parsed.ns)
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
    const NSEC_PER_SEC: u64 = 1_000_000_000;
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
