//! The counting allocator: exact live bytes whichever thread allocates or frees, a peak within
//! its stated bound. Run natively and under Miri (`cargo +nightly miri test -p
//! snapinformer-arena --test meter`).
//!
//! The checks read a process-wide count, so this file runs without libtest's harness (whose
//! threads for the other tests would allocate meanwhile): `main` runs them one after the other
//! on the main thread, and a failing check panics with its name.

use std::{alloc::System, thread};

use snapinformer_arena::Metered;

#[global_allocator]
static HEAP: Metered<System> = Metered::new(System);

/// What a peak may miss: 64 KiB for each of the 272 stripes.
const PEAK_SLACK: usize = 272 * (64 << 10);

fn a_block_is_counted_while_it_lives_and_not_after() {
    let before = HEAP.allocated();
    let block = vec![7u8; 300_000];
    assert_eq!(HEAP.allocated() - before, 300_000);
    drop(block);
    assert_eq!(HEAP.allocated(), before);
}

fn growing_and_shrinking_a_block_counts_its_new_size() {
    let before = HEAP.allocated();
    let mut v: Vec<u64> = Vec::with_capacity(10);
    for i in 0..10_000 {
        v.push(i);
    }
    assert_eq!(HEAP.allocated() - before, v.capacity() * 8);
    v.truncate(100);
    v.shrink_to_fit();
    assert_eq!(HEAP.allocated() - before, v.capacity() * 8);
    drop(v);
    assert_eq!(HEAP.allocated(), before);
}

fn blocks_freed_on_another_thread_and_threads_that_exit_keep_the_count_exact() {
    let before = HEAP.allocated();
    // Each thread allocates more than a stripe holds before it moves its count, and less, and
    // exits with its count still on its stripe.
    let made: Vec<Vec<Vec<u8>>> = (0..6)
        .map(|t| {
            thread::spawn(move || (0..20).map(|i| vec![1u8; 1000 * (t + 1) + i]).collect())
                .join()
                .expect("allocating thread")
        })
        .collect();
    let expected: usize = made
        .iter()
        .map(|m| m.capacity() * size_of::<Vec<u8>>() + m.iter().map(Vec::capacity).sum::<usize>())
        .sum();
    assert_eq!(HEAP.allocated() - before, expected + made.capacity() * size_of::<Vec<Vec<u8>>>());
    // Freed elsewhere: the freeing thread's stripe goes negative, the sum stays exact.
    thread::spawn(move || drop(made)).join().expect("freeing thread");
    assert_eq!(HEAP.allocated(), before);
}

fn threads_allocating_and_freeing_at_once_leave_the_count_where_it_started() {
    let before = HEAP.allocated();
    let rounds = if cfg!(miri) { 50 } else { 5_000 };
    let workers: Vec<_> = (0..4)
        .map(|t| {
            thread::spawn(move || {
                let mut held: Vec<Vec<u8>> = Vec::new();
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ t;
                for _ in 0..rounds {
                    let x = next(&mut x);
                    if x.is_multiple_of(3) && !held.is_empty() {
                        let i = (x as usize / 3) % held.len();
                        held.swap_remove(i);
                    } else {
                        held.push(vec![0u8; (x % 20_000) as usize + 1]);
                    }
                }
                held
            })
        })
        .collect();
    let held: Vec<Vec<Vec<u8>>> = workers.into_iter().map(|w| w.join().expect("worker")).collect();
    let live: usize = held
        .iter()
        .map(|h| h.capacity() * size_of::<Vec<u8>>() + h.iter().map(Vec::capacity).sum::<usize>())
        .sum();
    assert_eq!(HEAP.allocated() - before, live + held.capacity() * size_of::<Vec<Vec<u8>>>());
    drop(held);
    assert_eq!(HEAP.allocated(), before);
}

fn the_peak_sees_a_large_block_that_came_and_went() {
    // Run first: the process has not held anything near this size before.
    let before = HEAP.allocated();
    let size = 32 << 20;
    assert!(HEAP.peak() < before + size - PEAK_SLACK, "a fresh process's peak {}", HEAP.peak());
    let block = vec![0u8; size];
    drop(block);
    assert!(HEAP.peak() + PEAK_SLACK >= before + size, "peak {} before {before}", HEAP.peak());
    assert!(HEAP.peak() <= before + size + PEAK_SLACK, "peak {} before {before}", HEAP.peak());
    assert_eq!(HEAP.allocated(), before);
}

