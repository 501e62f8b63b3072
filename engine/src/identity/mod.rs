//! Object identity: UIDs, interned types and namespaces, and upstream's `objectReference`.
//!
//! Upstream: `graph.go` (`objectReference`, `ownerReferenceCoordinates`,
//! `ownerReferenceMatchesCoordinates`); GC-SPEC.md §1.1.
//!
//! A [`Uid`] is the 128-bit value of a canonical lowercase UUID, so that a node's key is two
//! machine words instead of a 36-byte string. The API server accepts any string as a UID, so a
//! UID that is not a canonical UUID is interned instead and still works: it round-trips to the
//! same text and never panics.
//!
//! Interned UIDs live for the process (a `Uid` is `Copy` and may sit in queues and caches long
//! after its node left the graph, so its text can never be reclaimed safely: a UID resolving to
//! another text would name another object in an API call). Anyone who can write an object can
//! put any string in an ownerReference, so the number of interned UIDs is capped
//! ([`set_max_interned_uids`], default [`DEFAULT_MAX_INTERNED_UIDS`]). Ingestion parses with
//! [`Uid::try_parse`]: past the cap, an ownerReference naming a new non-UUID UID is held as
//! unrepresentable ([`owner_coordinates`], which says why that is safe), and an object whose own
//! UID is refused (the API server generates UUIDs, so only a foreign server's object could be)
//! is rejected with [`UidCapacityError`] and stays out of the graph. [`Uid::parse`] is for
//! trusted text and still interns.
//!
//! apiVersion+kind pairs ([`ObjectType`]) and namespaces ([`Namespace`]) are interned into small
//! integers in process-wide tables, which only grow: their strings live for the process. The
//! namespaces are bounded by the cluster's namespaces, and the types the cluster serves by its
//! API surface, but an ownerReference's apiVersion and kind are whatever its writer put there
//! (the API server checks only that they are not empty), and one object may carry thousands of
//! references. So ingestion interns them with [`ObjectType::try_new`], which refuses a string
//! longer than any served type can have ([`MAX_TYPE_STRING_LEN`]) and, past a cap on how many
//! are held ([`set_max_interned_type_strings`], default [`DEFAULT_MAX_INTERNED_TYPE_STRINGS`]),
//! a string not interned yet, or a new pair of held ones; ingestion then holds the reference
//! under [`ObjectType::unrepresentable`] ([`owner_coordinates`]). Neither refusal can refuse a
//! type the cluster serves: the controller interns every discovered type with
//! [`ObjectType::new`], which has no cap, before anything is ingested or decided, and no served
//! type is that long.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};

use self::interner::{
    LOCAL_NAMESPACE_IDS, LOCAL_TYPES, namespace_interner, type_interner, type_pairs, uid_interner,
};

mod interner;
mod text;
mod uuid_text;

pub(crate) use text::text_eq;
use uuid_text::{format_uuid, parse_canonical_uuid};

/// An object's UID.
///
/// Canonical UUIDs (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lowercase hex) are stored as their
/// 128-bit value; any other string is interned and represented by a value in a reserved range
/// that no canonical UUID is ever mapped to (a canonical UUID that falls in that range is
/// interned like any other string), so two different strings never share a `Uid`.
///
/// # Examples
///
/// ```
/// use kube_gc_engine::Uid;
///
/// let uid = Uid::parse("910a2dec-8902-4cc1-beeb-8da1658eec67");
/// assert_eq!(uid.to_string(), "910a2dec-8902-4cc1-beeb-8da1658eec67");
/// // Not a UUID: still a UID, still round-trips.
/// assert_eq!(Uid::parse("poduid1").to_string(), "poduid1");
/// assert_ne!(Uid::parse("poduid1"), Uid::parse("poduid2"));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Uid {
    // Two words rather than a `u128`: `u128` is 16-byte aligned, which would pad every node.
    hi: u64,
    lo: u64,
}

/// The default cap on interned non-UUID UIDs (about 100 MiB at most, with their text).
pub const DEFAULT_MAX_INTERNED_UIDS: usize = 1 << 20;

static MAX_INTERNED_UIDS: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_INTERNED_UIDS);

/// Sets how many distinct non-UUID UIDs [`Uid::try_parse`] interns at most, process-wide.
pub fn set_max_interned_uids(max: usize) {
    MAX_INTERNED_UIDS.store(max, Ordering::Relaxed);
}

/// The cap [`set_max_interned_uids`] set.
pub fn max_interned_uids() -> usize {
    MAX_INTERNED_UIDS.load(Ordering::Relaxed)
}

