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
//! apiVersion+kind pairs ([`ObjectType`]) and namespaces ([`Namespace`]) are interned into small
//! integers in process-wide tables. Those sets are small and bounded by the cluster's API surface
//! and namespaces, so the tables only grow and their strings live for the process.

use std::fmt;
use std::sync::OnceLock;

use parking_lot::RwLock;

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
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uid {
    // Two words rather than a `u128`: `u128` is 16-byte aligned, which would pad every node.
    hi: u64,
    lo: u64,
}

/// `hi` of every interned UID.
const INTERNED_HI: u64 = u64::MAX;
/// The top three bits of `lo` of every interned UID (the UUID "reserved" variant).
const INTERNED_LO_TAG: u64 = 0b111 << 61;

impl Uid {
    /// Parses a UID from its API text. Never fails: non-UUID text is interned.
    pub fn parse(text: &str) -> Uid {
        match parse_canonical_uuid(text) {
            Some((hi, lo)) if !is_reserved(hi, lo) => Uid { hi, lo },
            _ => Uid::interned(text),
        }
    }

    /// The UID `text` would parse to, without interning anything: `None` for a non-UUID
    /// string never interned, which therefore names no object in the graph. For lookups from
    /// untrusted input (the debug endpoint), which must not grow the interner.
    pub fn lookup(text: &str) -> Option<Uid> {
        match parse_canonical_uuid(text) {
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

/// Parses exactly the canonical form: 36 bytes, lowercase hex, dashes at 8, 13, 18 and 23.
/// Uppercase is rejected on purpose: the API compares UIDs as strings, so `ABC…` and `abc…`
/// are different UIDs and must stay different.
fn parse_canonical_uuid(text: &str) -> Option<(u64, u64)> {
    let bytes: &[u8; 36] = text.as_bytes().try_into().ok()?;
    if bytes[8] != b'-' || bytes[13] != b'-' || bytes[18] != b'-' || bytes[23] != b'-' {
        return None;
    }
    // Branch-free over the 32 digits: any non-digit sets a high bit in `bad`.
    let mut value: u128 = 0;
    let mut bad = 0u8;
    for &i in &HEX_POSITIONS {
        let nibble = HEX_DIGIT[bytes[i] as usize];
        bad |= nibble;
        value = (value << 4) | u128::from(nibble & 0x0f);
    }
    (bad & 0xf0 == 0).then_some(((value >> 64) as u64, value as u64))
}

/// Where the 32 hex digits of a canonical UUID are.
const HEX_POSITIONS: [usize; 32] = {
    let mut p = [0; 32];
    let (mut i, mut n) = (0, 0);
    while i < 36 {
        if !matches!(i, 8 | 13 | 18 | 23) {
            p[n] = i;
            n += 1;
        }
        i += 1;
    }
    p
};

/// The value of each lowercase hex digit; 0xff for every other byte (uppercase included).
const HEX_DIGIT: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut c = 0;
    while c < 10 {
        t[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        t[b'a' as usize + c] = 10 + c as u8;
        c += 1;
    }
    t
};

fn format_uuid(hi: u64, lo: u64) -> String {
    let v = (u128::from(hi) << 64) | u128::from(lo);
    let hex = format!("{v:032x}");
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// An append-only string interner: `intern` returns a dense id, `resolve` the text back.
struct Interner {
    inner: RwLock<InternerInner>,
}

struct InternerInner {
    ids: hashbrown::HashMap<&'static str, u32>,
    strings: Vec<&'static str>,
}

/// A thread's copy of the ids it already looked up, so that ingest threads intern the same few
/// apiVersions, kinds and namespaces without touching the shared lock.
type LocalIds = std::cell::RefCell<hashbrown::HashMap<&'static str, u32>>;

impl Interner {
    fn new(seed: &[&'static str]) -> Interner {
        let mut inner = InternerInner { ids: hashbrown::HashMap::new(), strings: Vec::new() };
        for s in seed {
            inner.ids.insert(s, inner.strings.len() as u32);
            inner.strings.push(s);
        }
        Interner { inner: RwLock::new(inner) }
    }

    /// `intern`, answered from `local` when this thread saw `text` before.
    fn intern_cached(&self, local: &'static std::thread::LocalKey<LocalIds>, text: &str) -> u32 {
        if let Some(id) = local.with(|l| l.borrow().get(text).copied()) {
            return id;
        }
        let id = self.intern(text);
        let leaked = self.resolve(id);
        local.with(|l| l.borrow_mut().insert(leaked, id));
        id
    }

    fn find(&self, text: &str) -> Option<u32> {
        self.inner.read().ids.get(text).copied()
    }

    fn intern(&self, text: &str) -> u32 {
        if let Some(&id) = self.inner.read().ids.get(text) {
            return id;
        }
        let mut inner = self.inner.write();
        if let Some(&id) = inner.ids.get(text) {
            return id;
        }
        // Interned strings live for the process (see the module docs): leaking them is what
        // lets `resolve` hand out `&'static str` without holding the lock.
        let leaked: &'static str = Box::leak(text.to_owned().into_boxed_str());
        let id = u32::try_from(inner.strings.len()).expect("more than 2^32 interned strings");
        inner.strings.push(leaked);
        inner.ids.insert(leaked, id);
        id
    }

    fn resolve(&self, id: u32) -> &'static str {
        self.inner.read().strings.get(id as usize).copied().unwrap_or("")
    }
}

thread_local! {
    static LOCAL_TYPE_IDS: LocalIds = LocalIds::default();
    static LOCAL_NAMESPACE_IDS: LocalIds = LocalIds::default();
}

fn uid_interner() -> &'static Interner {
    static I: OnceLock<Interner> = OnceLock::new();
    I.get_or_init(|| Interner::new(&[]))
}

fn type_interner() -> &'static Interner {
    // apiVersion and kind interned separately; an `ObjectType` packs the two ids.
    static I: OnceLock<Interner> = OnceLock::new();
    I.get_or_init(|| Interner::new(&[""]))
}

fn namespace_interner() -> &'static Interner {
    static I: OnceLock<Interner> = OnceLock::new();
    I.get_or_init(|| Interner::new(&[""]))
}

/// An interned (apiVersion, kind) pair: the coordinates that say what type an object is.
///
/// Equality is equality of both strings. [`ObjectType::default`] is the empty pair.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ObjectType {
    api_version: u32,
    kind: u32,
}

