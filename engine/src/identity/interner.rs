//! The process-wide interners behind [`Uid`](super::Uid) (non-UUID UIDs),
//! [`ObjectType`] (apiVersion and kind strings, and their pairs) and
//! [`Namespace`](super::Namespace): append-only tables whose strings live for the process.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use parking_lot::RwLock;

use super::ObjectType;

/// An append-only string interner: `intern` returns a dense id, `resolve` the text back.
pub(super) struct Interner {
    inner: RwLock<InternerInner>,
}

struct InternerInner {
    ids: hashbrown::HashMap<&'static str, u32>,
    strings: Vec<&'static str>,
}

/// A thread's copy of the ids it already looked up, so that ingest threads intern the same few
/// namespaces without touching the shared lock.
pub(super) type LocalIds = std::cell::RefCell<LocalStrings>;

/// A table from interned text to its id, keyed by the text's bytes alone: one hash round and
/// a compare without a call, where a `HashMap<&str, _>` hashes a terminator beside the bytes
/// and compares through `memcmp`. Ingestion looks one up for nearly every event.
#[derive(Default)]
pub(super) struct LocalStrings {
    hasher: hashbrown::DefaultHashBuilder,
    ids: hashbrown::HashTable<(&'static str, u32)>,
}

/// The hash of `texts` together: each one's bytes in one round. No separator is needed: the
/// hasher mixes each write's length in, and equality is decided by the comparison anyway.
fn hash_texts<const N: usize>(hasher: &hashbrown::DefaultHashBuilder, texts: [&str; N]) -> u64 {
    let mut state = hasher.build_hasher();
    for text in texts {
        state.write(text.as_bytes());
    }
    state.finish()
}

impl LocalStrings {
    pub(super) fn get(&self, text: &str) -> Option<u32> {
        let hash = hash_texts(&self.hasher, [text]);
        self.ids.find(hash, |&(held, _)| super::text_eq(held, text)).map(|&(_, id)| id)
    }

    /// Remembers `id` for `text` (interned: it lives for the process). Called only after
    /// [`LocalStrings::get`] missed on this thread, so never twice for one text.
    pub(super) fn insert(&mut self, text: &'static str, id: u32) {
        debug_assert!(self.get(text).is_none(), "{text:?} held already");
        let hasher = &self.hasher;
        self.ids.insert_unique(hash_texts(hasher, [text]), (text, id), |&(held, _)| {
            hash_texts(hasher, [held])
        });
    }
}

impl Interner {
    pub(super) fn new(seed: &[&'static str]) -> Interner {
        let mut inner = InternerInner { ids: hashbrown::HashMap::new(), strings: Vec::new() };
        for s in seed {
            inner.ids.insert(s, inner.strings.len() as u32);
            inner.strings.push(s);
        }
        Interner { inner: RwLock::new(inner) }
    }

    /// `intern`, answered from `local` when this thread saw `text` before.
    pub(super) fn intern_cached(
        &self,
        local: &'static std::thread::LocalKey<LocalIds>,
        text: &str,
    ) -> u32 {
        if let Some(id) = local.with(|l| l.borrow().get(text)) {
            return id;
        }
        let id = self.intern(text);
        let leaked = self.resolve(id);
        local.with(|l| l.borrow_mut().insert(leaked, id));
        id
    }

    /// `intern`, unless `text` is new and `max` strings are interned already. The cap is
    /// checked under the write lock, so concurrent callers never overshoot it.
    pub(super) fn intern_bounded(&self, text: &str, max: usize) -> Option<u32> {
        if let Some(id) = self.find(text) {
            return Some(id);
        }
        self.insert(text, max)
    }

    pub(super) fn len(&self) -> usize {
        self.inner.read().strings.len()
    }

    pub(super) fn find(&self, text: &str) -> Option<u32> {
        self.inner.read().ids.get(text).copied()
    }

    pub(super) fn intern(&self, text: &str) -> u32 {
        if let Some(&id) = self.inner.read().ids.get(text) {
            return id;
        }
        self.insert(text, usize::MAX).expect("no cap")
    }

    /// Interns `text` under the write lock (re-checking whether another thread did), unless
    /// it is new and `max` strings are interned already.
    pub(super) fn insert(&self, text: &str, max: usize) -> Option<u32> {
        let mut inner = self.inner.write();
        if let Some(&id) = inner.ids.get(text) {
            return Some(id);
        }
        if inner.strings.len() >= max {
            return None;
        }
        // Interned strings live for the process (see the module docs): leaking them is what
        // lets `resolve` hand out `&'static str` without holding the lock.
        let leaked: &'static str = Box::leak(text.to_owned().into_boxed_str());
        let id = u32::try_from(inner.strings.len()).expect("more than 2^32 interned strings");
        inner.strings.push(leaked);
        inner.ids.insert(leaked, id);
        Some(id)
    }

    pub(super) fn resolve(&self, id: u32) -> &'static str {
        self.inner.read().strings.get(id as usize).copied().unwrap_or("")
    }
}

thread_local! {
    pub(super) static LOCAL_TYPES: std::cell::RefCell<LocalTypes> =
        std::cell::RefCell::default();
    pub(super) static LOCAL_NAMESPACE_IDS: LocalIds = LocalIds::default();
}

/// A thread's copy of the types it already interned, keyed by the (apiVersion, kind) text
/// itself: one probe answers what would otherwise take three (each string's id, then the
/// pair's), and ingestion interns a type for nearly every owner reference.
#[derive(Default)]
pub(super) struct LocalTypes {
    hasher: hashbrown::DefaultHashBuilder,
    types: hashbrown::HashTable<(&'static str, &'static str, ObjectType)>,
}

impl LocalTypes {
    pub(super) fn get(&self, api_version: &str, kind: &str) -> Option<ObjectType> {
        let hash = hash_texts(&self.hasher, [api_version, kind]);
        self.types
            .find(hash, |&(a, k, _)| super::text_eq(k, kind) && super::text_eq(a, api_version))
            .map(|&(_, _, ty)| ty)
    }