fn threads_beyond_the_stripes_share_them_and_the_count_stays_exact() {
    let before = HEAP.allocated();
    // More threads than stripes: the later ones share stripes, with atomic adds. Two at a
    // time, so that threads sharing a stripe count on it at once.
    let mut held: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for t in 0..160 {
        let pair =
            [0, 1].map(|k| thread::spawn(move || (vec![1u8; 70_000 + t], vec![2u8; 10 + k])));
        for h in pair {
            held.push(h.join().expect("thread"));
        }
    }
    let live: usize = held.iter().map(|(a, b)| a.capacity() + b.capacity()).sum();
    assert_eq!(HEAP.allocated() - before, live + held.capacity() * size_of::<(Vec<u8>, Vec<u8>)>());
    drop(held);
    assert_eq!(HEAP.allocated(), before);
}

/// The next value of a xorshift generator (not for security).
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Allocates and frees blocks of 1-3,000 bytes at random, `ops` times, and frees the rest.
fn churn(seed: u64, ops: usize) {
    let mut x = seed | 1;
    let mut held: Vec<Vec<u8>> = Vec::new();
    for _ in 0..ops {
        let x = next(&mut x);
        if x.is_multiple_of(2) && !held.is_empty() {
            held.pop();
        } else {
            held.push(vec![0u8; (x % 3000) as usize + 1]);
        }
    }
}

fn later_threads_never_write_a_stripe_an_early_thread_owns() {
    let before = HEAP.allocated();
    let ops = if cfg!(miri) { 20 } else { 2_000 };
    // 17 waves of 16 threads: more threads than there are stripes of any kind, each churning
    // while this (early) thread churns on its own stripe. A later thread dealt this thread's
    // stripe would lose some of the two threads' updates.
    // (Joined one by one rather than in a scope: a scoped thread may still be freeing its own
    // bookkeeping when the scope returns, a join waits for the thread's end.)
    for wave in 0..17u64 {
        let later: Vec<_> =
            (0..16).map(|k| thread::spawn(move || churn(wave * 16 + k, ops))).collect();
        churn(1_000 + wave, ops);
        for h in later {
            h.join().expect("churning thread");
        }
    }
    assert_eq!(HEAP.allocated(), before);
}

fn the_peak_never_falls() {
    let first = HEAP.peak();
    let block = vec![0u8; 1 << 20];
    let second = HEAP.peak();
    drop(block);
    let _ = HEAP.allocated();
    assert!(second >= first);
    assert!(HEAP.peak() >= second);
}

fn main() {
    let checks: [(&str, fn()); 8] = [
        (
            "the_peak_sees_a_large_block_that_came_and_went",
            the_peak_sees_a_large_block_that_came_and_went,
        ),
        (
            "a_block_is_counted_while_it_lives_and_not_after",
            a_block_is_counted_while_it_lives_and_not_after,
        ),
        (
            "growing_and_shrinking_a_block_counts_its_new_size",
            growing_and_shrinking_a_block_counts_its_new_size,
        ),
        (
            "blocks_freed_on_another_thread_and_threads_that_exit_keep_the_count_exact",
            blocks_freed_on_another_thread_and_threads_that_exit_keep_the_count_exact,
        ),
        (
            "threads_allocating_and_freeing_at_once_leave_the_count_where_it_started",
            threads_allocating_and_freeing_at_once_leave_the_count_where_it_started,
        ),
        (
            "threads_beyond_the_stripes_share_them_and_the_count_stays_exact",
            threads_beyond_the_stripes_share_them_and_the_count_stays_exact,
        ),
        (
            "later_threads_never_write_a_stripe_an_early_thread_owns",
            later_threads_never_write_a_stripe_an_early_thread_owns,
        ),
        ("the_peak_never_falls", the_peak_never_falls),
    ];
    // Printing allocates: each line is written between checks, never during one.
    println!("running {} checks", checks.len());
    for (name, check) in checks {
        check();
        println!("check {name} ... ok");
    }
}