/// How many non-UUID UIDs are interned now.
pub fn interned_uids() -> usize {
    uid_interner().len()
}

/// [`Uid::try_parse`] refused a new non-UUID UID: the cap is reached.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "uid {uid:?} is not a UUID and {max} such UIDs are already held (the cap on non-UUID UIDs, which any writer of ownerReferences could otherwise grow without bound)"
)]
pub struct UidCapacityError {
    /// The refused text.
    pub uid: String,
    /// The cap in force.
    pub max: usize,
}

/// The longest apiVersion or kind a served type can have: a group is a DNS subdomain (253
/// bytes), a version and a kind DNS labels (63), so `group/version` takes at most 317.
pub const MAX_TYPE_STRING_LEN: usize = 253 + 1 + 63;

/// The apiVersion, kind and UID text of [`ObjectType::unrepresentable`] and
/// [`Uid::unrepresentable`].
pub const UNREPRESENTABLE: &str = "(unrepresentable)";

static UNREPRESENTABLE_OWNER_REFERENCES: AtomicUsize = AtomicUsize::new(0);

/// How many ownerReferences ingestion held under [`ObjectType::unrepresentable`] since the
/// process started (each time an event carrying one was ingested).
pub fn unrepresentable_owner_references() -> usize {
    UNREPRESENTABLE_OWNER_REFERENCES.load(Ordering::Relaxed)
}

/// An ownerReference's type and UID as the graph holds them: interned from untrusted text
/// ([`ObjectType::try_new`], [`Uid::try_parse`]), or where either refuses (a type longer than
/// any served one, or a new type or non-UUID UID past the caps), the type
/// [`ObjectType::unrepresentable`], and for a refused UID [`Uid::unrepresentable`]; counted in
/// [`unrepresentable_owner_references`].
///
/// Why the reference is held so rather than its object refused: the object stays in the graph
/// as its other owners' dependent, so an owner it blocks keeps waiting for it, and its own
/// deletion and foreground or orphan finalizers are seen, as in upstream's graph. No decision
/// goes past such a reference, as upstream's cannot past a type it cannot map: the collector
/// maps each reference by its own type, which fails (kept, retried), and a live read of the
/// object refuses the same text again. Upstream could map a non-UUID UID's real type and find
/// that owner absent, so there kube-gc keeps what upstream may collect (and a refused UID's
/// owner is never verified; all of them share one virtual node, whose type cannot be mapped).
pub fn owner_coordinates(api_version: &str, kind: &str, uid: &str) -> (ObjectType, Uid) {
    match (ObjectType::try_new(api_version, kind), Uid::try_parse(uid)) {
        (Ok(ty), Ok(uid)) => (ty, uid),
        (_, parsed) => {
            UNREPRESENTABLE_OWNER_REFERENCES.fetch_add(1, Ordering::Relaxed);
            (ObjectType::unrepresentable(), parsed.unwrap_or_else(|_| Uid::unrepresentable()))
        }
    }
}

/// The default cap on interned apiVersion and kind strings, together, and on their pairs. A
/// cluster serves a few hundred types; at the cap they hold at most about 6 MiB.
pub const DEFAULT_MAX_INTERNED_TYPE_STRINGS: usize = 1 << 14;

static MAX_INTERNED_TYPE_STRINGS: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_INTERNED_TYPE_STRINGS);

/// Sets how many distinct apiVersion and kind strings, and how many pairs of them,
/// [`ObjectType::try_new`] interns at most, process-wide. No more than 2^28 pairs are ever
/// interned, whatever the cap.
pub fn set_max_interned_type_strings(max: usize) {
    MAX_INTERNED_TYPE_STRINGS.store(max, Ordering::Relaxed);
}

/// The cap [`set_max_interned_type_strings`] set.
pub fn max_interned_type_strings() -> usize {
    MAX_INTERNED_TYPE_STRINGS.load(Ordering::Relaxed)
}

/// How many apiVersion and kind strings are interned now.
pub fn interned_type_strings() -> usize {
    type_interner().len()
}

/// How many (apiVersion, kind) pairs are interned now: each [`ObjectType`] made so far.
pub fn interned_type_pairs() -> usize {
    type_pairs().len()
}

/// [`ObjectType::try_new`] refused an apiVersion or kind: too long to name a served type, or
/// new past the cap. The strings are cut to 64 bytes here (they may be megabytes long).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "type {api_version:?}/{kind:?} is refused: an apiVersion or kind longer than {MAX_TYPE_STRING_LEN} bytes names no served type, and {max} such strings, or pairs of them, are the most held (the cap on types, which any writer of ownerReferences could otherwise grow without bound)"
)]
pub struct TypeCapacityError {
    /// The refused apiVersion, cut to 64 bytes.
    pub api_version: String,
    /// The refused kind, cut to 64 bytes.
    pub kind: String,
    /// The cap in force.
    pub max: usize,
}