impl ObjectType {
    /// Interns `api_version` (`v1`, `apps/v1`, …) and `kind` (`Pod`, …).
    pub fn new(api_version: &str, kind: &str) -> ObjectType {
        let i = type_interner();
        ObjectType {
            api_version: i.intern_cached(&LOCAL_TYPE_IDS, api_version),
            kind: i.intern_cached(&LOCAL_TYPE_IDS, kind),
        }
    }

    /// The apiVersion, as `group/version` or `version` for the core group.
    pub fn api_version(self) -> &'static str {
        type_interner().resolve(self.api_version)
    }

    /// The kind.
    pub fn kind(self) -> &'static str {
        type_interner().resolve(self.kind)
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
    /// The name.
    pub name: String,
    /// The UID.
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
mod tests {
    use super::*;

    #[test]
    fn canonical_uuid_round_trips_as_value() {
        let text = "910a2dec-8902-4cc1-beeb-8da1658eec67";
        let uid = Uid::parse(text);
        assert!(!uid.is_interned());
        assert_eq!(uid.as_u128(), 0x910a2dec_8902_4cc1_beeb_8da1658eec67);
        assert_eq!(uid.to_string(), text);
    }

    #[test]
    fn hostile_uids_never_panic_and_round_trip() {
        let long = "x".repeat(10 * 1024);
        let cases = [
            "",
            "910a2dec-8902-4cc1-beeb-8da1658eec677", // 37 characters
            "910a2dec-8902-4cc1-beeb-8da1658eec6",   // 35 characters
            "910A2DEC-8902-4CC1-BEEB-8DA1658EEC67",  // uppercase: a different string
            "910a2dec+8902-4cc1-beeb-8da1658eec67",  // dash in the wrong place
            "g10a2dec-8902-4cc1-beeb-8da1658eec67",  // non-hex
            "ffffffff-ffff-ffff-ffff-ffffffffffff",  // canonical, but in the reserved range
            "ünïcödé-ẞ",
            long.as_str(),
        ];
        let mut seen = std::collections::HashSet::new();
        for (i, text) in cases.iter().enumerate() {
            let uid = Uid::parse(text);
            assert_eq!(uid.to_string(), *text, "#{i}: round trip");
            assert_eq!(Uid::parse(text), uid, "#{i}: parse is a function");
            assert!(seen.insert(uid), "#{i}: two strings share a UID");
        }
        // Upper and lower case are different UIDs.
        assert_ne!(Uid::parse(cases[3]), Uid::parse("910a2dec-8902-4cc1-beeb-8da1658eec67"));
    }

    #[test]
    fn lookup_never_interns() {
        let unseen = "never-seen-uid-for-lookup";
        assert_eq!(Uid::lookup(unseen), None);
        assert_eq!(Uid::lookup(unseen), None, "a lookup must not intern");
        let seen = Uid::parse("seen-uid-for-lookup");
        assert_eq!(Uid::lookup("seen-uid-for-lookup"), Some(seen));
        let uuid = "910a2dec-8902-4cc1-beeb-8da1658eec67";
        assert_eq!(Uid::lookup(uuid), Some(Uid::parse(uuid)));
    }

    #[test]
    fn reserved_range_value_is_interned_through_its_text() {
        let v = u128::MAX;
        let uid = Uid::from_u128(v);
        assert!(uid.is_interned());
        assert_eq!(uid, Uid::parse("ffffffff-ffff-ffff-ffff-ffffffffffff"));
    }

    #[test]
    fn object_reference_string_form_is_upstreams() {
        let r = ObjectReference::new("v1", "Pod", "ns1", "podname2", "poduid2");
        assert_eq!(r.to_string(), "[v1/Pod, namespace: ns1, name: podname2, uid: poduid2]");
        let c = ObjectReference::new("v1", "Pod", "", "podname1", "poduid1");
        assert_eq!(c.to_string(), "[v1/Pod, namespace: , name: podname1, uid: poduid1]");
    }

    #[test]
    fn object_type_splits_group_and_version() {
        let t = ObjectType::new("apps/v1", "Deployment");
        assert_eq!((t.group(), t.version(), t.kind()), ("apps", "v1", "Deployment"));
        let core = ObjectType::new("v1", "Pod");
        assert_eq!((core.group(), core.version()), ("", "v1"));
    }
}
