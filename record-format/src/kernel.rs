//! Kernel trace data (data-format.md §9, kernel.md §1.4–§1.6): the `kernel_header` file with
//! the tracefs texts it embeds, tracefs event `format` files, and the ftrace ring-buffer
//! sub-buffers that make up `kernel-cpuN.dat` — read and written.
//!
//! A sub-buffer ("page", `PAGE_SIZE` of `kernel_header` bytes) starts with a u64 timestamp and
//! a long `commit`: its low 27 bits count the bytes of event data after the header; bit 31 says
//! events were lost before the page, bit 30 that their count is stored as a long right after
//! the data. Events follow, each behind a u32 header: `type_len` (5 bits) and `time_delta`
//! (27 bits) added to the running time. `type_len` 1..=28: a payload of `type_len * 4` bytes;
//! 0: a u32 length (+4) then the payload; 29: padding (`time_delta` 0: the rest of the page is
//! empty); 30: time extend (the next u32 holds bits 27.. of the delta); 31: absolute time
//! stamp (bits 0..59). Little-endian, 64-bit kernels (the only ones utrace records).

use std::fmt::Write as _;

/// Page-header `commit` bits.
const COMMIT_MASK: u64 = (1 << 27) - 1;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;

/// Event-header `type_len` values.
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// Largest payload stored with its length in `type_len`.
const MAX_SMALL: usize = 28 * 4;
/// `time_delta` bits.
const DELTA_BITS: u32 = 27;
const DELTA_MASK: u64 = (1 << DELTA_BITS) - 1;

/// Bytes of a page header on a 64-bit kernel.
pub const PAGE_HEADER: usize = 16;

/// One field of an event's `format`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type as written (`unsigned long`, `__data_loc char[]`).
    pub ty: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// Elements of an array field (`args[6]`).
    pub array: Option<usize>,
}

/// A tracefs event `format` file: name, numeric ID and field layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// The event's system (`raw_syscalls`), from the file's path.
    pub system: String,
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
    /// The `print fmt:` line's value.
    pub print_fmt: String,
}

impl EventFormat {
    /// Parses the text of `events/<system>/<name>/format`.
    pub fn parse(system: &str, text: &str) -> Option<EventFormat> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        let mut print_fmt = String::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(n) = line.strip_prefix("name:") {
                name = Some(n.trim().to_string());
            } else if let Some(i) = line.strip_prefix("ID:") {
                id = i.trim().parse().ok();
            } else if let Some(p) = line.strip_prefix("print fmt:") {
                print_fmt = p.trim().to_string();
            } else if line.starts_with("field:") {
                fields.push(parse_field(line)?);
            }
        }
        Some(EventFormat {
            system: system.to_string(),
            name: name?,
            id: id?,
            fields,
            print_fmt,
        })
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The integer value of field `name` in `payload` (sign-extended when signed); `None`
    /// when the field is missing, wider than 8 bytes or outside the payload.
    pub fn value(&self, name: &str, payload: &[u8]) -> Option<u64> {
        let f = self.field(name)?;
        let size = if f.array.is_some() { 8 } else { f.size };
        read_int(payload, f.offset, size, f.signed)
    }

    /// Element `i` of the array field `name` (`args[6]`).
    pub fn element(&self, name: &str, i: usize, payload: &[u8]) -> Option<u64> {
        let f = self.field(name)?;
        let n = f.array?;
        let each = f.size / n.max(1);
        (i < n).then_some(())?;
        read_int(payload, f.offset + i * each, each, f.signed)
    }
}

/// `field:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;`
fn parse_field(line: &str) -> Option<Field> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.split(';').map(str::trim) {
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(o) = part.strip_prefix("offset:") {
            offset = o.trim().parse().ok();
        } else if let Some(s) = part.strip_prefix("size:") {
            size = s.trim().parse().ok();
        } else if let Some(s) = part.strip_prefix("signed:") {
            signed = s.trim() == "1";
        }
    }
    let decl = decl?;
    // The name is the last word, with an array suffix: `char comm[16]`, `char[] name`.
    let (ty, word) = decl.rsplit_once(' ').unwrap_or(("", decl));
    let (name, array) = match word.split_once('[') {
        Some((n, rest)) => (n, rest.trim_end_matches(']').parse().ok()),
        None => (word, None),
    };
    Some(Field {
        name: name.to_string(),
        ty: ty.trim().to_string(),
        offset: offset?,
        size: size?,
        signed,
        array,
    })
}