/// `text` cut to at most 64 bytes, on a character boundary.
fn cut(text: &str) -> String {
    let mut end = text.len().min(64);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// `hi` of every interned UID.
const INTERNED_HI: u64 = u64::MAX;
/// The top three bits of `lo` of every interned UID (the UUID "reserved" variant).
const INTERNED_LO_TAG: u64 = 0b111 << 61;

impl Uid {
    /// Parses a UID from its API text. Never fails: non-UUID text is interned.
    pub fn parse(text: &str) -> Uid {
        match parse_canonical_uuid(text.as_bytes()) {
            Some((hi, lo)) if !is_reserved(hi, lo) => Uid { hi, lo },
            _ => Uid::interned(text),
        }
    }

    /// The UID the graph holds for an ownerReference UID refused past the cap
    /// ([`owner_coordinates`]): [`UNREPRESENTABLE`], interned.
    pub fn unrepresentable() -> Uid {
        static UID: std::sync::OnceLock<Uid> = std::sync::OnceLock::new();
        *UID.get_or_init(|| Uid::parse(UNREPRESENTABLE))
    }

    /// Parses a UID from untrusted text: as [`Uid::parse`], except that a non-UUID string not
    /// interned yet is refused once [`set_max_interned_uids`]'s cap is reached.
    pub fn try_parse(text: &str) -> Result<Uid, UidCapacityError> {
        if let Some(uid) = Uid::lookup(text) {
            return Ok(uid);
        }
        let max = MAX_INTERNED_UIDS.load(Ordering::Relaxed);
        match uid_interner().intern_bounded(text, max) {
            Some(id) => Ok(Uid { hi: INTERNED_HI, lo: INTERNED_LO_TAG | u64::from(id) }),
            None => Err(UidCapacityError { uid: text.to_owned(), max }),
        }
    }

    /// The UID `text` would parse to, without interning anything: `None` for a non-UUID
    /// string never interned, which therefore names no object in the graph. For lookups from
    /// untrusted input (the debug endpoint), which must not grow the interner.
    pub fn lookup(text: &str) -> Option<Uid> {
        match parse_canonical_uuid(text.as_bytes()) {
            Some((hi, lo)) if !is_reserved(hi, lo) => Some(Uid { hi, lo }),
            _ => uid_interner()
                .find(text)
                .map(|id| Uid { hi: INTERNED_HI, lo: INTERNED_LO_TAG | u64::from(id) }),
        }
    }

    /// Builds a UID from a 128-bit UUID value. A value in the reserved interned range is
    /// interned through its canonical text, exactly as [`Uid::parse`] would.
    pub fn from_u128(value: u128) -> Uid {
        let (hi, lo) = ((value >> 64) as u64, value as u64);
        if is_reserved(hi, lo) { Uid::interned(&format_uuid(hi, lo)) } else { Uid { hi, lo } }
    }

    /// The UID's 128-bit value (for interned UIDs, a value in the reserved range).
    pub fn as_u128(self) -> u128 {
        (u128::from(self.hi) << 64) | u128::from(self.lo)
    }

    /// Whether this UID came from a string that is not a canonical UUID.
    pub fn is_interned(self) -> bool {
        is_reserved(self.hi, self.lo)
    }

    /// A well-mixed 64-bit hash of the UID, used both to pick a shard and inside the shard's
    /// table (see [`crate::graph`] for which bits each uses).
    #[inline]
    pub fn hash64(self) -> u64 {
        // murmur3's fmix64 over both words: interned UIDs differ only in low bits of `lo`,
        // random UUIDs everywhere; both come out uniformly spread.
        let mut z = self.hi.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.lo;
        z ^= z >> 33;
        z = z.wrapping_mul(0xff51_afd7_ed55_8ccd);
        z ^= z >> 33;
        z = z.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        z ^ (z >> 33)
    }

    fn interned(text: &str) -> Uid {
        let id = uid_interner().intern(text);
        Uid { hi: INTERNED_HI, lo: INTERNED_LO_TAG | u64::from(id) }
    }
}

fn is_reserved(hi: u64, lo: u64) -> bool {
    hi == INTERNED_HI && lo & INTERNED_LO_TAG == INTERNED_LO_TAG
}

/// Hashes as its [`Uid::hash64`], a single word: with [`UidBuildHasher`] that word is the hash,
/// with no second pass through a general-purpose hasher.
impl Hash for Uid {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash64());
    }
}

