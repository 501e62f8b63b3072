use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::task::Wake;
use std::task::{Context, Poll};
use std::thread;

use super::*;

/// Generous bound for "eventually": only a hang reaches it, never a slow machine.
const EVENTUALLY: Duration = Duration::from_secs(10);

/// Runs `f` on a thread and returns its result, failing the test if it takes longer than
/// [`EVENTUALLY`] (instead of hanging the test binary).
fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(EVENTUALLY).unwrap_or_else(|_| panic!("{what}: did not finish"))
}

/// Spins until `condition` holds, failing the test after [`EVENTUALLY`].
fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < EVENTUALLY, "{what}: never happened");
        thread::yield_now();
    }
}

/// A waker that counts its wakes.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl CountingWaker {
    fn wakes(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Arc<CountingWaker>) -> Poll<F::Output> {
    let waker = Waker::from(Arc::clone(waker));
    Pin::new(future).poll(&mut Context::from_waker(&waker))
}

fn drain<T: Clone + Eq + Hash + Send + 'static>(queue: &WorkQueue<T>) -> Vec<T> {
    let mut items = Vec::new();
    while !queue.is_empty() {
        let item = queue.get().expect("queue is not empty");
        queue.done(&item);
        items.push(item);
    }
    items
}

#[test]
fn queue_should_collapse_duplicates() {
    let queue = WorkQueue::new("test");
    queue.add(1);
    queue.add(2);
    queue.add(1);
    queue.add(1);
    assert_eq!(queue.len(), 2);
    assert_eq!(drain(&queue), [1, 2]);
    assert_eq!(queue.stats().adds_total, 2);
}

#[test]
fn queue_should_hand_out_items_in_fifo_order() {
    let queue = WorkQueue::new("test");
    for i in 0..10 {
        queue.add(i);
    }
    assert_eq!(drain(&queue), (0..10).collect::<Vec<_>>());
}

#[test]
fn queue_should_not_requeue_a_processing_item_until_done() {
    let queue = WorkQueue::new("test");
    queue.add("x");
    assert_eq!(queue.get(), Some("x"));
    queue.add("x");
    queue.add("x");
    assert_eq!(queue.len(), 0, "x is processing: its re-add waits for done");
    assert_eq!(queue.stats().processing, 1);
    queue.done(&"x");
    assert_eq!(queue.len(), 1, "x was re-added while processing: done queues it once");
    assert_eq!(queue.get(), Some("x"));
    queue.done(&"x");
    assert!(queue.is_empty(), "x was not re-added the second time");
}

#[test]
fn queue_should_never_hand_an_item_to_two_getters_at_once() {
    const ITEMS: usize = 8;
    const ADDS_PER_PRODUCER: usize = 2_000;
    let queue = Arc::new(WorkQueue::new("test"));
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let violations = Arc::new(AtomicUsize::new(0));
    let processed = Arc::new(AtomicUsize::new(0));

    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, in_flight) = (Arc::clone(&queue), Arc::clone(&in_flight));
            let (violations, processed) = (Arc::clone(&violations), Arc::clone(&processed));
            thread::spawn(move || {
                while let Some(item) = queue.get() {
                    if !in_flight.lock().unwrap().insert(item) {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    thread::yield_now();
                    in_flight.lock().unwrap().remove(&item);
                    processed.fetch_add(1, Ordering::SeqCst);
                    queue.done(&item);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                for i in 0..ADDS_PER_PRODUCER {
                    queue.add(i % ITEMS);
                }
            })
        })
        .collect();
    within("producers", move || producers.into_iter().for_each(|p| p.join().unwrap()));
    queue.shut_down();
    within("workers", move || workers.into_iter().for_each(|w| w.join().unwrap()));

    assert_eq!(violations.load(Ordering::SeqCst), 0, "an item was handed out twice at once");
    assert!(processed.load(Ordering::SeqCst) >= ITEMS, "every item was processed");
    let stats = queue.stats();
    assert_eq!((stats.depth, stats.processing), (0, 0), "all drained and done");
}

