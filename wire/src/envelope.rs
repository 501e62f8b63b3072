//! The envelope of every protobuf body: the magic `k8s\0`, then a `runtime.Unknown` holding
//! the kind and the message.
//!
//! Upstream: `k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`
//! (`protoEncodingPrefix`, `Serializer.Decode`/`doEncode`).

use bytes::Bytes;
use prost::Message;

use crate::WireError;
use crate::messages::{TypeMeta, Unknown};

/// The four bytes every protobuf body starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// Opens an enveloped body: its kind and the message's bytes (a slice of `body`, not a copy).
pub fn open_envelope(body: Bytes) -> Result<(String, Bytes), WireError> {
    if body.len() < MAGIC.len() || body[..MAGIC.len()] != MAGIC {
        return Err(WireError::Malformed("the body does not start with k8s\\0".into()));
    }
    let unknown = Unknown::decode(body.slice(MAGIC.len()..))?;
    if let Some(encoding) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        // The server never compresses the inner message; refuse rather than misread it.
        return Err(WireError::Malformed(format!("unsupported content encoding {encoding:?}")));
    }
    let kind = unknown.type_meta.and_then(|t| t.kind).unwrap_or_default();
    Ok((kind, unknown.raw.unwrap_or_default()))
}

/// `message` enveloped as a body of `kind` in `api_version`.
pub fn enveloped(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_owned()),
            kind: Some(kind.to_owned()),
        }),
        raw: Some(message.encode_to_vec().into()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = Vec::with_capacity(MAGIC.len() + unknown.encoded_len());
    out.extend_from_slice(&MAGIC);
    unknown.encode(&mut out).expect("a Vec grows as needed");
    out
}