fn read_int(b: &[u8], off: usize, size: usize, signed: bool) -> Option<u64> {
    let bytes = b.get(off..off.checked_add(size)?)?;
    let mut raw = [0u8; 8];
    raw.get_mut(..size)?.copy_from_slice(bytes);
    let v = u64::from_le_bytes(raw);
    Some(if signed && size < 8 {
        let shift = 64 - 8 * size as u32;
        (((v << shift) as i64) >> shift) as u64
    } else {
        v
    })
}

/// The `kernel_header` file: sub-buffer size, long size, byte order and the tracefs texts
/// (`events/header_page`, then each recorded event's `format`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelHeader {
    pub page_size: usize,
    pub long_size: usize,
    pub big_endian: bool,
    /// (path relative to tracefs, content), in file order.
    pub files: Vec<(String, String)>,
}

impl KernelHeader {
    /// Parses `kernel_header`.
    pub fn parse(bytes: &[u8]) -> Result<KernelHeader, String> {
        let mut h = KernelHeader {
            page_size: 0,
            long_size: 8,
            big_endian: false,
            files: Vec::new(),
        };
        let mut rest = bytes;
        while !rest.is_empty() {
            let nl = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            let line = String::from_utf8_lossy(&rest[..nl]).into_owned();
            rest = rest.get(nl + 1..).unwrap_or(&[]);
            let (key, value) = line
                .split_once(": ")
                .ok_or_else(|| format!("bad kernel_header line: {line}"))?;
            let number = |v: &str| {
                v.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("bad kernel_header line: {line}"))
            };
            match key {
                "PAGE_SIZE" => h.page_size = number(value)?,
                "LONG_SIZE" => h.long_size = number(value)?,
                "ENDIAN" => h.big_endian = value.trim() == "BE",
                "TRACEFS" => {
                    let (path, len) = value
                        .rsplit_once(": ")
                        .ok_or_else(|| format!("bad kernel_header line: {line}"))?;
                    let len = number(len)?;
                    let body = rest
                        .get(..len)
                        .ok_or_else(|| format!("kernel_header: {path} is truncated"))?;
                    h.files
                        .push((path.to_string(), String::from_utf8_lossy(body).into_owned()));
                    rest = &rest[len..];
                }
                _ => return Err(format!("bad kernel_header line: {line}")),
            }
        }
        if h.page_size < PAGE_HEADER + 8 || !h.page_size.is_power_of_two() {
            return Err(format!("kernel_header: bad PAGE_SIZE {}", h.page_size));
        }
        Ok(h)
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut s = String::new();
        let _ = writeln!(s, "PAGE_SIZE: {}", self.page_size);
        let _ = writeln!(s, "LONG_SIZE: {}", self.long_size);
        let _ = writeln!(s, "ENDIAN: {}", if self.big_endian { "BE" } else { "LE" });
        for (path, body) in &self.files {
            let _ = writeln!(s, "TRACEFS: {path}: {}", body.len());
            s.push_str(body);
        }
        s.into_bytes()
    }

    /// The event formats embedded (`events/<system>/<name>/format`).
    pub fn formats(&self) -> Vec<EventFormat> {
        self.files
            .iter()
            .filter_map(|(path, body)| {
                let mut parts = path.split('/');
                match (parts.next(), parts.next(), parts.next(), parts.next()) {
                    (Some("events"), Some(system), Some(_), Some("format")) => {
                        EventFormat::parse(system, body)
                    }
                    _ => None,
                }
            })
            .collect()
    }
}

/// Events lost before a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// The kernel said so without a count.
    Unknown,
    Count(u64),
}

impl Lost {
    /// The events it stands for (a mark without a count counts one).
    pub fn events(self) -> u64 {
        match self {
            Lost::Count(n) => n,
            Lost::Unknown => 1,
        }
    }
}