/// The hasher of [`UidMap`] and [`UidSet`]: passes [`Uid::hash64`] through.
///
/// A UID map on the warm-up path (a resource's store of emitted UIDs, one insert per object)
/// spent more time in std's SipHash than in its table. Passing the UID's own mix through
/// exposes these maps to crafted collisions no more than the graph's shard tables, which use
/// the same hash: an object's own UID is the API server's random UUID.
#[derive(Clone, Copy, Default, Debug)]
pub struct UidHasher(u64);

impl Hasher for UidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, word: u64) {
        // One word (a `Uid`) passes through unchanged; a key of several words still mixes.
        self.0 = self.0.rotate_left(26) ^ word;
    }

    fn write(&mut self, bytes: &[u8]) {
        // Keys other than UIDs (not used with this hasher, but allowed): FNV-1a.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// Builds [`UidHasher`]s.
pub type UidBuildHasher = BuildHasherDefault<UidHasher>;
/// A map keyed by [`Uid`], hashed by [`Uid::hash64`].
pub type UidMap<V> = HashMap<Uid, V, UidBuildHasher>;
/// A set of [`Uid`]s, hashed by [`Uid::hash64`].
pub type UidSet = HashSet<Uid, UidBuildHasher>;

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_interned() {
            let id = (self.lo & !INTERNED_LO_TAG) as u32;
            f.write_str(uid_interner().resolve(id))
        } else {
            f.write_str(&format_uuid(self.hi, self.lo))
        }
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uid({self})")
    }
}

impl From<&str> for Uid {
    fn from(text: &str) -> Uid {
        Uid::parse(text)
    }
}

/// An interned (apiVersion, kind) pair: the coordinates that say what type an object is.
///
/// One 4-byte id for the pair (a node and each of its owner references hold one). Equality is
/// equality of both strings. [`ObjectType::default`] is the empty pair.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ObjectType(u32);

impl ObjectType {
    /// Bits an id takes at most: no more than 2^28 types are ever interned, so the graph may
    /// keep other bits beside an id.
    pub(crate) const ID_BITS: u32 = 28;

    /// The type's id, below 2^[`ObjectType::ID_BITS`].
    pub(crate) fn id(self) -> u32 {
        self.0
    }

    /// The type whose [`ObjectType::id`] is `id`.
    pub(crate) fn from_id(id: u32) -> ObjectType {
        ObjectType(id)
    }

    /// Interns `api_version` (`v1`, `apps/v1`, …) and `kind` (`Pod`, …).
    pub fn new(api_version: &str, kind: &str) -> ObjectType {
        ObjectType::intern(api_version, kind, usize::MAX).expect("fewer than 2^28 types")
    }

    /// Interns `api_version` and `kind` from untrusted text (an ownerReference), refusing
    /// either if it is longer than [`MAX_TYPE_STRING_LEN`], or new once
    /// [`set_max_interned_type_strings`]'s cap is reached (see the module docs). The pair is
    /// held under the same cap.
    pub fn try_new(api_version: &str, kind: &str) -> Result<ObjectType, TypeCapacityError> {
        let max = MAX_INTERNED_TYPE_STRINGS.load(Ordering::Relaxed);
        let refused = || TypeCapacityError { api_version: cut(api_version), kind: cut(kind), max };
        if api_version.len() > MAX_TYPE_STRING_LEN || kind.len() > MAX_TYPE_STRING_LEN {
            return Err(refused());
        }
        ObjectType::intern(api_version, kind, max).ok_or_else(refused)
    }

    /// The type the graph holds for an ownerReference whose type or UID ingestion refuses
    /// ([`owner_coordinates`]): [`UNREPRESENTABLE`] for both strings, which no server can
    /// serve (`(` is in no group, version or kind), so mapping it always fails.
    pub fn unrepresentable() -> ObjectType {
        static TYPE: std::sync::OnceLock<ObjectType> = std::sync::OnceLock::new();
        *TYPE.get_or_init(|| ObjectType::new(UNREPRESENTABLE, UNREPRESENTABLE))
    }

    fn intern(api_version: &str, kind: &str, max: usize) -> Option<ObjectType> {
        if let Some(ty) = LOCAL_TYPES.with(|l| l.borrow().get(api_version, kind)) {
            return Some(ty);
        }
        let strings = type_interner();
        let av = strings.intern_bounded(api_version, max)?;
        let k = strings.intern_bounded(kind, max)?;
        let ty = ObjectType(type_pairs().intern(av, k, max)?);
        LOCAL_TYPES.with(|l| l.borrow_mut().insert(strings.resolve(av), strings.resolve(k), ty));
        Some(ty)
    }

