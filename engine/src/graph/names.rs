//! The names of one shard's nodes and of their owner references, packed end to end.
//!
//! A name on the heap costs a 16-byte `Box<str>` in the node plus the allocator's rounding of
//! its bytes, and an allocation and a free per object. Kept here, a name costs a 4-byte
//! [`NameId`] in the node and its bytes plus one length byte, and a shard's names are a few
//! chunks that are allocated once.
//!
//! # Lifetime of a name
//!
//! A [`NameId`] means something only to the [`Names`] of the shard that stored it, and only
//! until that shard compacts. So ids never leave their shard: what leaves the graph copies the
//! text out under the shard's lock, and [`super::Shard::compact_names_if_wasteful`], which
//! rewrites every id the shard holds, runs under its write lock. A name replaced or removed is
//! [`Names::release`]d: its bytes are dead until the next compaction, which runs once the dead
//! bytes outweigh the live ones (see [`Names::is_wasteful`]), so a shard's names never take
//! much more than twice what its live names need.
//!
//! # Owner names that are a prefix of the object's own
//!
//! Controllers name what they create after themselves (a ReplicaSet `web-5d8f7b6c9` makes
//! Pods `web-5d8f7b6c9-x2k4p`, a Deployment `web` makes that ReplicaSet), so an owner
//! reference's name is most often a prefix of its object's name. Such a name is not stored
//! again: its id says "the first `len` bytes of the holder's name" ([`Names::store_relative`]),
//! and is read back relative to that name ([`Names::get_relative`]). Such an id is sound only
//! while the holder's name stays what it was, so a node that is renamed first stores copies of
//! the prefixes its references name (`Node::set_identity`).
//!
//! # Layout
//!
//! Each name is its length, then its bytes. The length is one byte below 127, or the byte 127
//! and five base-128 digits (35 bits; an object's name is at most a few MiB, the API server's
//! request limit); every length byte is ASCII, so a chunk stays a valid `String`
//! and reading a name back is a slice of it, with no check of its UTF-8. Chunks hold up to
//! [`CHUNK`] bytes; a name does not straddle chunks (a name longer than a chunk gets a chunk of
//! its own). The last chunk grows by doubling, so a shard of a small graph takes little.

use std::num::NonZeroU32;

/// The most bytes a regular chunk holds; a [`NameId`] keeps a 16-bit offset into its chunk.
pub(crate) const CHUNK: usize = 1 << 16;
/// A chunk's first capacity; it doubles up to [`CHUNK`].
const FIRST_CHUNK: usize = 256;
/// The most chunks a shard can hold (a [`NameId`] keeps a 16-bit chunk number, and its top
/// value marks a prefix): 4 GiB of names in one shard, about 50 million objects with 80-byte
/// names.
const MAX_CHUNKS: usize = (1 << 16) - 2;
/// The chunk part of an id that names a prefix of its holder's name, not stored bytes.
const PREFIX: u32 = 0xffff;
/// The length byte that says five base-128 digits follow.
const LONG: u8 = 127;
/// The fewest dead bytes worth a compaction. Debug builds compact almost as soon as the dead
/// bytes outweigh the live ones, so that every test run through them (the property tests
/// included) moves names around; the outcome is the same, only the timing differs.
const COMPACT_MIN_DEAD: usize = if cfg!(debug_assertions) { 64 } else { CHUNK };

/// Where a name is, in the [`Names`] of the shard that stored it.
///
/// Ids are not compared: two stored copies of one name have different ids. Compare the text.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NameId(NonZeroU32);

impl NameId {
    fn new(chunk: usize, offset: usize) -> NameId {
        debug_assert!(chunk < MAX_CHUNKS && offset < CHUNK);
        // Chunk numbers start at 1 in the id, so it is never zero (a niche for `Option<Node>`).
        let raw = ((chunk as u32 + 1) << 16) | offset as u32;
        NameId(NonZeroU32::new(raw).expect("the chunk part is at least 1"))
    }

    /// The id of the first `len` bytes of the holder's name, if `len` fits in it.
    fn prefix(len: usize) -> Option<NameId> {
        let len = u32::try_from(len).ok().filter(|&len| len <= 0xffff)?;
        NonZeroU32::new((PREFIX << 16) | len).map(NameId)
    }

    /// The length of the holder's name this id names, if it names a prefix.
    fn prefix_len(self) -> Option<usize> {
        (self.0.get() >> 16 == PREFIX).then_some((self.0.get() & 0xffff) as usize)
    }

    /// Whether this id names a prefix of its holder's name rather than bytes of its own.
    pub(crate) fn is_relative(self) -> bool {
        self.prefix_len().is_some()
    }