    /// Remembers `ty`, whose strings are `api_version` and `kind` (interned: they live for the
    /// process). Called only after [`LocalTypes::get`] missed on this thread, so never twice.
    pub(super) fn insert(&mut self, api_version: &'static str, kind: &'static str, ty: ObjectType) {
        debug_assert!(self.get(api_version, kind).is_none(), "{api_version} {kind} held already");
        let hasher = &self.hasher;
        let hash = hash_texts(hasher, [api_version, kind]);
        self.types
            .insert_unique(hash, (api_version, kind, ty), |&(a, k, _)| hash_texts(hasher, [a, k]));
    }
}

pub(super) fn uid_interner() -> &'static Interner {
    static I: OnceLock<Interner> = OnceLock::new();
    I.get_or_init(|| Interner::new(&[]))
}

pub(super) fn type_interner() -> &'static Interner {
    // apiVersion and kind strings; an `ObjectType` is the id of their pair (`type_pairs`).
    static I: OnceLock<Interner> = OnceLock::new();
    I.get_or_init(|| Interner::new(&[""]))
}

/// The interned (apiVersion, kind) pairs, their strings interned in [`type_interner`]: a
/// pair's index is its [`ObjectType`].
pub(super) struct TypePairs {
    inner: RwLock<TypePairsInner>,
}

struct TypePairsInner {
    ids: hashbrown::HashMap<(u32, u32), u32>,
    pairs: Vec<(&'static str, &'static str)>,
}

impl TypePairs {
    /// The pair of the interned strings `api_version` and `kind`, unless it is new and `max`
    /// pairs are held already.
    pub(super) fn intern(&self, api_version: u32, kind: u32, max: usize) -> Option<u32> {
        if let Some(&id) = self.inner.read().ids.get(&(api_version, kind)) {
            return Some(id);
        }
        let strings = type_interner();
        let texts = (strings.resolve(api_version), strings.resolve(kind));
        let mut inner = self.inner.write();
        if let Some(&id) = inner.ids.get(&(api_version, kind)) {
            return Some(id);
        }
        if inner.pairs.len() >= max.min(1 << ObjectType::ID_BITS) {
            return None;
        }
        let id = inner.pairs.len() as u32;
        inner.pairs.push(texts);
        inner.ids.insert((api_version, kind), id);
        Some(id)
    }

    /// How many pairs are interned.
    pub(super) fn len(&self) -> usize {
        self.inner.read().pairs.len()
    }

    pub(super) fn resolve(&self, id: u32) -> (&'static str, &'static str) {
        self.inner.read().pairs.get(id as usize).copied().unwrap_or(("", ""))
    }
}

pub(super) fn type_pairs() -> &'static TypePairs {
    static P: OnceLock<TypePairs> = OnceLock::new();
    P.get_or_init(|| {
        // The empty pair (both strings the type interner's id 0) is `ObjectType::default()`.
        let inner =
            TypePairsInner { ids: [((0, 0), 0)].into_iter().collect(), pairs: vec![("", "")] };
        TypePairs { inner: RwLock::new(inner) }
    })
}

pub(super) fn namespace_interner() -> &'static Interner {
    static I: OnceLock<Interner> = OnceLock::new();
    I.get_or_init(|| Interner::new(&[""]))
}
