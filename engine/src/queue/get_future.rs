//! [`WorkQueue::get_async`]'s future: takes the next item, or leaves its waker with the queue.

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::state::{Wakeups, wake_all};
use super::{AsyncWaiter, State, WorkQueue};

/// The future of [`WorkQueue::get_async`]: resolves to the next item, or `None` once the queue
/// is shut down and empty.
///
/// It registers its [`Waker`] with the queue while pending. Dropped after being woken but
/// before taking an item, it passes the wakeup on to another getter.
#[must_use = "futures do nothing unless polled"]
pub struct GetFuture<'a, T> {
    pub(super) queue: &'a WorkQueue<T>,
    /// Our registration in `State::async_waiters`, once we have returned `Pending`.
    pub(super) waiter: Option<u64>,
    /// Set once we returned `Ready`.
    pub(super) finished: bool,
}

impl<T: Clone + Eq + Hash + Send + 'static> Future for GetFuture<'_, T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.finished, "GetFuture polled after completion");
        let core = &*this.queue.core;
        let mut wakeups = Wakeups::new();
        let mut state = core.state.lock();
        core.promote_due(&mut state, &mut wakeups);
        let poll = match core.take_next(&mut state) {
            Some(item) => Poll::Ready(Some(item)),
            None if state.shutting_down => Poll::Ready(None),
            None => {
                register(&mut state, &mut this.waiter, cx.waker());
                Poll::Pending
            }
        };
        if poll.is_ready() {
            this.finished = true;
            if let Some(id) = this.waiter.take() {
                state.remove_waiter(id);
            }
        }
        drop(state);
        wake_all(wakeups);
        poll
    }
}

/// Registers (or refreshes) a pending future's waker; one woken earlier registers again at
/// the back.
fn register<T>(state: &mut State<T>, waiter: &mut Option<u64>, waker: &Waker) {
    let id = *waiter.get_or_insert_with(|| {
        let id = state.next_waiter_id;
        state.next_waiter_id += 1;
        id
    });
    match state.async_waiters.iter_mut().find(|registered| registered.id == id) {
        Some(registered) => registered.waker.clone_from(waker),
        None => state.async_waiters.push_back(AsyncWaiter { id, waker: waker.clone() }),
    }
}

impl<T> Drop for GetFuture<'_, T> {
    fn drop(&mut self) {
        let Some(id) = self.waiter.take() else { return };
        let core = &*self.queue.core;
        let mut wakeups = Wakeups::new();
        let mut state = core.state.lock();
        if !state.remove_waiter(id) && state.queued() > 0 {
            // A notifier took our registration for an item we will now never take.
            core.notify_one_getter(&mut state, &mut wakeups);
        }
        drop(state);
        wake_all(wakeups);
    }
}

impl<T> fmt::Debug for GetFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GetFuture")
            .field("queue", &self.queue.core.name)
            .field("waiter", &self.waiter)
            .field("finished", &self.finished)
            .finish()
    }
}