    /// The apiVersion, as `group/version` or `version` for the core group.
    pub fn api_version(self) -> &'static str {
        type_pairs().resolve(self.0).0
    }

    /// The kind (`Pod`), as the type was interned.
    pub fn kind(self) -> &'static str {
        type_pairs().resolve(self.0).1
    }

    /// The API group (`""` for the core group).
    pub fn group(self) -> &'static str {
        self.api_version().rsplit_once('/').map_or("", |(g, _)| g)
    }

    /// The version part of the apiVersion.
    pub fn version(self) -> &'static str {
        let av = self.api_version();
        av.rsplit_once('/').map_or(av, |(_, v)| v)
    }
}

impl fmt::Debug for ObjectType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind())
    }
}

/// An interned namespace; [`Namespace::CLUSTER`] (the empty string) for cluster-scoped objects.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Namespace(u32);

impl Namespace {
    /// The empty namespace of cluster-scoped objects (and of virtual owners made cluster-scoped).
    pub const CLUSTER: Namespace = Namespace(0);

    /// Interns a namespace name.
    pub fn new(name: &str) -> Namespace {
        Namespace(namespace_interner().intern_cached(&LOCAL_NAMESPACE_IDS, name))
    }

    /// The namespace's name (`""` for cluster-scoped).
    pub fn as_str(self) -> &'static str {
        namespace_interner().resolve(self.0)
    }

    /// Whether this is the empty (cluster-scoped) namespace.
    pub fn is_cluster(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The four coordinates of an owner reference: apiVersion, kind, name and UID
/// (upstream's `ownerReferenceCoordinates`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Coordinates {
    /// apiVersion and kind.
    pub ty: ObjectType,
    /// The owner's name.
    pub name: String,
    /// The owner's UID.
    pub uid: Uid,
}

/// Upstream's `objectReference`: an object's coordinates plus its namespace. Two identities are
/// equal when all five fields are.
///
/// Its [`Display`](fmt::Display) is upstream's string form, used in logs and in the
/// `OwnerRefInvalidNamespace` event: `[v1/Pod, namespace: ns1, name: podname2, uid: poduid2]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ObjectReference {
    /// apiVersion and kind.
    pub ty: ObjectType,
    /// The namespace (`Namespace::CLUSTER` for cluster-scoped).
    pub namespace: Namespace,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`: what the graph and the queues key the object by.
    pub uid: Uid,
}

impl ObjectReference {
    /// Builds an identity from its parts.
    pub fn new(api_version: &str, kind: &str, namespace: &str, name: &str, uid: &str) -> Self {
        ObjectReference {
            ty: ObjectType::new(api_version, kind),
            namespace: Namespace::new(namespace),
            name: name.to_owned(),
            uid: Uid::parse(uid),
        }
    }

    /// The identity an owner reference names, placed in `namespace`.
    pub fn from_owner(owner: &OwnerRef, namespace: Namespace) -> Self {
        ObjectReference { ty: owner.ty, namespace, name: owner.name.clone(), uid: owner.uid }
    }

    /// Whether `owner`'s coordinates equal this identity's (namespace not considered), as
    /// upstream's `ownerReferenceMatchesCoordinates`.
    pub fn matches_coordinates(&self, owner: &OwnerRef) -> bool {
        self.uid == owner.uid && self.ty == owner.ty && self.name == owner.name
    }
}

impl fmt::Display for ObjectReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.ty.api_version(),
            self.ty.kind(),
            self.namespace,
            self.name,
            self.uid
        )
    }
}

/// An owner reference as the graph keeps it: interned type, parsed UID, the two optional flags.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct OwnerRef {
    /// The owner's apiVersion and kind.
    pub ty: ObjectType,
    /// The owner's name.
    pub name: String,
    /// The owner's UID.
    pub uid: Uid,
    /// `controller`, if set.
    pub controller: Option<bool>,
    /// `blockOwnerDeletion`, if set.
    pub block_owner_deletion: Option<bool>,
}

impl OwnerRef {
    /// Whether this reference blocks its owner's foreground deletion.
    pub fn blocks(&self) -> bool {
        self.block_owner_deletion == Some(true)
    }

    /// The reference's four coordinates.
    pub fn coordinates(&self) -> Coordinates {
        Coordinates { ty: self.ty, name: self.name.clone(), uid: self.uid }
    }
}

#[cfg(test)]
mod tests;