#[test]
fn shut_down_should_wake_blocked_getters() {
    let queue = Arc::new(WorkQueue::<u32>::new("test"));
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let queue = Arc::clone(&queue);
            thread::spawn(move || queue.get())
        })
        .collect();
    wait_for("getters block", || queue.core.state.lock().sleeping_getters == 3);
    queue.shut_down();
    let results = within("getters", move || {
        getters.into_iter().map(|g| g.join().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(results, [None, None, None]);
}

#[test]
fn add_should_wake_a_blocked_getter() {
    let queue = Arc::new(WorkQueue::new("test"));
    let getter = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || queue.get())
    };
    wait_for("getter blocks", || queue.core.state.lock().sleeping_getters == 1);
    queue.add(7);
    assert_eq!(within("getter", move || getter.join().unwrap()), Some(7));
}

#[test]
fn shut_down_should_drain_queued_items_then_report_shutdown() {
    let queue = WorkQueue::new("test");
    queue.add("a");
    queue.add("b");
    queue.shut_down();
    assert!(queue.is_shutting_down());
    queue.add("c");
    assert_eq!(queue.len(), 2, "adds after shutdown are ignored");
    assert_eq!(queue.get(), Some("a"));
    assert_eq!(queue.get(), Some("b"));
    assert_eq!(queue.get(), None);
}

#[test]
fn done_after_shut_down_should_still_requeue_an_item_re_added_before_it() {
    let queue = WorkQueue::new("test");
    queue.add("x");
    assert_eq!(queue.get(), Some("x"));
    queue.add("x");
    queue.shut_down();
    queue.done(&"x");
    assert_eq!(queue.get(), Some("x"));
    queue.done(&"x");
    assert_eq!(queue.get(), None);
}

#[test]
fn shut_down_should_drop_delayed_items() {
    let queue = WorkQueue::new("test");
    queue.add_after("later", Duration::from_secs(3600));
    assert_eq!(queue.stats().waiting, 1);
    queue.shut_down();
    assert_eq!(queue.stats().waiting, 0);
    queue.add_after("after", Duration::ZERO);
    assert_eq!(queue.get(), None);
}

#[test]
fn shut_down_with_drain_should_wait_until_processing_items_are_done() {
    let queue = Arc::new(WorkQueue::new("test"));
    queue.add("x");
    assert_eq!(queue.get(), Some("x"));
    let (tx, rx) = mpsc::channel();
    let drainer = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || {
            queue.shut_down_with_drain();
            tx.send(()).unwrap();
        })
    };
    wait_for("shutdown starts", || queue.is_shutting_down());
    // Cannot fail falsely: a correct drain never returns while x is processing.
    assert!(rx.recv_timeout(Duration::from_millis(20)).is_err(), "drain returned early");
    queue.done(&"x");
    rx.recv_timeout(EVENTUALLY).expect("drain returns once x is done");
    drainer.join().unwrap();
}

#[test]
fn add_after_with_zero_delay_should_add_at_once() {
    let queue = WorkQueue::new("test");
    queue.add_after("now", Duration::ZERO);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.stats().retries_total, 1);
}

