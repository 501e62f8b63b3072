//! A protobuf list decoded as its bytes arrive: each object is handed over as soon as its
//! bytes are in, so a whole list (a watch-cache answer of a million objects) is never held
//! at once, neither as bytes nor decoded.
//!
//! The body is `k8s\0`, then a `runtime.Unknown` whose field 1 (`typeMeta`) names the kind and
//! whose field 2 (`raw`) is the `PartialObjectMetadataList`: field 1 its `ListMeta`, field 2
//! each item. Go's encoder writes fields in tag order, so the kind comes before the list; a
//! body that puts `raw` first is refused rather than read blind.

use bytes::{Buf, Bytes, BytesMut};
use prost::Message;
use prost::encoding::{WireType, decode_varint};

use crate::envelope::MAGIC;
use crate::messages::{LeanObject, ListMeta, TypeMeta};
use crate::{ListPage, MAX_FRAME_BYTES, WireError, lean_meta};

/// Where the decoder is in the body.
#[derive(Debug)]
enum Position {
    /// Before the magic.
    Start,
    /// Among the envelope's fields.
    Envelope,
    /// Inside the envelope's `raw` (the list), with this many of its bytes still to come.
    List { remaining: usize },
}

/// Decodes one protobuf `PartialObjectMetadataList` body as it arrives (see the module docs).
#[derive(Debug)]
pub struct ListStreamDecoder {
    buffered: BytesMut,
    position: Position,
    /// The envelope's kind, once read.
    kind: Option<String>,
    /// The list's metadata, once read.
    list_meta: Option<ListMeta>,
    /// Whether the envelope's `raw` (the list) was met.
    raw_seen: bool,
}

impl Default for ListStreamDecoder {
    fn default() -> Self {
        ListStreamDecoder::new()
    }
}

/// One field's key and, for a length-delimited field, its length, read from the front of
/// `bytes` without consuming them: `None` until they are all there.
fn field_header(bytes: &[u8]) -> Result<Option<(u32, WireType, usize, u64)>, WireError> {
    let mut cursor = bytes;
    let Some(key) = varint(&mut cursor)? else { return Ok(None) };
    let wire_type = WireType::try_from(key & 7)
        .map_err(|_| WireError::Malformed(format!("wire type {} in a list", key & 7)))?;
    let tag = u32::try_from(key >> 3).map_err(|_| WireError::Malformed("a field tag".into()))?;
    if tag == 0 {
        return Err(WireError::Malformed("field 0 in a list".into()));
    }
    let value = match wire_type {
        WireType::LengthDelimited | WireType::Varint => match varint(&mut cursor)? {
            Some(v) => v,
            None => return Ok(None),
        },
        WireType::SixtyFourBit => 8,
        WireType::ThirtyTwoBit => 4,
        WireType::StartGroup | WireType::EndGroup => {
            return Err(WireError::Malformed("a group in a list".into()));
        }
    };
    Ok(Some((tag, wire_type, bytes.len() - cursor.len(), value)))
}

/// A varint from the front of `cursor` (advanced past it), `None` if it is not all there.
fn varint(cursor: &mut &[u8]) -> Result<Option<u64>, WireError> {
    let complete = cursor.iter().take(10).position(|b| b & 0x80 == 0).is_some();
    if !complete {
        return if cursor.len() >= 10 {
            Err(WireError::Malformed("a varint over 10 bytes".into()))
        } else {
            Ok(None)
        };
    }
    Ok(Some(decode_varint(cursor)?))
}

impl ListStreamDecoder {
    /// A decoder at the start of a body.
    pub fn new() -> ListStreamDecoder {
        ListStreamDecoder {
            buffered: BytesMut::new(),
            position: Position::Start,
            kind: None,
            list_meta: None,
            raw_seen: false,
        }
    }

