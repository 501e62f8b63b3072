//! The counting allocator counts what is live. Alone in its own test binary, and one test
//! function, so that nothing else allocates or frees meanwhile.

use kube_gc_bench::alloc::{AllocSnapshot, live_bytes};

kube_gc_bench::counting_allocator!();

#[test]
fn live_bytes_should_count_live_allocations_on_every_thread() {
    // One thread: exact.
    let before = AllocSnapshot::now();
    let v: Vec<u8> = Vec::with_capacity(1 << 20);
    let during = before.since();
    assert_eq!(during.live_bytes, 1 << 20);
    assert_eq!(during.calls, 1);
    drop(v);
    assert_eq!(live_bytes(), before.live_bytes);

    // Several threads, each on its own stripe: the sum still sees every block.
    let before = live_bytes();
    let kept: Vec<Vec<u8>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| vec![0u8; 1 << 16])).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(live_bytes() - before >= 4 << 16);
    drop(kept);
}