/// One event of a page: its time and its payload (the record its `format` describes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageEvent<'a> {
    pub time: u64,
    pub payload: &'a [u8],
}

/// What is wrong with a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageError {
    /// Shorter than its header.
    Short,
    /// The commit size runs past the page.
    Commit(usize),
    /// An event runs past the committed data, at this offset.
    Event(usize),
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageError::Short => write!(f, "kernel page shorter than its header"),
            PageError::Commit(n) => write!(f, "kernel page commits {n} bytes past its end"),
            PageError::Event(at) => write!(f, "kernel event at page offset {at} is truncated"),
        }
    }
}

/// One sub-buffer, split into its header and events.
#[derive(Debug, Clone)]
pub struct Page<'a> {
    /// Time of the page start.
    pub time: u64,
    /// Events lost before this page.
    pub lost: Option<Lost>,
    data: &'a [u8],
}

impl<'a> Page<'a> {
    /// Reads a page (64-bit kernel layout).
    pub fn parse(page: &'a [u8]) -> Result<Page<'a>, PageError> {
        let time = read_int(page, 0, 8, false).ok_or(PageError::Short)?;
        let commit = read_int(page, 8, 8, false).ok_or(PageError::Short)?;
        let len = (commit & COMMIT_MASK) as usize;
        let data = page
            .get(PAGE_HEADER..PAGE_HEADER + len)
            .ok_or(PageError::Commit(len))?;
        let lost = if commit & MISSED_EVENTS == 0 {
            None
        } else if commit & MISSED_STORED != 0 {
            Some(read_int(page, PAGE_HEADER + len, 8, false).map_or(Lost::Unknown, Lost::Count))
        } else {
            Some(Lost::Unknown)
        };
        Ok(Page { time, lost, data })
    }

    /// The page's events, in order.
    pub fn events(&self) -> PageEvents<'a> {
        PageEvents {
            data: self.data,
            at: 0,
            time: self.time,
        }
    }
}

/// Iterator over a page's events; stops at the end of the data or at the first bad event.
#[derive(Debug, Clone)]
pub struct PageEvents<'a> {
    data: &'a [u8],
    at: usize,
    time: u64,
}

impl<'a> Iterator for PageEvents<'a> {
    type Item = Result<PageEvent<'a>, PageError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let at = self.at;
            if at + 4 > self.data.len() {
                return None;
            }
            let bad = || Some(Err(PageError::Event(PAGE_HEADER + at)));
            let head = read_int(self.data, at, 4, false)? as u32;
            let type_len = head & 0x1f;
            let delta = u64::from(head >> 5);
            let word = |k: usize| read_int(self.data, at + 4 * k, 4, false);
            match type_len {
                TYPE_PADDING => {
                    self.time = self.time.wrapping_add(delta);
                    if delta == 0 {
                        self.at = self.data.len();
                        return None;
                    }
                    // The length counts the bytes after the header, itself included.
                    let Some(len) = word(1) else { return bad() };
                    self.at = at + 4 + (len as usize).max(4);
                }
                TYPE_TIME_EXTEND => {
                    let Some(hi) = word(1) else { return bad() };
                    self.time = self.time.wrapping_add((hi << DELTA_BITS) | delta);
                    self.at = at + 8;
                }
                TYPE_TIME_STAMP => {
                    let Some(hi) = word(1) else { return bad() };
                    let stamp = (hi << DELTA_BITS) | delta;
                    self.time = (self.time & !((1 << 59) - 1)) | stamp;
                    self.at = at + 8;
                }
                0 => {
                    let Some(len) = word(1) else { return bad() };
                    let len = (len as usize).saturating_sub(4).next_multiple_of(4);
                    let Some(payload) = self.data.get(at + 8..at + 8 + len) else {
                        return bad();
                    };
                    self.time = self.time.wrapping_add(delta);
                    self.at = at + 8 + len;
                    return Some(Ok(PageEvent {
                        time: self.time,
                        payload,
                    }));
                }
                n => {
                    let len = n as usize * 4;
                    let Some(payload) = self.data.get(at + 4..at + 4 + len) else {
                        return bad();
                    };
                    self.time = self.time.wrapping_add(delta);
                    self.at = at + 4 + len;
                    return Some(Ok(PageEvent {
                        time: self.time,
                        payload,
                    }));
                }
            }
        }
    }
}