#[test]
fn add_after_should_keep_the_earlier_ready_time() {
    let base = Instant::now();
    for (i, first_later) in [true, false].into_iter().enumerate() {
        let queue = WorkQueue::new("test");
        let core = &queue.core;
        let mut state = core.state.lock();
        let (early, late) = (base + Duration::from_millis(10), base + Duration::from_secs(3600));
        let (first, second) = if first_later { (late, early) } else { (early, late) };
        core.insert_delayed(&mut state, "x", first);
        core.insert_delayed(&mut state, "x", second);
        assert_eq!(state.waiting_ready_at.len(), 1, "#{i}: one valid ready time");

        let mut wakeups = Wakeups::new();
        let next = core.promote_ready(&mut state, base + Duration::from_millis(20), &mut wakeups);
        assert_eq!(state.queue, ["x"], "#{i}: x is due at the earlier time");
        assert!(state.waiting_ready_at.is_empty(), "#{i}: x no longer waits");

        let _ = core.take_next(&mut state);
        state.processing.clear();
        core.promote_ready(&mut state, base + Duration::from_secs(7200), &mut wakeups);
        assert!(state.queue.is_empty(), "#{i}: the later entry was stale, got {next:?}");
    }
}

#[test]
fn delayed_items_should_become_ready_in_ready_time_order() {
    let base = Instant::now();
    let queue = WorkQueue::new("test");
    let core = &queue.core;
    let mut state = core.state.lock();
    for (item, ms) in [("c", 30), ("a", 10), ("b", 20), ("d", 20)] {
        core.insert_delayed(&mut state, item, base + Duration::from_millis(ms));
    }
    let mut wakeups = Wakeups::new();
    let next = core.promote_ready(&mut state, base + Duration::from_millis(25), &mut wakeups);
    assert_eq!(state.queue, ["a", "b", "d"], "equal ready times keep add order");
    assert_eq!(next, Some(base + Duration::from_millis(30)));
}

#[test]
fn add_after_should_make_an_item_ready_without_polling() {
    let queue = Arc::new(WorkQueue::new("test"));
    let getter = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || queue.get())
    };
    wait_for("getter blocks", || queue.core.state.lock().sleeping_getters == 1);
    queue.add_after("soon", Duration::from_millis(5));
    assert_eq!(within("delayed get", move || getter.join().unwrap()), Some("soon"));
}

#[test]
fn dropping_the_queue_should_stop_its_delay_thread() {
    let queue = WorkQueue::new("test");
    queue.add_after("never", Duration::from_secs(3600));
    let core = Arc::clone(&queue.core);
    assert_eq!(Arc::strong_count(&core), 3, "handle, delay thread, test");
    within("drop", move || drop(queue));
    assert_eq!(Arc::strong_count(&core), 1, "the delay thread has exited");
}

#[test]
fn rate_limiter_should_back_off_exponentially_per_item_up_to_the_cap() {
    let limiter = RateLimiter::new(RateLimiterConfig::default());
    let now = Instant::now();
    for i in 0..18 {
        let want = Duration::from_millis(5) * 2u32.pow(i);
        let got = limiter.when_at(&"x", now + Duration::from_secs(u64::from(i)));
        assert_eq!(got, want, "#{i}: got {got:?}, want {want:?}");
    }
    // 5ms * 2^18 = 1310.72 s > 1000 s.
    for i in 18u32..200 {
        let got = limiter.when_at(&"x", now + Duration::from_secs(u64::from(i)));
        assert_eq!(got, Duration::from_secs(1000), "#{i}: got {got:?}, want the cap");
    }
    assert_eq!(limiter.num_requeues(&"x"), 200);
    assert_eq!(limiter.when_at(&"y", now), Duration::from_millis(5), "y has its own count");
}

#[test]
fn forget_should_reset_the_backoff() {
    let limiter = RateLimiter::new(RateLimiterConfig::default());
    let now = Instant::now();
    for _ in 0..3 {
        limiter.when_at(&"x", now);
    }
    assert_eq!(limiter.when_at(&"x", now), Duration::from_millis(40));
    limiter.forget(&"x");
    assert_eq!(limiter.num_requeues(&"x"), 0);
    assert_eq!(limiter.when_at(&"x", now), Duration::from_millis(5));
}