    /// Appends the next chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buffered.extend_from_slice(chunk);
    }

    /// The next object of the list whose bytes are all in, `Ok(None)` until more arrive.
    pub fn next_item(&mut self) -> Result<Option<kube_gc_engine::ObjectMeta>, WireError> {
        loop {
            match self.position {
                Position::Start => {
                    if self.buffered.len() < MAGIC.len() {
                        return Ok(None);
                    }
                    if self.buffered[..MAGIC.len()] != MAGIC {
                        return Err(WireError::Malformed(
                            "the body does not start with k8s\\0".into(),
                        ));
                    }
                    self.buffered.advance(MAGIC.len());
                    self.position = Position::Envelope;
                }
                Position::Envelope => {
                    let Some((tag, wire_type, header, value)) = field_header(&self.buffered)?
                    else {
                        return Ok(None);
                    };
                    if matches!(tag, 1 | 2) && wire_type != WireType::LengthDelimited {
                        // gogo and prost refuse a known field of the wrong type; skipped, it
                        // could hide the list.
                        return Err(WireError::Malformed(format!(
                            "envelope field {tag} of wire type {wire_type:?}"
                        )));
                    }
                    if tag == 2 {
                        // Go keeps the last `raw`: a second list would be streamed after the
                        // first. No server sends two.
                        if std::mem::replace(&mut self.raw_seen, true) {
                            return Err(WireError::Malformed("an envelope with two lists".into()));
                        }
                        match self.kind.as_deref() {
                            Some("PartialObjectMetadataList") => {}
                            found => {
                                return Err(WireError::UnexpectedKind {
                                    found: found.unwrap_or("(none before the list)").to_owned(),
                                    expected: "PartialObjectMetadataList",
                                });
                            }
                        }
                        self.buffered.advance(header);
                        self.position = Position::List { remaining: to_len(value)? };
                        continue;
                    }
                    let Some(field) = self.take_field(wire_type, header, value)? else {
                        return Ok(None);
                    };
                    match (tag, wire_type) {
                        (1, WireType::LengthDelimited) => {
                            self.kind = Some(TypeMeta::decode(field)?.kind.unwrap_or_default());
                        }
                        // The content encoding, empty from the server: refused otherwise, as
                        // `open_envelope` refuses it. It comes after `raw`, so this error ends
                        // a list already handed over; a compressed `raw` would not have parsed
                        // as one, and the caller takes a list as whole only from `finish`.
                        (3, WireType::LengthDelimited) if !field.is_empty() => {
                            return Err(WireError::Malformed(format!(
                                "unsupported content encoding {:?}",
                                String::from_utf8_lossy(&field)
                            )));
                        }
                        // Field 4 (the content type) is empty from the server too.
                        _ => {}
                    }
                }
                Position::List { remaining: 0 } => self.position = Position::Envelope,
                Position::List { remaining } => {
                    let Some((tag, wire_type, header, value)) = field_header(&self.buffered)?
                    else {
                        return Ok(None);
                    };
                    let Some(field) = self.take_field(wire_type, header, value)? else {
                        return Ok(None);
                    };
                    let taken =
                        header + if wire_type == WireType::Varint { 0 } else { field.len() };
                    let remaining = remaining.checked_sub(taken).ok_or_else(|| {
                        WireError::Malformed("a field longer than the list holding it".into())
                    })?;
                    self.position = Position::List { remaining };
                    match (tag, wire_type) {
                        // Repeated, an embedded message is merged, as gogo and prost merge it
                        // (a second ListMeta without `continue` keeps the first's).
                        (1, WireType::LengthDelimited) => {
                            self.list_meta.get_or_insert_default().merge(field)?
                        }
                        (2, WireType::LengthDelimited) => {
                            return Ok(Some(lean_meta(LeanObject::decode(field)?.metadata)));
                        }
                        (1 | 2, _) => {
                            // A known field of the wrong type: skipped, a damaged item would
                            // vanish from a list still taken as whole.
                            return Err(WireError::Malformed(format!(
                                "list field {tag} of wire type {wire_type:?}"
                            )));
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    /// Removes the field whose header is at the front (`header` bytes) and returns its value
    /// bytes (empty for a varint, already read), `None` until they are all in.
    fn take_field(
        &mut self,
        wire_type: WireType,
        header: usize,
        value: u64,
    ) -> Result<Option<Bytes>, WireError> {
        let len = match wire_type {
            WireType::Varint => 0,
            _ => to_len(value)?,
        };
        if len > MAX_FRAME_BYTES {
            // One object's metadata, or the list's: far smaller from any real server.
            return Err(WireError::Malformed(format!("a field of {len} bytes in a list")));
        }
        if self.buffered.len() < header + len {
            self.buffered.reserve(header + len - self.buffered.len());
            return Ok(None);
        }
        self.buffered.advance(header);
        Ok(Some(self.buffered.split_to(len).freeze()))
    }

    /// The list's version and continue token once the whole body has been pushed and every
    /// item taken; an error if the body ended early.
    pub fn finish(self) -> Result<ListPage, WireError> {
        let complete = matches!(self.position, Position::Envelope)
            && self.buffered.is_empty()
            && self.raw_seen;
        if !complete {
            return Err(WireError::Malformed("the list body ended early".into()));
        }
        if self.kind.as_deref() != Some("PartialObjectMetadataList") {
            return Err(WireError::UnexpectedKind {
                found: self.kind.unwrap_or_default(),
                expected: "PartialObjectMetadataList",
            });
        }
        let meta = self.list_meta.unwrap_or_default();
        Ok(ListPage {
            resource_version: meta.resource_version.unwrap_or_default(),
            continue_token: meta.r#continue.filter(|c| !c.is_empty()),
            items: Vec::new(),
        })
    }
}

/// A field length as a `usize`.
fn to_len(value: u64) -> Result<usize, WireError> {
    usize::try_from(value).map_err(|_| WireError::Malformed(format!("a length of {value}")))
}
