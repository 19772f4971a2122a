//! `dump --debug` on the perf files: the payload uftrace 0.13 keeps of each perf record,
//! as the hex lines after its `[event]` line.
//!
//! uftrace shows a context switch as two bytes (switched out, 0 or 1; then 0), a pre-empting
//! switch-out as nothing, a task name as its pid, an exec flag byte and the 16-byte name
//! (24 bytes with the padding), a fork or exit as the pid and the parent's pid.

use record_format::perf::{
    MISC_COMM_EXEC, MISC_SWITCH_OUT, MISC_SWITCH_OUT_PREEMPT, RECORD_COMM, RECORD_EXIT,
    RECORD_FORK, RECORD_SWITCH,
};

/// The payload of each event [`crate::perf::parse`] makes of `bytes`, in the same order.
pub(super) fn payloads(bytes: &[u8]) -> Vec<Vec<u8>> {
    let at = |b: &[u8], i: usize, n: usize| b.get(i..i + n).map(<[u8]>::to_vec);
    let mut out = Vec::new();
    let mut pos = 0;
    while let (Some(head), Some(size)) = (
        bytes.get(pos..pos + 8),
        bytes
            .get(pos + 6..pos + 8)
            .map(|s| u16::from_le_bytes([s[0], s[1]]) as usize),
    ) {
        let Some(rec) = bytes.get(pos..pos + size).filter(|_| size >= 8) else {
            break;
        };
        pos += size;
        if size < 16 {
            // No sample_id trailer: parse() makes no event of it.
            continue;
        }
        let ty = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let misc = u16::from_le_bytes([head[4], head[5]]);
        let payload = match ty {
            RECORD_SWITCH if misc & MISC_SWITCH_OUT_PREEMPT != 0 => Vec::new(),
            RECORD_SWITCH => vec![u8::from(misc & MISC_SWITCH_OUT != 0), 0],
            RECORD_COMM => {
                let mut p = at(rec, 8, 4).unwrap_or_default();
                p.push(u8::from(misc & MISC_COMM_EXEC != 0));
                let name = rec.get(16..size - 16).unwrap_or_default();
                let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
                let mut comm = [0u8; 16];
                let n = name.len().min(15);
                comm[..n].copy_from_slice(&name[..n]);
                p.extend_from_slice(&comm);
                p.extend_from_slice(&[0; 3]);
                p
            }
            RECORD_FORK | RECORD_EXIT => at(rec, 8, 8).unwrap_or_default(),
            _ => continue,
        };
        out.push(payload);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let size = 8 + body.len() + 16;
        let mut r = ty.to_le_bytes().to_vec();
        r.extend_from_slice(&misc.to_le_bytes());
        r.extend_from_slice(&(size as u16).to_le_bytes());
        r.extend_from_slice(body);
        r.extend_from_slice(&[0; 16]);
        r
    }

    #[test]
    fn payloads_as_uftrace_keeps_them() {
        let mut b = record(RECORD_SWITCH, 0, &[]);
        b.extend(record(RECORD_SWITCH, MISC_SWITCH_OUT, &[]));
        b.extend(record(
            RECORD_SWITCH,
            MISC_SWITCH_OUT | MISC_SWITCH_OUT_PREEMPT,
            &[],
        ));
        let mut comm = vec![0xc4, 0x41, 0, 0, 0xc4, 0x41, 0, 0];
        comm.extend_from_slice(b"sleep\0\0\0");
        b.extend(record(RECORD_COMM, MISC_COMM_EXEC, &comm));
        b.extend(record(
            RECORD_EXIT,
            0,
            &[1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0],
        ));
        let p = payloads(&b);
        assert_eq!(p.len(), 5);
        assert_eq!(p[0], [0, 0]);
        assert_eq!(p[1], [1, 0]);
        assert!(p[2].is_empty());
        assert_eq!(p[3].len(), 24);
        assert_eq!(
            &p[3][..10],
            &[0xc4, 0x41, 0, 0, 1, b's', b'l', b'e', b'e', b'p']
        );
        assert_eq!(p[4], [1, 0, 0, 0, 2, 0, 0, 0]);
    }
}
