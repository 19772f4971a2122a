//! External data (`extern.dat`: `<seconds>.<fraction> <message>` lines a user adds to a data
//! directory), read with the records: where uftrace 0.13 shows each line.

use super::Merge;

/// Parses `extern.dat`: `<sec>[.<frac>] <message>` lines.
pub fn parse_extern(text: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (ts, msg) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let (sec, frac) = ts.split_once('.').unwrap_or((ts, ""));
        let Ok(sec) = sec.parse::<u64>() else {
            continue;
        };
        let frac: String = frac.chars().take(9).collect();
        let nsec = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<9}").parse::<u64>().unwrap_or(0)
        };
        let mut msg = msg.trim().to_string();
        if msg.len() > 1023 {
            let mut cut = 1023;
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            msg.truncate(cut);
        }
        out.push((sec * 1_000_000_000 + nsec, msg));
    }
    out.sort_by_key(|e| e.0);
    out
}

impl Merge<'_> {
    /// Whether `extern.dat` lines remain.
    #[inline]
    pub fn has_extern(&self) -> bool {
        self.ext_pos < self.externs.len()
    }

    /// Whether an `extern.dat` line is shown at `time`: as uftrace, only from the first
    /// record of the data on and inside `-r`.
    fn extern_shown(&self, time: u64) -> bool {
        time >= self.first_time && self.gate.in_range(time)
    }

    /// The next `extern.dat` line shown before `upto` (a record at the same time comes
    /// first); the lines passed over on the way are dropped. Lines after the data's last
    /// record are never taken: uftrace stops with the last record.
    #[inline]
    pub fn next_extern(&mut self, upto: u64) -> Option<(u64, String)> {
        loop {
            let e = self.externs.get(self.ext_pos)?;
            if e.0 >= upto {
                return None;
            }
            self.ext_pos += 1;
            if self.extern_shown(e.0) {
                return Some(e.clone());
            }
        }
    }

    /// Whether task `ti` has a record after `time` (read or still to come, `-r` or not): an
    /// `extern.dat` line shows only between two records of the task before it, as uftrace.
    pub fn task_goes_past(&self, ti: usize, time: u64) -> bool {
        self.heads[ti].is_some() || time < self.cursors[ti].last_time
    }

    /// Whether an `extern.dat` line is shown before a record at `time` (it comes between two
    /// records, which then are not printed as one leaf line).
    pub fn extern_before(&self, time: u64) -> bool {
        self.externs[self.ext_pos.min(self.externs.len())..]
            .iter()
            .take_while(|e| e.0 < time)
            .any(|e| self.extern_shown(e.0))
    }
}