/// Writes events into pages of `page_size` bytes, as the kernel does (for synthetic kernel
/// records and for tests). Times must not decrease.
#[derive(Debug)]
pub struct PageWriter {
    page_size: usize,
    pages: Vec<u8>,
    /// The page being filled: header and data.
    cur: Vec<u8>,
    last: u64,
    lost: Option<Lost>,
}

impl PageWriter {
    pub fn new(page_size: usize) -> PageWriter {
        PageWriter {
            page_size,
            pages: Vec::new(),
            cur: Vec::new(),
            last: 0,
            lost: None,
        }
    }

    /// Marks events as lost before the next event (its page carries the mark).
    pub fn lose(&mut self, lost: Lost) {
        self.seal();
        self.lost = Some(lost);
    }

    /// Appends an event at `time` with `payload` (padded to 4 bytes).
    pub fn push(&mut self, time: u64, payload: &[u8]) {
        let len = payload.len().next_multiple_of(4);
        let body = if len <= MAX_SMALL && len > 0 {
            4 + len
        } else {
            8 + len
        };
        // Room for a time extend, the event and a stored lost count.
        if !self.cur.is_empty() && self.cur.len() + 8 + body + 8 > self.page_size {
            self.seal();
        }
        if self.cur.is_empty() {
            self.cur.extend_from_slice(&time.to_le_bytes());
            self.cur.extend_from_slice(&0u64.to_le_bytes());
            self.last = time;
        }
        let mut delta = time.saturating_sub(self.last);
        if delta > DELTA_MASK {
            let head = TYPE_TIME_EXTEND | (((delta & DELTA_MASK) as u32) << 5);
            self.cur.extend_from_slice(&head.to_le_bytes());
            self.cur
                .extend_from_slice(&((delta >> DELTA_BITS) as u32).to_le_bytes());
            delta = 0;
        }
        self.last = time;
        if len <= MAX_SMALL && len > 0 {
            let head = (len / 4) as u32 | ((delta as u32) << 5);
            self.cur.extend_from_slice(&head.to_le_bytes());
        } else {
            let head = (delta as u32) << 5;
            self.cur.extend_from_slice(&head.to_le_bytes());
            self.cur.extend_from_slice(&(len as u32 + 4).to_le_bytes());
        }
        self.cur.extend_from_slice(payload);
        self.cur.resize(self.cur.len() + len - payload.len(), 0);
    }

    /// Closes the page being filled.
    fn seal(&mut self) {
        if self.cur.is_empty() {
            return;
        }
        let len = (self.cur.len() - PAGE_HEADER) as u64;
        let mut commit = len;
        if let Some(lost) = self.lost.take() {
            commit |= MISSED_EVENTS;
            if let Lost::Count(n) = lost {
                commit |= MISSED_STORED;
                self.cur.extend_from_slice(&n.to_le_bytes());
            }
        }
        self.cur[8..16].copy_from_slice(&commit.to_le_bytes());
        self.cur.resize(self.page_size, 0);
        self.pages.append(&mut self.cur);
    }

    /// Writes the pages filled so far (each `page_size` bytes) to `out` and forgets them:
    /// called after each [`push`](Self::push), the writer holds one page however many events
    /// it is given. [`finish`](Self::finish) then gives the pages not written yet.
    pub fn write_sealed(&mut self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        if !self.pages.is_empty() {
            out.write_all(&self.pages)?;
            self.pages.clear();
        }
        Ok(())
    }

    /// The pages written (those not given to [`write_sealed`](Self::write_sealed)), each
    /// `page_size` bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.seal();
        self.pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXIT_FORMAT: &str = "name: funcgraph_exit\nID: 10\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:unsigned int depth;\toffset:16;\tsize:4;\tsigned:0;\n\
        \tfield:unsigned int overrun;\toffset:20;\tsize:4;\tsigned:0;\n\
        \tfield:unsigned long long calltime;\toffset:24;\tsize:8;\tsigned:0;\n\
        \tfield:unsigned long long rettime;\toffset:32;\tsize:8;\tsigned:0;\n\n\
        print fmt: \"<-- %ps (%u)\", (void *)REC->func, REC->depth\n";

