//! The one place the engine takes its synchronisation primitives from.
//!
//! Every concurrent structure of the engine imports `Arc`, locks, atomics and `Condvar` from
//! here, never from `std` or `parking_lot` directly. Under `--cfg kube_gc_loom` this module is
//! backed by [loom]'s model-checked primitives, so that `loom-tests/` explores every interleaving
//! of the very code that ships; otherwise by `parking_lot`'s locks and std's atomics.
//!
//! Both sides expose one shape (tokio's habit): [`Mutex::lock`], [`RwLock::read`] and
//! [`RwLock::write`] return guards directly, with no poisoning, and [`Condvar::wait`] takes and
//! gives back the guard.
//!
//! The cfg is project-named, as crossbeam's `crossbeam_loom`, so that setting it never changes
//! how dependencies that test plain `cfg(loom)` (tokio among them) are built.
//!
//! Process-wide interners (see [`crate::identity`]) deliberately do *not* use this facade: they
//! are append-only tables outside any modelled interleaving, and loom forbids its primitives in
//! statics.
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(kube_gc_loom))]
pub(crate) use std::sync::Arc;

#[cfg(kube_gc_loom)]
pub(crate) use loom::sync::Arc;

/// Atomics, from std or loom.
pub(crate) mod atomic {
    #[cfg(not(kube_gc_loom))]
    #[allow(unused_imports)] // the facade offers them; not every structure uses each
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    #[cfg(kube_gc_loom)]
    #[allow(unused_imports)] // as above
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
}

#[cfg(not(kube_gc_loom))]
mod imp {
    pub(crate) type MutexInner<T> = parking_lot::Mutex<T>;
    pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
    pub(crate) type RwLockInner<T> = parking_lot::RwLock<T>;
    pub(crate) type RwLockReadGuard<'a, T> = parking_lot::RwLockReadGuard<'a, T>;
    pub(crate) type RwLockWriteGuard<'a, T> = parking_lot::RwLockWriteGuard<'a, T>;
    pub(crate) type CondvarInner = parking_lot::Condvar;

    pub(crate) fn lock<T>(m: &MutexInner<T>) -> MutexGuard<'_, T> {
        m.lock()
    }
    pub(crate) fn read<T>(l: &RwLockInner<T>) -> RwLockReadGuard<'_, T> {
        l.read()
    }
    pub(crate) fn write<T>(l: &RwLockInner<T>) -> RwLockWriteGuard<'_, T> {
        l.write()
    }
    pub(crate) fn wait<'a, T>(c: &CondvarInner, mut g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        c.wait(&mut g);
        g
    }
    pub(crate) fn notify_one(c: &CondvarInner) {
        c.notify_one();
    }
    pub(crate) fn notify_all(c: &CondvarInner) {
        c.notify_all();
    }
}

#[cfg(kube_gc_loom)]
mod imp {
    pub(crate) type MutexInner<T> = loom::sync::Mutex<T>;
    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;
    pub(crate) type RwLockInner<T> = loom::sync::RwLock<T>;
    pub(crate) type RwLockReadGuard<'a, T> = loom::sync::RwLockReadGuard<'a, T>;
    pub(crate) type RwLockWriteGuard<'a, T> = loom::sync::RwLockWriteGuard<'a, T>;
    pub(crate) type CondvarInner = loom::sync::Condvar;

    // Loom's locks poison like std's; a panic under loom fails the model anyway, so unwrapping
    // the poison here loses nothing.
    pub(crate) fn lock<T>(m: &MutexInner<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn read<T>(l: &RwLockInner<T>) -> RwLockReadGuard<'_, T> {
        l.read().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn write<T>(l: &RwLockInner<T>) -> RwLockWriteGuard<'_, T> {
        l.write().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn wait<'a, T>(c: &CondvarInner, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        c.wait(g).unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn notify_one(c: &CondvarInner) {
        c.notify_one();
    }
    pub(crate) fn notify_all(c: &CondvarInner) {
        c.notify_all();
    }
}

pub(crate) use imp::{MutexGuard, RwLockReadGuard, RwLockWriteGuard};

/// A mutual-exclusion lock without poisoning.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(imp::MutexInner<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(imp::MutexInner::new(value))
    }
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        imp::lock(&self.0)
    }
}

/// A readers-writer lock without poisoning.
#[derive(Debug, Default)]
pub(crate) struct RwLock<T>(imp::RwLockInner<T>);

impl<T> RwLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(imp::RwLockInner::new(value))
    }
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
        imp::read(&self.0)
    }
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
        imp::write(&self.0)
    }
}

/// A condition variable paired with [`Mutex`].
#[derive(Debug, Default)]
pub(crate) struct Condvar(imp::CondvarInner);

impl Condvar {
    pub(crate) fn new() -> Self {
        Self(imp::CondvarInner::new())
    }
    /// Releases `guard`, waits for a notification, and re-acquires the lock.
    pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        imp::wait(&self.0, guard)
    }
    pub(crate) fn notify_one(&self) {
        imp::notify_one(&self.0);
    }
    pub(crate) fn notify_all(&self) {
        imp::notify_all(&self.0);
    }
}

/// Timed waits, added for the work queue's delay loop (see [`crate::queue`]).
impl Condvar {
    /// Releases `guard`, waits for a notification or until `deadline`, whichever comes first,
    /// and re-acquires the lock. Whether the wait timed out is not reported: callers re-check
    /// their condition, as they must after any wait.
    #[cfg(not(kube_gc_loom))]
    pub(crate) fn wait_until<'a, T>(
        &self,
        mut guard: MutexGuard<'a, T>,
        deadline: std::time::Instant,
    ) -> MutexGuard<'a, T> {
        let _timed_out = self.0.wait_until(&mut guard, deadline);
        guard
    }

    /// Under loom this is a plain [`Condvar::wait`]: loom 0.7 does not model time (its own
    /// `wait_timeout` never times out), so a model must never rely on a deadline for progress.
    #[cfg(kube_gc_loom)]
    // The queue's delay loop, the only caller, is not built under loom.
    #[allow(dead_code)]
    pub(crate) fn wait_until<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        _deadline: std::time::Instant,
    ) -> MutexGuard<'a, T> {
        self.wait(guard)
    }
}
