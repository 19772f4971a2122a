//! The wire format of `record --host` and `recv`, the same as uftrace 0.13's, so that either
//! tool can send to the other.
//!
//! A session is one TCP connection carrying a sequence of messages. Each message is an 8-byte
//! header, every field big-endian:
//!
//! | offset | size | field                         |
//! |--------|------|-------------------------------|
//! | 0      | 2    | magic `0xface`                |
//! | 2      | 2    | type (below)                  |
//! | 4      | 4    | length of the payload         |
//!
//! followed by the payload. The types, in the order a sender uses them:
//!
//! | type | name          | payload                                                    | file          |
//! |------|---------------|------------------------------------------------------------|---------------|
//! | 101  | start         | the data directory's name, as the sender's `-d` gave it     | (the directory) |
//! | 102  | data          | tid (u32, big-endian), then records of `<tid>.dat`          | `<tid>.dat`   |
//! | 103  | kernel data   | cpu (u32, big-endian), then bytes of `kernel-cpu<N>.dat`    | appended      |
//! | 104  | perf data     | cpu (u32, big-endian), then bytes of `perf-cpu<N>.dat`      | appended      |
//! | 105  | info          | the whole `info` file                                       | `info`        |
//! | 106  | metadata      | name length (u32, big-endian), the name, then its bytes     | appended      |
//! | 107  | end           | empty                                                       |               |
//!
//! Every payload is appended to its file, so a file may come in several messages. The info
//! message is the one payload that is not sent as the file holds it: the numbers of the
//! 40-byte header of `info` (data-format.md §2) travel big-endian ([`info_to_wire`]). Nothing
//! is ever sent back to the sender. uftrace's receiver makes an empty `default.opts` when a
//! session starts.

use std::io::{Read, Write};

/// The first two bytes of every message.
pub const MAGIC: u16 = 0xface;
/// Size of a message header.
pub const HEADER_SIZE: usize = 8;
/// The port `record --host` and `recv` use when `--port` is not given.
pub const DEFAULT_PORT: u16 = 8090;
/// Longest payload a receiver accepts (a `.sym` file of a large program is tens of MB).
pub const MAX_PAYLOAD: u32 = 1 << 30;
/// Most bytes of a payload reserved before they arrive.
const PREALLOCATED: usize = 4 << 20;
/// Longest directory name in a start message.
pub const MAX_DIR_NAME: usize = 4096;

/// Message types.
pub mod kind {
    pub const START: u16 = 101;
    pub const DATA: u16 = 102;
    pub const KERNEL_DATA: u16 = 103;
    pub const PERF_DATA: u16 = 104;
    pub const INFO: u16 = 105;
    pub const METADATA: u16 = 106;
    pub const END: u16 = 107;
}

/// One decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Start { dir: Vec<u8> },
    Data { tid: u32, bytes: Vec<u8> },
    KernelData { cpu: u32, bytes: Vec<u8> },
    PerfData { cpu: u32, bytes: Vec<u8> },
    Info { bytes: Vec<u8> },
    Metadata { name: Vec<u8>, bytes: Vec<u8> },
    End,
}

/// What is wrong with a message a peer sent.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("bad message magic {0:#06x}")]
    Magic(u16),
    #[error("unknown message type {0}")]
    Kind(u16),
    #[error("message of type {kind} too long ({len} bytes)")]
    TooLong { kind: u16, len: u32 },
    #[error("message of type {kind} too short ({len} bytes)")]
    TooShort { kind: u16, len: u32 },
    #[error("the connection was closed in the middle of a message")]
    Truncated,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The header of a message of `kind` with a payload of `len` bytes.
