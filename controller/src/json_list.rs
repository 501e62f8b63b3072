//! A JSON list decoded as its bytes arrive, as [`kube_gc_wire::ListStreamDecoder`] decodes a
//! protobuf one: each object is handed over as soon as its bytes are in, so a whole list (a
//! watch-cache answer with `--kube-api-content-type=application/json`) is never held at once,
//! neither as bytes nor decoded.
//!
//! serde_json parses a whole document only, so this finds the list's structure itself: the
//! top-level object's members, and in its `items` array each element's extent (brackets
//! counted outside strings, escapes skipped). Each element is then decoded by serde_json
//! ([`crate::lean_meta`]'s decoder), which rejects anything malformed the scan let through;
//! `metadata` is kept raw and decoded at the end. Other members (`kind`, `apiVersion`) are
//! skipped.

use kube_gc_engine::ObjectMeta;
use kube_gc_wire::{ListPage, MAX_FRAME_BYTES};
use serde::Deserialize;

use crate::lean_meta::LeanObject;

/// What a list's `metadata` says that the watchers read.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct JsonListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

/// Where the scan is in the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before the top-level `{`.
    Start,
    /// After `{`: a member's key, or `}`.
    FirstKey,
    /// After `,`: a member's key.
    Key,
    /// After a key: its `:`.
    Colon(Member),
    /// After `:`: the member's value.
    Value(Member),
    /// After a member's value: `,` or `}`.
    AfterMember,
    /// After `items`' `[`: an element, or `]`.
    FirstItem,
    /// After `,` in `items`: an element.
    Item,
    /// After an element: `,` or `]`.
    AfterItem,
    /// After the top-level `}`.
    Done,
}

/// The members of a list the decoder reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Member {
    Items,
    Metadata,
    Other,
}

/// Decodes one JSON `PartialObjectMetadataList` body as it arrives (see the module docs).
#[derive(Debug)]
pub struct JsonListDecoder {
    /// Bytes received and not yet consumed, from `consumed` on.
    buffered: Vec<u8>,
    consumed: usize,
    state: State,
    /// The raw `metadata` value, once read.
    metadata: Option<Vec<u8>>,
    /// Whether the `items` member was met.
    items_seen: bool,
}

impl Default for JsonListDecoder {
    fn default() -> Self {
        JsonListDecoder::new()
    }
}

impl JsonListDecoder {
    /// A decoder at the start of a body.
    pub fn new() -> JsonListDecoder {
        JsonListDecoder {
            buffered: Vec::new(),
            consumed: 0,
            state: State::Start,
            metadata: None,
            items_seen: false,
        }
    }