#[test]
fn token_bucket_should_allow_a_burst_then_space_requests_at_its_rate() {
    let limiter = RateLimiter::new(RateLimiterConfig::default().with_base_delay(Duration::ZERO));
    let t0 = Instant::now();
    for i in 0..100 {
        assert_eq!(limiter.when_at(&i, t0), Duration::ZERO, "#{i}: within the burst");
    }
    for (i, want_ms) in [(100, 100), (101, 200), (102, 300)] {
        let got = limiter.when_at(&i, t0);
        assert_eq!(got, Duration::from_millis(want_ms), "#{i}: got {got:?}");
    }
    // One second refills 10 tokens: 3 pay the debt, 7 are free, then 100 ms spacing again.
    let t1 = t0 + Duration::from_secs(1);
    for i in 0..7 {
        assert_eq!(limiter.when_at(&(1000 + i), t1), Duration::ZERO, "#{i}: refilled");
    }
    assert_eq!(limiter.when_at(&2000, t1), Duration::from_millis(100));
}

#[test]
fn rate_limiter_should_return_the_larger_of_backoff_and_bucket_delay() {
    let limiter = RateLimiter::new(RateLimiterConfig::default().with_bucket(10.0, 1));
    let t0 = Instant::now();
    assert_eq!(limiter.when_at(&"x", t0), Duration::from_millis(5), "backoff > free token");
    assert_eq!(limiter.when_at(&"y", t0), Duration::from_millis(100), "bucket > 5 ms");
}

#[test]
fn rate_limiter_should_not_overflow_on_huge_settings() {
    let config = RateLimiterConfig::default()
        .with_base_delay(Duration::MAX)
        .with_max_delay(Duration::MAX)
        .with_bucket(f64::INFINITY, 0);
    let limiter = RateLimiter::new(config);
    let now = Instant::now();
    assert_eq!(limiter.when_at(&"x", now), Duration::MAX);
    assert_eq!(limiter.when_at(&"x", now), Duration::MAX);
}

#[test]
#[should_panic(expected = "qps must be positive")]
fn rate_limiter_should_reject_a_zero_rate() {
    let _ = RateLimiter::<u32>::new(RateLimiterConfig::default().with_bucket(0.0, 100));
}

#[test]
fn num_requeues_should_count_rate_limited_adds_until_forget() {
    let queue = WorkQueue::with_rate_limiter("test", RateLimiterConfig::immediate());
    for _ in 0..3 {
        queue.add_rate_limited("x");
    }
    assert_eq!(queue.num_requeues(&"x"), 3);
    assert_eq!(queue.len(), 1, "immediate limiter adds at once; duplicates collapse");
    assert_eq!(queue.stats().retries_total, 3);
    queue.forget(&"x");
    assert_eq!(queue.num_requeues(&"x"), 0);
}

#[test]
fn add_rate_limited_should_delay_by_the_limiter() {
    let queue = WorkQueue::new("test");
    queue.add_rate_limited("x");
    assert_eq!(queue.stats().waiting, 1, "the first retry waits 5 ms");
    assert_eq!(queue.num_requeues(&"x"), 1);
    let queue = Arc::new(queue);
    let got = within("rate-limited get", {
        let queue = Arc::clone(&queue);
        move || queue.get()
    });
    assert_eq!(got, Some("x"));
}

#[test]
fn get_async_should_resolve_to_a_queued_item() {
    let queue = WorkQueue::new("test");
    queue.add(1);
    assert_eq!(futures::executor::block_on(queue.get_async()), Some(1));
    assert_eq!(queue.stats().processing, 1);
}

#[test]
fn get_async_should_be_woken_by_add() {
    let queue = WorkQueue::new("test");
    let waker = Arc::new(CountingWaker::default());
    let mut future = queue.get_async();
    assert!(poll_once(&mut future, &waker).is_pending());
    queue.add(1);
    assert_eq!(waker.wakes(), 1);
    assert_eq!(poll_once(&mut future, &waker), Poll::Ready(Some(1)));
}

