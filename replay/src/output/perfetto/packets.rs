//! The output of `dump --perfetto`: packets encoded by prost in place into one buffer that is
//! written out when full, so nothing is allocated per packet.
//!
//! Most packets are a slice begin or end that differs from an earlier one of the same function
//! only in its time and sequence: their other fields are encoded once ([`template`]) and
//! copied, the two fields that change encoded around them ([`Packets::put_parts`]).

use super::proto::{TracePacket, TrackEvent, SEQ_NEEDS_INCREMENTAL_STATE, TRACE_PACKET_FIELD};
use prost::bytes::BufMut;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, uint32, WireType};
use prost::Message;
use std::io::{self, Write};

/// Size of the buffer the packets are encoded into (written out when full).
pub(super) const BUFFER: usize = 1 << 20;

/// The encoded packets not written yet: one buffer, encoded into in place.
pub(super) struct Packets<'w> {
    pub out: &'w mut dyn Write,
    pub buf: Vec<u8>,
    /// End of the packets in `buf`.
    pub len: usize,
}

impl Packets<'_> {
    /// Appends `pkt` as one `Trace.packet` field; writes the buffer out when it is full.
    pub fn put(&mut self, pkt: &TracePacket) -> io::Result<()> {
        loop {
            let mut room = &mut self.buf[self.len..];
            let before = room.len();
            // The key takes one byte; the packet's length, what encode_length_delimited checks.
            if before > 0 {
                encode_key(TRACE_PACKET_FIELD, WireType::LengthDelimited, &mut room);
                if pkt.encode_length_delimited(&mut room).is_ok() {
                    self.len += before - room.len();
                    return Ok(());
                }
            }
            if self.len > 0 {
                self.flush()?;
            } else {
                // A packet larger than the buffer (a long argument text).
                let need = pkt.encoded_len() + 16;
                self.buf.resize(need.max(self.buf.len() * 2), 0);
            }
        }
    }

    /// Appends the packet whose fields are the encoded `seq` (its `trusted_packet_sequence_id`,
    /// see [`seq_field`]), `body` and `time` (the fast path of the track events that differ
    /// only in time: `body` was encoded by prost once per function).
    #[inline]
    pub fn put_parts(&mut self, seq: &[u8], time: u64, body: &[u8]) -> io::Result<()> {
        let len = seq.len() + body.len() + 1 + encoded_len_varint(time);
        let need = 1 + encoded_len_varint(len as u64) + len;
        if self.buf.len() - self.len < need {
            self.flush()?;
            if self.buf.len() < need {
                self.buf.resize(need, 0);
            }
        }
        let mut room = &mut self.buf[self.len..];
        let before = room.len();
        encode_key(TRACE_PACKET_FIELD, WireType::LengthDelimited, &mut room);
        encode_varint(len as u64, &mut room);
        room.put_slice(seq);
        room.put_slice(body);
        encode_key(TIMESTAMP_FIELD, WireType::Varint, &mut room);
        encode_varint(time, &mut room);
        self.len += before - room.len();
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buf[..self.len])?;
        self.len = 0;
        Ok(())
    }
}

/// `TracePacket.timestamp`.
const TIMESTAMP_FIELD: u32 = 8;

/// The encoded `trusted_packet_sequence_id` field of sequence `seq`.
pub(super) fn seq_field(seq: u32) -> Vec<u8> {
    let mut f = Vec::new();
    uint32::encode(10, &seq, &mut f);
    f
}

/// The fields of a track event packet but its time and sequence: the flags and the event.
pub(super) fn template(ev: &TrackEvent) -> Vec<u8> {
    let mut t = Vec::new();
    uint32::encode(13, &SEQ_NEEDS_INCREMENTAL_STATE, &mut t);
    prost::encoding::message::encode(11, ev, &mut t);
    t
}

#[cfg(test)]
mod tests {
    use super::super::proto::*;
    use super::*;

    /// The packets written, decoded as a `Trace`.
    fn decode(bytes: &[u8]) -> Vec<TracePacket> {
        Trace::decode(bytes).unwrap().packet
    }

    #[test]
    fn parts_encode_as_the_whole_packet() {
        let ev = TrackEvent {
            r#type: Some(TYPE_SLICE_BEGIN),
            name_iid: Some(42),
            category_iids: vec![1],
            ..Default::default()
        };
        let whole = TracePacket {
            timestamp: Some(123_456_789_012_345),
            trusted_packet_sequence_id: Some(7),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            track_event: Some(ev.clone()),
            ..Default::default()
        };
        let mut out = Vec::new();
        let mut p = Packets {
            out: &mut out,
            // Small: the second packet does not fit and the buffer is written out first.
            buf: vec![0; 40],
            len: 0,
        };
        p.put(&whole).unwrap();
        p.put_parts(&seq_field(7), 123_456_789_012_345, &template(&ev))
            .unwrap();
        p.flush().unwrap();
        let got = decode(&out);
        assert_eq!(got, vec![whole.clone(), whole]);
    }

    #[test]
    fn a_packet_larger_than_the_buffer_grows_it() {
        let mut ev = TrackEvent::default();
        ev.debug_annotations.push(DebugAnnotation {
            name_iid: Some(1),
            string_value: Some("x".repeat(100)),
        });
        let pkt = TracePacket {
            track_event: Some(ev),
            ..Default::default()
        };
        let mut out = Vec::new();
        let mut p = Packets {
            out: &mut out,
            buf: vec![0; 16],
            len: 0,
        };
        p.put(&pkt).unwrap();
        p.flush().unwrap();
        assert_eq!(decode(&out), vec![pkt]);
    }

    /// Flow ids are fixed64 fields 47 and 48, one field per id (proto2, not packed), as
    /// the trace processor reads them.
    #[test]
    fn flow_ids_on_the_wire() {
        let ev = TrackEvent {
            flow_ids: vec![5, 6],
            terminating_flow_ids: vec![9],
            ..Default::default()
        };
        let bytes = ev.encode_to_vec();
        let mut want = Vec::new();
        for (tag, id) in [(47u64, 5u64), (47, 6), (48, 9)] {
            encode_varint(tag << 3 | 1, &mut want);
            want.extend_from_slice(&id.to_le_bytes());
        }
        assert_eq!(bytes, want);
    }
}