    const ENTER_FORMAT: &str = "name: sys_enter\nID: 443\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
        \tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n\n\
        print fmt: \"NR %ld\", REC->id\n";

    #[test]
    fn formats_parse() {
        let f = EventFormat::parse("ftrace", EXIT_FORMAT).unwrap();
        assert_eq!(
            (f.name.as_str(), f.id, f.fields.len()),
            ("funcgraph_exit", 10, 9)
        );
        let depth = f.field("depth").unwrap();
        assert_eq!((depth.offset, depth.size, depth.signed), (16, 4, false));
        assert_eq!(f.field("calltime").unwrap().ty, "unsigned long long");
        let e = EventFormat::parse("raw_syscalls", ENTER_FORMAT).unwrap();
        let args = e.field("args").unwrap();
        assert_eq!((args.array, args.size), (Some(6), 48));
        let mut payload = vec![0u8; 64];
        payload[4..8].copy_from_slice(&(-5i32).to_le_bytes());
        payload[8..16].copy_from_slice(&1u64.to_le_bytes());
        payload[24..32].copy_from_slice(&77u64.to_le_bytes());
        assert_eq!(e.value("common_pid", &payload), Some(-5i64 as u64));
        assert_eq!(e.value("id", &payload), Some(1));
        assert_eq!(e.element("args", 1, &payload), Some(77));
        assert_eq!(e.element("args", 6, &payload), None);
        assert_eq!(e.value("nothere", &payload), None);
    }

    #[test]
    fn header_round_trip() {
        let h = KernelHeader {
            page_size: 4096,
            long_size: 8,
            big_endian: false,
            files: vec![
                (
                    "events/header_page".into(),
                    "\tfield: u64 timestamp;\n".into(),
                ),
                (
                    "events/ftrace/funcgraph_exit/format".into(),
                    EXIT_FORMAT.into(),
                ),
                (
                    "events/raw_syscalls/sys_enter/format".into(),
                    ENTER_FORMAT.into(),
                ),
            ],
        };
        let bytes = h.to_bytes();
        assert!(bytes.starts_with(b"PAGE_SIZE: 4096\nLONG_SIZE: 8\nENDIAN: LE\nTRACEFS: "));
        let back = KernelHeader::parse(&bytes).unwrap();
        assert_eq!(back, h);
        let formats = back.formats();
        assert_eq!(formats.len(), 2);
        assert_eq!(formats[1].system, "raw_syscalls");
        assert!(KernelHeader::parse(b"PAGE_SIZE: 100\n").is_err());
        assert!(KernelHeader::parse(b"PAGE_SIZE: 4096\nTRACEFS: x: 99\nab").is_err());
    }

    /// Every event form the kernel writes: small and long payloads, both kinds of padding,
    /// time extends, absolute stamps; times as the kernel adds them up.
    #[test]
    fn page_events_of_every_form() {
        let mut data = Vec::new();
        let word = |d: &mut Vec<u8>, v: u32| d.extend_from_slice(&v.to_le_bytes());
        // 1: small event, delta 5, 8 bytes.
        word(&mut data, 2 | (5 << 5));
        data.extend_from_slice(&[1; 8]);
        // 2: padding with a length (a discarded event), delta 3: the length counts itself.
        word(&mut data, 29 | (3 << 5));
        word(&mut data, 8);
        data.extend_from_slice(&[0xee; 4]);
        // 3: time extend of (2 << 27) + 1, then a long event (120 bytes) with delta 2.
        word(&mut data, 30 | (1 << 5));
        word(&mut data, 2);
        word(&mut data, 2 << 5);
        word(&mut data, 124);
        data.extend_from_slice(&[2; 120]);
        // 4: absolute stamp 1_000_000_000_000, then a small event with delta 0.
        let stamp: u64 = 1_000_000_000_000;
        word(&mut data, 31 | (((stamp & DELTA_MASK) as u32) << 5));
        word(&mut data, (stamp >> 27) as u32);
        word(&mut data, 1);
        data.extend_from_slice(&[3; 4]);
        // 5: padding to the end.
        word(&mut data, 29);
        let mut page = Vec::new();
        page.extend_from_slice(&1000u64.to_le_bytes());
        page.extend_from_slice(&(data.len() as u64).to_le_bytes());
        page.extend_from_slice(&data);
        page.resize(4096, 0);
        let p = Page::parse(&page).unwrap();
        assert_eq!(p.lost, None);
        let events: Vec<(u64, usize, u8)> = p
            .events()
            .map(|e| e.unwrap())
            .map(|e| (e.time, e.payload.len(), e.payload[0]))
            .collect();
        assert_eq!(
            events,
            [
                (1005, 8, 1),
                (1005 + 3 + (2 << 27) + 1 + 2, 120, 2),
                (stamp, 4, 3)
            ]
        );
    }