#[test]
fn get_async_should_resolve_to_none_after_shut_down() {
    let queue = WorkQueue::<u32>::new("test");
    let waker = Arc::new(CountingWaker::default());
    let mut future = queue.get_async();
    assert!(poll_once(&mut future, &waker).is_pending());
    queue.shut_down();
    assert_eq!(waker.wakes(), 1);
    assert_eq!(poll_once(&mut future, &waker), Poll::Ready(None));
}

#[test]
fn dropped_woken_get_future_should_pass_the_wakeup_on() {
    let queue = WorkQueue::new("test");
    let (first_waker, second_waker) = (Arc::default(), Arc::default());
    let mut first = queue.get_async();
    let mut second = queue.get_async();
    assert!(poll_once(&mut first, &first_waker).is_pending());
    assert!(poll_once(&mut second, &second_waker).is_pending());
    queue.add(1);
    assert_eq!((first_waker.wakes(), second_waker.wakes()), (1, 0));
    drop(first);
    assert_eq!(second_waker.wakes(), 1);
    assert_eq!(poll_once(&mut second, &second_waker), Poll::Ready(Some(1)));
}

#[test]
fn get_async_should_wait_for_a_delayed_item() {
    let queue = Arc::new(WorkQueue::new("test"));
    queue.add_after("soon", Duration::from_millis(5));
    let got = within("async delayed get", {
        let queue = Arc::clone(&queue);
        move || futures::executor::block_on(queue.get_async())
    });
    assert_eq!(got, Some("soon"));
}

#[test]
fn get_async_should_serve_tokio_workers() {
    const ITEMS: u32 = 1_000;
    let queue = Arc::new(WorkQueue::new("test"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, seen) = (Arc::clone(&queue), Arc::clone(&seen));
            runtime.spawn(async move {
                while let Some(item) = queue.get_async().await {
                    seen.lock().unwrap().push(item);
                    queue.done(&item);
                }
            })
        })
        .collect();
    let producer = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || (0..ITEMS).for_each(|i| queue.add(i)))
    };
    within("producer", move || producer.join().unwrap());
    queue.shut_down();
    within("tokio workers", move || {
        runtime.block_on(async {
            for worker in workers {
                worker.await.unwrap();
            }
        })
    });
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_unstable();
    assert_eq!(seen, (0..ITEMS).collect::<Vec<_>>());
}

#[test]
fn mixed_blocking_and_async_getters_should_both_be_served() {
    let queue = Arc::new(WorkQueue::new("test"));
    let blocking = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || queue.get())
    };
    wait_for("blocking getter blocks", || queue.core.state.lock().sleeping_getters == 1);
    let waker = Arc::new(CountingWaker::default());
    let mut future = queue.get_async();
    assert!(poll_once(&mut future, &waker).is_pending());
    queue.add(1);
    queue.add(2);
    let from_thread = within("blocking getter", move || blocking.join().unwrap());
    wait_for("async getter woken", || waker.wakes() > 0);
    let Poll::Ready(from_future) = poll_once(&mut future, &waker) else {
        panic!("the async getter was woken but has nothing");
    };
    let mut got = [from_thread, from_future];
    got.sort_unstable();
    assert_eq!(got, [Some(1), Some(2)]);
}

#[test]
fn stats_should_count_adds_retries_and_sizes() {
    let queue =
        WorkQueue::with_rate_limiter("garbage_collector_test", RateLimiterConfig::immediate());
    queue.add(1);
    queue.add(1);
    queue.add(2);
    queue.add_rate_limited(3);
    queue.add_after(4, Duration::from_secs(3600));
    assert_eq!(queue.get(), Some(1));
    let want = QueueStats {
        depth: 2,
        urgent: 0,
        processing: 1,
        waiting: 1,
        adds_total: 3,
        retries_total: 2,
        // Not measured without set_durations.
        unfinished_work: Duration::ZERO,
        longest_running: Duration::ZERO,
    };
    assert_eq!(queue.stats(), want);
    assert_eq!(queue.name(), "garbage_collector_test");
    assert!(format!("{queue:?}").contains("garbage_collector_test"));
}