    /// Adds the body's next bytes.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buffered.drain(..self.consumed);
        self.consumed = 0;
        self.buffered.extend_from_slice(chunk);
    }

    /// The next object whose bytes are all in, if any; an error if the body is not a list.
    pub fn next_item(&mut self) -> Result<Option<ObjectMeta>, String> {
        loop {
            let rest = &self.buffered[self.consumed..];
            let Some(at) = rest.iter().position(|b| !b.is_ascii_whitespace()) else {
                self.consumed = self.buffered.len();
                return Ok(None);
            };
            self.consumed += at;
            let rest = &self.buffered[self.consumed..];
            let byte = rest[0];
            let (next, used) = match (self.state, byte) {
                (State::Start, b'{') => (State::FirstKey, 1),
                (State::FirstKey, b'}') | (State::AfterMember, b'}') => (State::Done, 1),
                (State::FirstKey | State::Key, b'"') => {
                    let Some(end) = value_end(rest)? else { return self.incomplete() };
                    let member = member(&rest[..end])?;
                    // Twice, Go's decoder would keep the last `items` and merge the two
                    // `metadata`: rather than guess, such a body is no list (no server sends
                    // one), and the list is tried again.
                    let again = match member {
                        Member::Items => std::mem::replace(&mut self.items_seen, true),
                        Member::Metadata => self.metadata.is_some(),
                        Member::Other => false,
                    };
                    if again {
                        return Err(format!("a list with two {member:?} members"));
                    }
                    (State::Colon(member), end)
                }
                (State::Colon(member), b':') => (State::Value(member), 1),
                (State::Value(Member::Items), b'[') => (State::FirstItem, 1),
                (State::Value(member), _) => {
                    let Some(end) = value_end(rest)? else { return self.incomplete() };
                    match member {
                        Member::Items if &rest[..end] != b"null" => {
                            return Err("a list whose items are not an array".into());
                        }
                        Member::Metadata => self.metadata = Some(rest[..end].to_vec()),
                        _ => {}
                    }
                    (State::AfterMember, end)
                }
                (State::AfterMember, b',') => (State::Key, 1),
                (State::FirstItem, b']') | (State::AfterItem, b']') => (State::AfterMember, 1),
                (State::AfterItem, b',') => (State::Item, 1),
                (State::FirstItem | State::Item, _) => {
                    let Some(end) = value_end(rest)? else { return self.incomplete() };
                    let item: LeanObject = serde_json::from_slice(&rest[..end])
                        .map_err(|e| format!("a list's item: {e}"))?;
                    self.consumed += end;
                    self.state = State::AfterItem;
                    return Ok(Some(item.into_meta()));
                }
                (state, byte) => {
                    return Err(format!("a list: {:?} where {state:?} was expected", byte as char));
                }
            };
            self.consumed += used;
            self.state = next;
        }
    }

    /// Nothing more can be read until more bytes come, unless the value waiting is too large to
    /// be an object's metadata.
    fn incomplete(&self) -> Result<Option<ObjectMeta>, String> {
        if self.buffered.len() - self.consumed > MAX_FRAME_BYTES {
            return Err(format!("a list's value over {MAX_FRAME_BYTES} bytes"));
        }
        Ok(None)
    }

    /// The list's resourceVersion and continue token, once the whole body was pushed and its
    /// items taken; an error if it ended early.
    pub fn finish(mut self) -> Result<ListPage, String> {
        if let Some(item) = self.next_item()? {
            return Err(format!("a list's item left unread: {}", item.uid));
        }
        if self.state != State::Done {
            return Err("a list cut short".into());
        }
        // A list always has `items` (`null` or an array; Go's encoder never omits it): a body
        // without is something else (a proxy's, a single object), never an empty list, which
        // a relist would take for every object deleted.
        if !self.items_seen {
            return Err("a list without items".into());
        }
        let meta: JsonListMeta = match &self.metadata {
            Some(raw) => {
                serde_json::from_slice(raw).map_err(|e| format!("a list's metadata: {e}"))?
            }
            None => JsonListMeta::default(),
        };
        Ok(ListPage {
            resource_version: meta.resource_version.unwrap_or_default(),
            continue_token: meta.continue_token.filter(|c| !c.is_empty()),
            items: Vec::new(),
        })
    }
}

/// Which member the key `quoted` (a JSON string, quotes included) names. A key with escapes
/// is read as serde_json (and Go's decoder) reads it: `"it\u0065ms"` is `items`, whose array
/// would otherwise be skipped and the list taken for an empty one.
fn member(quoted: &[u8]) -> Result<Member, String> {
    let key: std::borrow::Cow<'_, [u8]> = if quoted.contains(&b'\\') {
        let key: String =
            serde_json::from_slice(quoted).map_err(|e| format!("a list's member name: {e}"))?;
        key.into_bytes().into()
    } else {
        quoted[1..quoted.len() - 1].into()
    };
    Ok(match &*key {
        b"items" => Member::Items,
        b"metadata" => Member::Metadata,
        _ => Member::Other,
    })
}

/// The length of the JSON value at the start of `bytes` (which starts with its first byte), or
/// `None` if it is not all there yet. Only the extent is found: strings end at an unescaped
/// `"`, objects and arrays where their brackets balance outside strings, numbers and literals
/// at the next delimiter; whether the value is valid is for serde_json to say.
fn value_end(bytes: &[u8]) -> Result<Option<usize>, String> {
    match bytes[0] {
        b'"' => Ok(string_end(bytes, 1)),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = 0;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => match string_end(bytes, i + 1) {
                        Some(end) => {
                            i = end;
                            continue;
                        }
                        None => return Ok(None),
                    },
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(Some(i + 1));
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            Ok(None)
        }
        b'}' | b']' | b',' | b':' => {
            Err(format!("a list: {:?} where a value was expected", bytes[0] as char))
        }
        _ => Ok(bytes.iter().position(|b| b",}] \t\r\n".contains(b))),
    }
}

/// The end (one past the closing quote) of the string whose contents start at `from`.
fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(at) = bytes[i..].iter().position(|&b| b == b'"' || b == b'\\') {
        i += at;
        if bytes[i] == b'"' {
            return Some(i + 1);
        }
        i += 2; // an escape and the byte it escapes (a `\u` escape's digits need no care)
        if i > bytes.len() {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests;