    fn chunk(self) -> usize {
        (self.0.get() >> 16) as usize - 1
    }

    fn offset(self) -> usize {
        (self.0.get() & 0xffff) as usize
    }
}

/// One shard's names (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Names {
    chunks: Vec<String>,
    /// Bytes of the names stored and not released, with their length bytes.
    live: usize,
    /// Bytes no name uses: released names, and the unused ends of chunks left behind.
    dead: usize,
}

/// The bytes a name of `len` bytes takes, with its length.
fn stored_len(len: usize) -> usize {
    if len < usize::from(LONG) { 1 + len } else { 6 + len }
}

impl Names {
    /// Stores `name` and returns where it is.
    ///
    /// # Panics
    ///
    /// If the shard already holds 4 GiB of names (see [`MAX_CHUNKS`]); the graph's shard
    /// count is what to raise long before that.
    pub(crate) fn store(&mut self, name: &str) -> NameId {
        let need = stored_len(name.len());
        let chunk = self.chunk_with_room(need);
        let text = &mut self.chunks[chunk];
        let offset = text.len();
        if name.len() < usize::from(LONG) {
            text.push(char::from(name.len() as u8));
        } else {
            text.push(char::from(LONG));
            let mut len = name.len();
            for _ in 0..5 {
                text.push(char::from((len & 0x7f) as u8));
                len >>= 7;
            }
        }
        text.push_str(name);
        self.live += need;
        NameId::new(chunk, offset)
    }

    /// Stores `name`, which a node whose own name is at `holder` holds (one of its owner
    /// references' names): as a prefix of that name when it is one, costing nothing.
    pub(crate) fn store_relative(&mut self, holder: NameId, name: &str) -> NameId {
        if self.get(holder).starts_with(name)
            && let Some(prefix) = NameId::prefix(name.len())
        {
            return prefix;
        }
        self.store(name)
    }

    /// The name at `id`, stored by [`Names::store_relative`] for the holder whose name is at
    /// `holder`.
    pub(crate) fn get_relative(&self, holder: NameId, id: NameId) -> &str {
        match id.prefix_len() {
            // The holder's name started with the stored name: `len` is a char boundary.
            Some(len) => &self.get(holder)[..len],
            None => self.get(id),
        }
    }

    /// The chunk to append `need` bytes to, started or grown if need be.
    fn chunk_with_room(&mut self, need: usize) -> usize {
        if let Some(last) = self.chunks.last_mut() {
            if last.len() + need <= CHUNK {
                if last.len() + need > last.capacity() {
                    let grown = (last.capacity() * 2).max(last.len() + need).min(CHUNK);
                    last.reserve_exact(grown - last.len());
                }
                return self.chunks.len() - 1;
            }
            // The rest of this chunk is never used (a chunk of one long name has none).
            self.dead += CHUNK.saturating_sub(last.len());
        }
        assert!(
            self.chunks.len() < MAX_CHUNKS,
            "a graph shard holds 4 GiB of names; configure more shards"
        );
        // A name longer than a chunk gets a chunk of its own, exactly its size.
        self.chunks.push(String::with_capacity(need.max(FIRST_CHUNK)));
        self.chunks.len() - 1
    }

    /// Asks the CPU to fetch the bytes of the name at `id`, without waiting for them.
    pub(crate) fn prefetch(&self, id: NameId) {
        if !id.is_relative()
            && let Some(text) = self.chunks.get(id.chunk())
        {
            crate::graph::prefetch(text.as_bytes().as_ptr().wrapping_add(id.offset()));
        }
    }

    /// The name stored at `id`, which [`Names::store`] returned (not a relative id).
    pub(crate) fn get(&self, id: NameId) -> &str {
        debug_assert!(!id.is_relative(), "a relative id is read with get_relative");
        let text = &self.chunks[id.chunk()];
        let bytes = text.as_bytes();
        let at = id.offset();
        let (len, start) = if bytes[at] < LONG {
            (usize::from(bytes[at]), at + 1)
        } else {
            let digits = &bytes[at + 1..at + 6];
            let len = digits.iter().rev().fold(0usize, |len, &d| (len << 7) | usize::from(d));
            (len, at + 6)
        };
        &text[start..start + len]
    }

    /// Records that the name at `id` is no longer used (it stays readable until compaction).
    /// A relative id holds no bytes of its own: releasing it does nothing.
    pub(crate) fn release(&mut self, id: NameId) {
        if id.is_relative() {
            return;
        }
        let bytes = stored_len(self.get(id).len());
        // Saturating: a miscount could only mistime a compaction, never lose a name.
        self.live = self.live.saturating_sub(bytes);
        self.dead += bytes;
    }