#[test]
fn add_while_delayed_should_queue_at_once_and_keep_the_delayed_add() {
    let queue = Arc::new(WorkQueue::new("test"));
    queue.add_after("x", Duration::from_millis(5));
    queue.add("x");
    assert_eq!(queue.get(), Some("x"));
    queue.done(&"x");
    let got = within("delayed re-add", {
        let queue = Arc::clone(&queue);
        move || queue.get()
    });
    assert_eq!(got, Some("x"), "the delayed add still fires, as upstream");
}

#[test]
fn urgent_items_should_be_handed_out_first() {
    let q = WorkQueue::with_rate_limiter("t", RateLimiterConfig::immediate());
    q.add(1);
    q.add(2);
    q.add_urgent(3);
    q.add_urgent(1); // already waiting in the normal lane: stays there
    assert_eq!(q.pending(), [3, 1, 2]);
    let order: Vec<i32> = (0..3).map(|_| q.get().unwrap()).collect();
    assert_eq!(order, [3, 1, 2]);
}

#[test]
fn urgent_first_items_should_go_before_other_urgent_items() {
    let q = WorkQueue::with_rate_limiter("t", RateLimiterConfig::immediate());
    q.add(1);
    q.add_urgent(2);
    q.add_urgent(3);
    q.add_urgent_first(4);
    q.add_urgent_first(5);
    q.add_urgent_first(2); // already waiting in the urgent lane: stays where it is
    assert_eq!(q.pending(), [5, 4, 2, 3, 1]);
    assert_eq!((q.stats().depth, q.stats().urgent), (5, 4));
    let order: Vec<i32> = (0..5).map(|_| q.get().unwrap()).collect();
    assert_eq!(order, [5, 4, 2, 3, 1]);
}

#[test]
fn urgent_lane_should_not_starve_the_normal_lane() {
    let q = WorkQueue::with_rate_limiter("t", RateLimiterConfig::immediate());
    q.add(-1);
    for i in 0..(URGENT_BURST as i32 * 3) {
        q.add_urgent(i);
    }
    let mut got = Vec::new();
    while let Some(i) = (!q.is_empty()).then(|| q.get().unwrap()) {
        q.done(&i);
        got.push(i);
    }
    let normal_at = got.iter().position(|&i| i == -1).unwrap();
    assert_eq!(normal_at, URGENT_BURST as usize, "normal item waited past the burst: {got:?}");
    assert_eq!(got.len(), URGENT_BURST as usize * 3 + 1);
}

/// Hands out one item and marks it done, after adding `newer` to the front of the urgent lane.
fn hand_out_one_under_a_flood(q: &WorkQueue<i32>, newer: i32) -> i32 {
    q.add_urgent_first(newer);
    let item = q.get().unwrap();
    q.done(&item);
    item
}

#[test]
fn a_flood_of_urgent_first_items_should_not_starve_the_oldest() {
    let q = WorkQueue::with_rate_limiter("t", RateLimiterConfig::immediate());
    q.add_urgent_first(0);
    q.add_urgent(1);
    let mut handed_out = Vec::new();
    for newer in 2..(2 + 4 * URGENT_OLDEST_EVERY as i32) {
        handed_out.push(hand_out_one_under_a_flood(&q, newer));
    }
    // The newest goes first, but every URGENT_OLDEST_EVERY-th turn is the oldest's: 0 (the
    // oldest of add_urgent_first's part), then 1 (add_urgent's), then the flood's oldest still
    // waiting: the one added on 0's turn, which went to 0 rather than to it.
    let turn = |item: i32| handed_out.iter().position(|&got| got == item);
    let every = URGENT_OLDEST_EVERY as usize;
    assert_eq!(turn(0), Some(every - 1), "the oldest waited past its turn: {handed_out:?}");
    assert_eq!(turn(1), Some(2 * every - 1), "add_urgent's item starved: {handed_out:?}");
    let added_on_0s_turn = 2 + every as i32 - 1;
    assert_eq!(turn(added_on_0s_turn), Some(3 * every - 1), "starved: {handed_out:?}");
    assert_eq!(handed_out[0], 2, "otherwise the newest goes first");
    assert_eq!(handed_out[1], 3);
}

