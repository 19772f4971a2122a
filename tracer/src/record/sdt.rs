//! `-E PROVIDER:NAME`: the user SDT events of the executable that the patterns select, written
//! to `events.txt` before the program starts (ids from 1000000, data-format §11.1); libmcount
//! enables the probe sites of the events listed there (`libmcount::sdt`).
//!
//! Only the executable's probes are looked for: probes of shared libraries are not enabled
//! (their events would need ids the recorder cannot know before the libraries are loaded).

use anyhow::Context;
use record_format::pattern::MatchType;
use record_format::sdt::{events_txt, select, EventPattern};
use std::path::Path;

/// Selects the events of `exe` that `patterns` name and writes `events.txt` into `dir` when
/// there are any; returns whether there are.
pub(super) fn write_events(
    dir: &Path,
    exe: &Path,
    patterns: &[String],
    match_type: MatchType,
) -> anyhow::Result<bool> {
    if patterns.is_empty() {
        return Ok(false);
    }
    let bytes = std::fs::read(exe).with_context(|| format!("cannot read {}", exe.display()))?;
    let probes = record_format::elf::parse(&bytes)
        .map(|elf| record_format::elf::sdt::sdt_probes(&elf, &bytes))
        .unwrap_or_default();
    let patterns: Vec<EventPattern> = patterns
        .iter()
        .filter_map(|p| EventPattern::new(p, match_type))
        .collect();
    let events = select(&probes, &patterns);
    super::debug(format!(
        "{} SDT probe(s) in the executable, {} event(s) enabled",
        probes.len(),
        events.len()
    ));
    if events.is_empty() {
        return Ok(false);
    }
    super::write_file(dir, "events.txt", events_txt(&events).as_bytes())?;
    Ok(true)
}

/// `live --list-event`: the SDT events of the executable `exe`, one
/// `[SDT event] PROVIDER:NAME ARGS` line each, as uftrace lists them.
pub fn event_list(exe: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(exe).with_context(|| format!("cannot read {}", exe.display()))?;
    let probes = record_format::elf::parse(&bytes)
        .map(|elf| record_format::elf::sdt::sdt_probes(&elf, &bytes))
        .unwrap_or_default();
    Ok(probes
        .iter()
        .map(|p| format!("[SDT event] {} {}\n", p.full_name(), p.args))
        .collect())
}
