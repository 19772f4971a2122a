//! Interning of `dump --perfetto`: each packet sequence (a task) names a function, an event
//! or an annotation once, in the `InternedData` of the packet that first uses it, and refers to
//! it by id after that. These are the pieces the writer interns and the sets it keeps of what
//! a sequence has interned.

use super::proto::{InternedData, InternedName, SourceLocation};

/// A set of small ids.
#[derive(Debug, Default)]
pub(super) struct Bits(Vec<u64>);

impl Bits {
    /// Adds `i`; whether it was new.
    pub fn insert(&mut self, i: u64) -> bool {
        let (w, b) = ((i / 64) as usize, i % 64);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        let new = self.0[w] & (1 << b) == 0;
        self.0[w] |= 1 << b;
        new
    }
}

pub(super) fn interned_name(iid: u64, name: &str) -> InternedName {
    InternedName {
        iid: Some(iid),
        name: Some(name.to_string()),
    }
}

pub(super) fn interned_empty(i: &InternedData) -> bool {
    i.event_names.is_empty()
        && i.debug_annotation_names.is_empty()
        && i.source_locations.is_empty()
        && i.event_categories.is_empty()
}

/// `file:line` as a source location of `func`.
pub(super) fn source_location(iid: u64, func: &str, loc: &str) -> SourceLocation {
    let (file, line) = match loc.rsplit_once(':') {
        Some((f, l)) if l.parse::<u32>().is_ok() => (f, l.parse().ok()),
        _ => (loc, None),
    };
    SourceLocation {
        iid: Some(iid),
        file_name: Some(file.to_string()),
        function_name: Some(func.to_string()),
        line_number: line,
    }
}

/// An event's text as its name and fields: `name (fields)`.
pub(super) fn split_event(text: &str) -> (&str, Option<&str>) {
    match text.find(" (") {
        Some(i) if text.ends_with(')') => (&text[..i], Some(&text[i + 2..text.len() - 1])),
        _ => (text, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_remember_ids() {
        let mut b = Bits::default();
        assert!(b.insert(3));
        assert!(b.insert(200));
        assert!(!b.insert(3));
        assert!(!b.insert(200));
        assert!(b.insert(64));
    }

    #[test]
    fn locations_and_event_texts() {
        let l = source_location(5, "main", "src/a.c:42");
        assert_eq!(l.file_name.as_deref(), Some("src/a.c"));
        assert_eq!(l.line_number, Some(42));
        assert_eq!(l.function_name.as_deref(), Some("main"));
        let odd = source_location(5, "f", "c:\\x:y");
        assert_eq!(
            (odd.file_name.as_deref(), odd.line_number),
            (Some("c:\\x:y"), None)
        );
        assert_eq!(
            split_event("block:block_rq_issue (254,0 WS 4096 () 8 + 8)"),
            ("block:block_rq_issue", Some("254,0 WS 4096 () 8 + 8"))
        );
        assert_eq!(split_event("linux:sched-out"), ("linux:sched-out", None));
        assert!(interned_empty(&InternedData::default()));
    }
}