#[test]
fn urgent_re_add_while_processing_should_requeue_urgently_at_done() {
    let q = WorkQueue::with_rate_limiter("t", RateLimiterConfig::immediate());
    q.add(7);
    let item = q.get().unwrap();
    q.add(8);
    q.add_urgent(7); // processing: re-enters at done, urgent
    assert_eq!(q.pending(), [8]);
    q.done(&item);
    assert_eq!(q.pending(), [7, 8]);
    // Duplicates still collapse across lanes.
    q.add(7);
    q.add_urgent(8);
    assert_eq!(q.len(), 2);
}

mod durations {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::super::{QueueDurations, WorkQueue};

    #[derive(Default)]
    struct Recorded {
        queued: Mutex<Vec<Duration>>,
        worked: Mutex<Vec<Duration>>,
    }

    impl QueueDurations for Recorded {
        fn queued(&self, waited: Duration) {
            self.queued.lock().unwrap().push(waited);
        }
        fn worked(&self, took: Duration) {
            self.worked.lock().unwrap().push(took);
        }
    }

    #[test]
    fn waits_and_work_are_measured_as_client_go_measures_them() {
        let queue = WorkQueue::new("t");
        let recorded = std::sync::Arc::new(Recorded::default());
        queue.set_durations(recorded.clone());
        queue.add("a");
        std::thread::sleep(Duration::from_millis(20));
        queue.add("a"); // collapsed: the wait still counts from the first add
        let item = queue.get().unwrap();
        let waited = recorded.queued.lock().unwrap().clone();
        assert_eq!(waited.len(), 1);
        assert!(waited[0] >= Duration::from_millis(20), "{waited:?}");
        std::thread::sleep(Duration::from_millis(20));
        let stats = queue.stats();
        assert!(stats.unfinished_work >= Duration::from_millis(20), "{stats:?}");
        assert_eq!(stats.unfinished_work, stats.longest_running, "one item in flight");
        queue.add("a"); // re-added while processing: queued again at done, its wait from now
        std::thread::sleep(Duration::from_millis(10));
        queue.done(&item);
        let worked = recorded.worked.lock().unwrap().clone();
        assert_eq!(worked.len(), 1);
        assert!(worked[0] >= Duration::from_millis(20), "{worked:?}");
        assert_eq!(queue.stats().unfinished_work, Duration::ZERO);
        let again = queue.get().unwrap();
        let waited = recorded.queued.lock().unwrap().clone();
        assert_eq!(waited.len(), 2);
        assert!(
            waited[1] >= Duration::from_millis(10) && waited[1] < worked[0],
            "the re-add's wait counts from the re-add: {waited:?}, worked {worked:?}"
        );
        queue.done(&again);
    }

    #[test]
    fn items_already_queued_are_measured_from_the_start_of_measuring() {
        let queue = WorkQueue::new("t");
        queue.add(1);
        queue.add(2);
        let held = queue.get().unwrap();
        let recorded = std::sync::Arc::new(Recorded::default());
        queue.set_durations(recorded.clone());
        assert!(queue.stats().longest_running < Duration::from_secs(1));
        queue.done(&held);
        let next = queue.get().unwrap();
        queue.done(&next);
        assert_eq!(recorded.worked.lock().unwrap().len(), 2);
        assert_eq!(recorded.queued.lock().unwrap().len(), 1);
    }
}