    #[test]
    fn lost_events_and_bad_pages() {
        let mut w = PageWriter::new(4096);
        w.push(10, &[1; 8]);
        w.lose(Lost::Count(674));
        w.push(20, &[2; 8]);
        w.lose(Lost::Unknown);
        w.push(30, &[3; 8]);
        let pages = w.finish();
        assert_eq!(pages.len(), 3 * 4096);
        let lost: Vec<Option<Lost>> = pages
            .chunks(4096)
            .map(|p| Page::parse(p).unwrap().lost)
            .collect();
        assert_eq!(lost, [None, Some(Lost::Count(674)), Some(Lost::Unknown)]);
        assert_eq!(Page::parse(&[0; 8]).unwrap_err(), PageError::Short);
        let mut bad = vec![0u8; 64];
        bad[8] = 200;
        assert_eq!(Page::parse(&bad).unwrap_err(), PageError::Commit(200));
        // An event whose payload runs past the data.
        let mut cut = vec![0u8; 64];
        cut[8] = 8;
        cut[16..20].copy_from_slice(&(5u32 | (1 << 5)).to_le_bytes());
        let p = Page::parse(&cut).unwrap();
        assert_eq!(p.events().next(), Some(Err(PageError::Event(16))));
    }

    /// Pages written by [`PageWriter`] read back event for event, over several pages of an
    /// 8 KiB sub-buffer, with deltas that need time extends.
    #[test]
    fn writer_round_trip() {
        let mut w = PageWriter::new(8192);
        let mut want = Vec::new();
        let mut t = 5_000_000_000u64;
        for i in 0..3000u32 {
            t += u64::from(i % 7) * 40_000_000 + 13;
            let len = if i % 11 == 0 {
                200
            } else {
                4 + 4 * (i as usize % 9)
            };
            let payload: Vec<u8> = (0..len).map(|k| (i as usize + k) as u8).collect();
            w.push(t, &payload);
            want.push((t, payload));
        }
        let pages = w.finish();
        assert_eq!(pages.len() % 8192, 0);
        let mut got = Vec::new();
        for p in pages.chunks(8192) {
            for e in Page::parse(p).unwrap().events() {
                let e = e.unwrap();
                got.push((e.time, e.payload.to_vec()));
            }
        }
        assert_eq!(got.len(), want.len());
        assert!(got == want);
    }

    /// A writer whose full pages are written out after each event holds at most one page
    /// and writes the same bytes as one that keeps them all, a lost mark on its first page.
    #[test]
    fn sealed_pages_written_as_filled() {
        let (mut kept, mut streamed) = (PageWriter::new(4096), PageWriter::new(4096));
        kept.lose(Lost::Count(9));
        streamed.lose(Lost::Count(9));
        let mut out = Vec::new();
        for i in 0..2000u64 {
            let payload = vec![i as u8; 24 + 16 * (i as usize % 2)];
            kept.push(i * 1000, &payload);
            streamed.push(i * 1000, &payload);
            streamed.write_sealed(&mut out).unwrap();
            assert!(streamed.pages.is_empty() && streamed.cur.len() <= 4096);
        }
        assert!(out.len() >= 10 * 4096);
        out.extend_from_slice(&streamed.finish());
        assert!(out == kept.finish());
    }
}
