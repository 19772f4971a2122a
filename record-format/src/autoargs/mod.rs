//! The built-in prototypes of `-a`/`--auto-args`: argument and return-value specs of common C
//! library functions, in the argspec grammar of the `info` file's `argauto`/`retauto`/
//! `enumauto` lines (data-format §2.4). The recorder writes them into `info`; the runtime
//! applies them to library calls by name; the readers show the values with them.
//!
//! The specs are written from the functions' C prototypes (their manual pages) and the enum
//! values from the system headers ([`args`], [`rets`], [`enums`]). The set of functions and
//! the way each value shows (its size and format, enum names) are those of uftrace 0.13, so
//! that a replay of a `-a` recording prints each call as uftrace prints it; in particular
//! `mkdir` shows only its path, `fseek` its whence as a number, `fallocate` its mode as a
//! number, `prctl` nine words. Only formats uftrace 0.13 reads are used (no `/o`).
//!
//! Deliberate differences: the functions of [`BEYOND_UFTRACE`], whose arguments uftrace 0.13
//! does not show, are given the ones their prototypes name, because the values are plainly
//! right and useful: `pread`/`pwrite` (descriptor, buffer, count, offset), `send`/`recv`,
//! `listen`, `nanosleep`, `_exit` (its status, as `exit`'s) and the sized `operator delete`
//! `_ZdlPvm` (pointer as `_ZdlPv`'s, and size), which C++14 code calls instead of `_ZdlPv`.

mod args;
mod enums;
mod rets;

pub use args::ARGAUTO;
pub use enums::ENUMAUTO;
pub use rets::RETAUTO;

/// Functions given arguments or a return value that uftrace 0.13 does not show (see the
/// module documentation).
pub const BEYOND_UFTRACE: &[&str] = &[
    "pread",
    "pwrite",
    "send",
    "recv",
    "listen",
    "nanosleep",
    "_exit",
    "_ZdlPvm",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argspec::{items_of_kind, ItemKind};
    use crate::dbg::parse_enums;

    #[test]
    fn every_entry_parses() {
        for (list, kind) in [(ARGAUTO, ItemKind::Args), (RETAUTO, ItemKind::Ret)] {
            for entry in list.split(';') {
                let (name, items) = entry.split_once('@').expect(entry);
                assert!(!name.is_empty(), "{entry}");
                let (items, module) = items_of_kind(items, kind, 8).expect(entry);
                assert!(!items.is_empty() && module.is_none(), "{entry}");
                assert!(
                    !entry.contains("/o"),
                    "uftrace 0.13 cannot read /o: {entry}"
                );
            }
        }
        let enums = parse_enums(ENUMAUTO).expect("enums parse");
        // uftrace 0.13's spelling.
        assert!(ENUMAUTO.contains("MAP_ANON=32") && !ENUMAUTO.contains("MAP_ANONYMOUS"));
        for entry in ARGAUTO.split(';') {
            for e in entry.split("/e:").skip(1) {
                let name = e.split(',').next().unwrap();
                assert!(
                    enums.iter().any(|(n, _)| n == name),
                    "{entry}: enum {name} missing"
                );
            }
        }
    }

    #[test]
    fn one_entry_per_function() {
        for list in [ARGAUTO, RETAUTO] {
            let mut names: Vec<&str> = list
                .split(';')
                .map(|e| e.split('@').next().unwrap())
                .collect();
            let len = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), len, "a function listed twice");
        }
        for f in BEYOND_UFTRACE {
            let entry = format!(";{f}@");
            assert!(
                format!(";{ARGAUTO}").contains(&entry) || format!(";{RETAUTO}").contains(&entry),
                "{f}"
            );
        }
    }

    #[test]
    fn enum_values_are_the_headers() {
        let enums = parse_enums(ENUMAUTO).unwrap();
        let value = |e: &str, name: &str| {
            let (_, values) = enums.iter().find(|(n, _)| n == e).expect(e);
            values.iter().find(|(_, n)| n == name).expect(name).0
        };
        assert_eq!(value("utrace_open", "O_CREAT"), 0o100);
        assert_eq!(value("utrace_open", "O_SYNC"), 0o4010000);
        assert_eq!(value("utrace_mode", "mod_644"), 0o644);
        assert_eq!(value("utrace_mode", "mod_077"), 0o77);
        assert_eq!(value("utrace_madv", "MADV_DODUMP"), 17);
        assert_eq!(value("utrace_af", "AF_SMC"), 43);
        assert_eq!(value("utrace_sock", "SOCK_PACKET"), 10);
        assert_eq!(value("utrace_signal", "SIGSYS"), 31);
        assert_eq!(value("utrace_signal", "SIGRTMIN"), 32);
        assert_eq!(value("utrace_prctl", "PR_GET_NAME"), 16);
        assert_eq!(value("utrace_prctl", "PR_CAP_AMBIENT"), 47);
        assert_eq!(value("utrace_locale", "LC_ALL"), 6);
        assert_eq!(value("utrace_clock", "CLOCK_BOOTTIME_ALARM"), 9);
        assert_eq!(value("utrace_rtld", "RTLD_GLOBAL"), 0x100);
    }
}