    /// Whether compacting would reclaim more than it keeps (and at least a chunk, in release
    /// builds; see [`COMPACT_MIN_DEAD`]).
    pub(crate) fn is_wasteful(&self) -> bool {
        self.dead > self.live && self.dead >= COMPACT_MIN_DEAD
    }

    /// Bytes held for names (the chunks' capacity).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.chunks.iter().map(String::capacity).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_every_length_read_back_as_stored() {
        let mut names = Names::default();
        let lengths = [0, 1, 126, 127, 128, 300, 16_383, 16_384, CHUNK - 6, CHUNK, 3 * CHUNK];
        let stored: Vec<(String, NameId)> = lengths
            .iter()
            .enumerate()
            .flat_map(|(i, &len)| {
                // Several in a row, so chunks fill, grow and roll over.
                (0..3).map(move |j| "é".repeat(len / 2) + &"x".repeat(len % 2 + i + j))
            })
            .map(|text| {
                let id = names.store(&text);
                (text, id)
            })
            .collect();
        for (text, id) in &stored {
            assert_eq!(names.get(*id), text);
        }
        let oversized = names.chunks.iter().filter(|c| c.len() > CHUNK).count();
        let longer_than_a_chunk = stored.iter().filter(|(t, _)| stored_len(t.len()) > CHUNK);
        assert_eq!(oversized, longer_than_a_chunk.count(), "only they have chunks of their own");
    }

    #[test]
    fn released_names_count_as_dead_until_they_outweigh_the_live_ones() {
        let mut names = Names::default();
        // Names of 32 bytes stored, filling four chunks to their ends (so that no unused end
        // counts as dead), and enough dead bytes for a release build's floor.
        let count = 4 * CHUNK / 32;
        let ids: Vec<NameId> = (0..count).map(|i| names.store(&format!("pod-{i:027}"))).collect();
        assert_eq!((names.live, names.dead), (count * 32, 0));
        assert_eq!(names.chunks.len(), 4);
        assert!(!names.is_wasteful());
        for &id in &ids[..count / 2] {
            names.release(id);
        }
        assert!(COMPACT_MIN_DEAD <= names.dead, "past a release build's floor");
        assert!(!names.is_wasteful(), "half released: as much dead as live");
        names.release(ids[count / 2]);
        assert!(names.is_wasteful());
        assert_eq!(names.get(ids[count - 1]), format!("pod-{:027}", count - 1));
    }

    #[test]
    fn the_unused_end_of_a_full_chunk_counts_as_dead() {
        let mut names = Names::default();
        let name = "x".repeat(99);
        let fit = CHUNK / 100;
        (0..=fit).for_each(|_| _ = names.store(&name));
        assert_eq!(names.chunks.len(), 2);
        assert_eq!(names.dead, CHUNK - fit * 100);
        assert_eq!(names.live, (fit + 1) * 100);
    }

    #[test]
    fn an_owner_name_that_prefixes_its_holders_is_not_stored_again() {
        let mut names = Names::default();
        let pod = names.store("web-5d8f7b6c9-x2k4p");
        let live = names.live;
        let owner = names.store_relative(pod, "web-5d8f7b6c9");
        assert!(owner.is_relative());
        assert_eq!(names.get_relative(pod, owner), "web-5d8f7b6c9");
        let empty = names.store_relative(pod, "");
        assert_eq!(names.get_relative(pod, empty), "");
        assert_eq!(names.live, live, "prefixes take no bytes");
        names.release(owner);
        assert_eq!(names.dead, 0);
        // Not a prefix: stored. (A prefix ends where one of the holder's characters ends,
        // since it is a whole string itself.)
        let other = names.store_relative(pod, "api-7c9d");
        assert!(!other.is_relative());
        assert_eq!(names.get_relative(pod, other), "api-7c9d");
        let accented = names.store("é-1");
        let cut = names.store_relative(accented, "\u{e9}");
        assert_eq!(names.get_relative(accented, cut), "é");
        // Too long to be a prefix id: stored.
        let long = "x".repeat(70_000);
        let holder = names.store(&(long.clone() + "-1"));
        let id = names.store_relative(holder, &long);
        assert!(!id.is_relative());
        assert_eq!(names.get_relative(holder, id), long);
    }

    #[test]
    fn a_small_shard_takes_a_small_chunk() {
        let mut names = Names::default();
        names.store("web-1");
        assert_eq!(names.capacity(), FIRST_CHUNK);
    }
}
