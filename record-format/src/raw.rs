//! The 16-byte record of a `<tid>.dat` file.
//!
//! ```text
//! offset 0: u64 time   nanoseconds of the record clock
//! offset 8: u64 word   type:2 | more:1 | magic:3 (=5) | depth:10 | addr:48
//! ```
//! The packing is defined on the 64-bit value (stored little-endian), not on C bit-fields.

/// Size of one record header.
pub const RECORD_SIZE: usize = 16;
/// The magic value of bits 3..5.
pub const RECORD_MAGIC: u64 = 5;
/// Address bits kept in a record.
pub const ADDR_MASK: u64 = (1 << 48) - 1;
/// Deepest depth representable in a record.
pub const MAX_DEPTH: u16 = 1023;

/// Record type, bits 0..1 of the word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    Entry = 0,
    Exit = 1,
    Lost = 2,
    Event = 3,
}

impl RecordKind {
    fn from_bits(bits: u64) -> Self {
        match bits & 3 {
            0 => RecordKind::Entry,
            1 => RecordKind::Exit,
            2 => RecordKind::Lost,
            _ => RecordKind::Event,
        }
    }
}

/// A decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord {
    pub time: u64,
    pub kind: RecordKind,
    /// A payload follows (arguments, return value or event data).
    pub more: bool,
    pub depth: u16,
    /// Code address (48 bits), event id, or lost count.
    pub addr: u64,
}

impl RawRecord {
    /// Decodes a header; `None` when the magic is wrong.
    pub fn decode(bytes: &[u8; RECORD_SIZE]) -> Option<RawRecord> {
        let (t, w) = bytes.split_at(8);
        let time = u64::from_le_bytes(t.try_into().ok()?);
        let word = u64::from_le_bytes(w.try_into().ok()?);
        if (word >> 3) & 7 != RECORD_MAGIC {
            return None;
        }
        Some(RawRecord {
            time,
            kind: RecordKind::from_bits(word),
            more: (word >> 2) & 1 == 1,
            depth: ((word >> 6) & 0x3ff) as u16,
            addr: word >> 16,
        })
    }

    /// The packed 16 bytes.
    pub fn encode(&self) -> [u8; RECORD_SIZE] {
        let word = header_word(self.kind, self.more, self.depth, self.addr);
        let mut out = [0u8; RECORD_SIZE];
        out[..8].copy_from_slice(&self.time.to_le_bytes());
        out[8..].copy_from_slice(&word.to_le_bytes());
        out
    }
}

/// The second word of a record header (offset 8): `type | more<<2 | magic<<3 | depth<<6 |
/// addr<<16`, depth clamped to [`MAX_DEPTH`] and addr truncated to 48 bits. `const` and
/// branch-free so the runtime can use it on its hot path.
#[inline]
pub const fn header_word(kind: RecordKind, more: bool, depth: u16, addr: u64) -> u64 {
    let depth = if depth > MAX_DEPTH { MAX_DEPTH } else { depth };
    (kind as u64)
        | ((more as u64) << 2)
        | (RECORD_MAGIC << 3)
        | ((depth as u64) << 6)
        | ((addr & ADDR_MASK) << 16)
}

/// Rounds `x` up to a multiple of `n` (a power of two).
pub const fn align(x: usize, n: usize) -> usize {
    (x + n - 1) & !(n - 1)
}

/// Total bytes an EVENT payload with `data_len` data bytes occupies.
pub const fn event_payload_size(data_len: usize) -> usize {
    align(2 + data_len, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_real_main_entry() {
        let bytes = [
            0x08, 0x93, 0x29, 0xa9, 0x78, 0, 0, 0, 0x28, 0x00, 0x88, 0xf2, 0xc7, 0x79, 0x66, 0x55,
        ];
        let r = RawRecord::decode(&bytes).unwrap();
        assert_eq!(r.time, 0x78a9299308);
        assert_eq!(r.kind, RecordKind::Entry);
        assert!(!r.more);
        assert_eq!(r.depth, 0);
        assert_eq!(r.addr, 0x556679c7f288);
        assert_eq!(r.encode(), bytes);
    }

    #[test]
    fn rejects_bad_magic() {
        let mut bytes = RawRecord {
            time: 1,
            kind: RecordKind::Exit,
            more: true,
            depth: 7,
            addr: 0x1234,
        }
        .encode();
        assert!(RawRecord::decode(&bytes).is_some());
        bytes[8] ^= 0x08;
        assert!(RawRecord::decode(&bytes).is_none());
    }
}