pub fn header(kind: u16, len: u32) -> [u8; HEADER_SIZE] {
    let mut h = [0u8; HEADER_SIZE];
    h[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    h[2..4].copy_from_slice(&kind.to_be_bytes());
    h[4..8].copy_from_slice(&len.to_be_bytes());
    h
}

/// Writes one message of `kind` whose payload is `prefix` then `body`.
pub fn write_message(
    out: &mut impl Write,
    kind: u16,
    prefix: &[u8],
    body: &[u8],
) -> std::io::Result<()> {
    let len = u32::try_from(prefix.len() + body.len())
        .map_err(|_| std::io::Error::other("message too long"))?;
    out.write_all(&header(kind, len))?;
    out.write_all(prefix)?;
    out.write_all(body)
}

/// Reads the next message; `Ok(None)` when the peer closed the connection between two
/// messages. The payload is read as it arrives (a header claiming a large length does not
/// allocate it up front).
pub fn read_message(input: &mut impl Read) -> Result<Option<Message>, ProtoError> {
    let mut head = [0u8; HEADER_SIZE];
    match read_full(input, &mut head)? {
        0 => return Ok(None),
        HEADER_SIZE => {}
        _ => return Err(ProtoError::Truncated),
    }
    let magic = u16::from_be_bytes([head[0], head[1]]);
    let kind = u16::from_be_bytes([head[2], head[3]]);
    let len = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
    if magic != MAGIC {
        return Err(ProtoError::Magic(magic));
    }
    if !(kind::START..=kind::END).contains(&kind) {
        return Err(ProtoError::Kind(kind));
    }
    let max = match kind {
        kind::START => MAX_DIR_NAME as u32,
        kind::END => 0,
        _ => MAX_PAYLOAD,
    };
    if len > max {
        return Err(ProtoError::TooLong { kind, len });
    }
    // Room for what a sender usually sends at once; more grows as it arrives.
    let mut payload = Vec::with_capacity((len as usize).min(PREALLOCATED));
    let got = input.take(u64::from(len)).read_to_end(&mut payload)?;
    if got != len as usize {
        return Err(ProtoError::Truncated);
    }
    let short = || ProtoError::TooShort { kind, len };
    let split_id = |mut p: Vec<u8>| -> Result<(u32, Vec<u8>), ProtoError> {
        if p.len() < 4 {
            return Err(short());
        }
        let id = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
        p.drain(..4);
        Ok((id, p))
    };
    Ok(Some(match kind {
        kind::START => Message::Start { dir: payload },
        kind::DATA => {
            let (tid, bytes) = split_id(payload)?;
            Message::Data { tid, bytes }
        }
        kind::KERNEL_DATA => {
            let (cpu, bytes) = split_id(payload)?;
            Message::KernelData { cpu, bytes }
        }
        kind::PERF_DATA => {
            let (cpu, bytes) = split_id(payload)?;
            Message::PerfData { cpu, bytes }
        }
        kind::INFO => Message::Info { bytes: payload },
        kind::METADATA => {
            let (name_len, mut rest) = split_id(payload)?;
            let name_len = name_len as usize;
            if name_len > rest.len() {
                return Err(short());
            }
            let bytes = rest.split_off(name_len);
            Message::Metadata { name: rest, bytes }
        }
        _ => Message::End,
    }))
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The multi-byte numbers of `info`'s header: offset and size (version, header size, feature
/// mask, info mask, max stack). The bytes between are the magic, the endianness and the ELF
/// class.
const INFO_FIELDS: [(usize, usize); 5] = [(8, 4), (12, 2), (16, 8), (24, 8), (32, 2)];
/// Size of `info`'s header.
const INFO_HEADER: usize = 40;
const INFO_MAGIC: &[u8; 8] = b"Ftrace!\0";

/// `info` as this machine's file holds it (little-endian numbers) to the info message's
/// payload; a text that is not an `info` file is left as it is.
pub fn info_to_wire(mut bytes: Vec<u8>) -> Vec<u8> {
    swap_info_header(&mut bytes);
    bytes
}

/// The info message's payload back to the file (the inverse of [`info_to_wire`]).
pub fn info_from_wire(mut bytes: Vec<u8>) -> Vec<u8> {
    swap_info_header(&mut bytes);
    bytes
}

/// Reverses the byte order of the header's numbers: little-endian <-> big-endian (x86_64 is
/// little-endian).
fn swap_info_header(bytes: &mut [u8]) {
    if bytes.len() < INFO_HEADER || !bytes.starts_with(INFO_MAGIC) {
        return;
    }
    for (off, len) in INFO_FIELDS {
        bytes[off..off + len].reverse();
    }
}

/// Parses a `--port` value: 1 to 65535.
pub fn parse_port(text: Option<&str>) -> anyhow::Result<u16> {
    let Some(text) = text else {
        return Ok(DEFAULT_PORT);
    };
    match text.trim().parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => anyhow::bail!("invalid port number: {text} (1 to 65535)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(kind: u16, prefix: &[u8], body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_message(&mut out, kind, prefix, body).unwrap();
        out
    }

    #[test]
    fn round_trip() {
        // The bytes uftrace 0.13 sends for a start and a metadata message.
        let start = encoded(kind::START, b"", b"uftrace.data");
        assert_eq!(&start[..8], [0xfa, 0xce, 0, 101, 0, 0, 0, 12]);
        let mut stream = start.clone();
        stream.extend(encoded(kind::DATA, &7u32.to_be_bytes(), &[1; 16]));
        stream.extend(encoded(
            kind::METADATA,
            &8u32.to_be_bytes(),
            b"task.txtSESS\n",
        ));
        stream.extend(encoded(kind::PERF_DATA, &1u32.to_be_bytes(), b"p"));
        stream.extend(encoded(kind::END, b"", b""));
        let mut input = &stream[..];
        let mut got = Vec::new();
        while let Some(m) = read_message(&mut input).unwrap() {
            got.push(m);
        }
        assert_eq!(
            got,
            [
                Message::Start {
                    dir: b"uftrace.data".to_vec()
                },
                Message::Data {
                    tid: 7,
                    bytes: vec![1; 16]
                },
                Message::Metadata {
                    name: b"task.txt".to_vec(),
                    bytes: b"SESS\n".to_vec()
                },
                Message::PerfData {
                    cpu: 1,
                    bytes: b"p".to_vec()
                },
                Message::End,
            ]
        );
    }

    #[test]
    fn bad_messages_are_errors() {
        let err = |bytes: &[u8]| read_message(&mut &bytes[..]).unwrap_err().to_string();
        assert_eq!(err(&[0xfa, 0xce, 0]), ProtoError::Truncated.to_string());
        assert!(err(&header(0x1234, 0)).contains("unknown message type"));
        let mut bad = header(kind::END, 0);
        bad[0] = 0;
        assert!(err(&bad).contains("magic"));
        assert!(err(&header(kind::DATA, 2)).contains("middle"));
        let mut short = header(kind::DATA, 2).to_vec();
        short.extend([0, 0]);
        assert!(err(&short).contains("too short"));
        assert!(err(&header(kind::START, 5000)).contains("too long"));
        let mut meta = header(kind::METADATA, 6).to_vec();
        meta.extend([0, 0, 0, 9, b'a', b'b']);
        assert!(err(&meta).contains("too short"));
    }

    #[test]
    fn info_header_travels_big_endian() {
        // The header of an `info` file, then as uftrace 0.13 sends it.
        let mut file = b"Ftrace!\0".to_vec();
        file.extend([4, 0, 0, 0, 40, 0, 1, 2]);
        file.extend([
            0x6b, 7, 0, 0, 0, 0, 0, 0, 0xff, 0x3f, 0, 0, 0, 0, 0, 0, 0, 4,
        ]);
        file.extend([0; 6]);
        file.extend(b"exename:/x\n");
        let wire = info_to_wire(file.clone());
        assert_eq!(wire[8..16], [0, 0, 0, 4, 0, 40, 1, 2]);
        assert_eq!(wire[16..24], [0, 0, 0, 0, 0, 0, 7, 0x6b]);
        assert_eq!(wire[32..34], [4, 0]);
        assert_eq!(info_from_wire(wire), file);
        assert_eq!(info_to_wire(b"short".to_vec()), b"short");
    }

    #[test]
    fn ports() {
        assert_eq!(parse_port(None).unwrap(), 8090);
        assert_eq!(parse_port(Some("1234")).unwrap(), 1234);
        for bad in ["0", "65536", "x", "-1"] {
            assert!(parse_port(Some(bad)).is_err(), "{bad}");
        }
    }
}
