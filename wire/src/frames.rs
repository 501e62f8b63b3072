//! The framing of a protobuf watch stream: each frame a 4-byte big-endian length, then the
//! frame.
//!
//! Upstream: `k8s.io/apimachinery/pkg/util/framer/framer.go` (`lengthDelimitedFrameWriter`,
//! `lengthDelimitedFrameReader`).

use bytes::{Buf, Bytes, BytesMut};

use crate::WireError;

/// The largest frame a [`FrameReader`] accepts. A watch event carries one object's metadata;
/// the API server refuses objects over 1.5 MiB (etcd's request limit), so a larger length can
/// only be a corrupt or foreign stream, and is refused before anything is buffered for it.
pub const MAX_FRAME_BYTES: usize = 16 << 20;

/// `payload` as one frame.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a frame under 4 GiB");
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Cuts a watch stream, given in chunks as they arrive, into frames.
#[derive(Debug, Default)]
pub struct FrameReader {
    buffered: BytesMut,
}

impl FrameReader {
    /// An empty reader.
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// Appends the next chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buffered.extend_from_slice(chunk);
    }

    /// The next complete frame, `Ok(None)` if the bytes buffered do not hold one yet.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, WireError> {
        let Some(header) = self.buffered.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(header.try_into().expect("four bytes")) as usize;
        if len > MAX_FRAME_BYTES {
            return Err(WireError::Malformed(format!(
                "a watch frame of {len} bytes (at most {MAX_FRAME_BYTES})"
            )));
        }
        if self.buffered.len() < 4 + len {
            self.buffered.reserve(4 + len - self.buffered.len());
            return Ok(None);
        }
        self.buffered.advance(4);
        Ok(Some(self.buffered.split_to(len).freeze()))
    }

    /// Bytes buffered that do not make a whole frame yet (a stream that ends with some is
    /// truncated).
    pub fn pending(&self) -> usize {
        self.buffered.len()
    }
}
