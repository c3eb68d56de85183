//! What counting the heap costs when one thread allocates and another frees, as an informer's
//! writer and its reclaimer do: mimalloc called directly, through the `cap` crate's counter (one
//! shared counter per call, the simulator's meter until 2026-12-03), and through [`Metered`].
//!
//! ```text
//! cargo run --release -p snapinformer-arena --example meter_probe
//! ```
//!
//! One thread allocates blocks of 16-512 bytes in batches of 1,000 and hands each batch to a
//! second thread, which frees it; both run at once on the two cores. Each round runs the three
//! allocators in turn (2,000,000 blocks each), nine rounds; prints, per allocator, the median
//! and range of the two threads' CPU time per block allocated and freed (from
//! `CLOCK_THREAD_CPUTIME_ID`), and of the wall time.
//!
//! [`Metered`]: snapinformer_arena::Metered

#![allow(unsafe_code)] // Calls the allocators' `GlobalAlloc` methods directly; see each block.

use std::{
    alloc::{GlobalAlloc, Layout},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use snapinformer_arena::Metered;

const BATCH: usize = 1000;
const BATCHES: usize = 2000;
const ROUNDS: usize = 9;

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A block's layout: sizes spread over 16-512 bytes, 8-aligned.
fn layout(i: usize) -> Layout {
    Layout::from_size_align(16 + (i * 37) % 497, 8).expect("a valid layout")
}

/// One run: (CPU ns of both threads per block, wall ns per block).
fn run<A: GlobalAlloc + Sync>(a: &A) -> (f64, f64) {
    let (tx, rx) = mpsc::sync_channel::<Vec<(usize, usize)>>(8);
    let started = Instant::now();
    let (alloc_cpu, free_cpu) = thread::scope(|s| {
        let freer = s.spawn(move || {
            let before = thread_cpu();
            for batch in rx {
                for (addr, i) in batch {
                    let p = std::ptr::with_exposed_provenance_mut::<u8>(addr);
                    // SAFETY: `p` was allocated by `a` with `layout(i)` below and is freed once.
                    unsafe { a.dealloc(p, layout(i)) };
                }
            }
            thread_cpu() - before
        });
        let before = thread_cpu();
        for b in 0..BATCHES {
            let batch: Vec<(usize, usize)> = (0..BATCH)
                .map(|k| {
                    let i = b * BATCH + k;
                    // SAFETY: the layout has a non-zero size.
                    let p = unsafe { a.alloc(layout(i)) };
                    assert!(!p.is_null(), "out of memory");
                    (p.expose_provenance(), i)
                })
                .collect();
            tx.send(batch).expect("the freeing thread runs");
        }
        drop(tx);
        let alloc_cpu = thread_cpu() - before;
        (alloc_cpu, freer.join().expect("the freeing thread"))
    });
    let blocks = (BATCH * BATCHES) as f64;
    (
        (alloc_cpu + free_cpu).as_nanos() as f64 / blocks,
        started.elapsed().as_nanos() as f64 / blocks,
    )
}

fn summary(name: &str, xs: Vec<(f64, f64)>) {
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (mut cpu, mut wall): (Vec<f64>, Vec<f64>) = xs.into_iter().unzip();
    let (c, cl, ch) = med(&mut cpu);
    let (w, wl, wh) = med(&mut wall);
    println!(
        "{name:<22} CPU {c:6.1} ns per block [{cl:.1}-{ch:.1}]   wall {w:6.1} ns [{wl:.1}-{wh:.1}]"
    );
}

fn main() {
    let plain = mimalloc::MiMalloc;
    let cap = cap::Cap::new(mimalloc::MiMalloc, usize::MAX);
    let metered = Metered::new(mimalloc::MiMalloc);
    let (mut p, mut c, mut m) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        p.push(run(&plain));
        c.push(run(&cap));
        m.push(run(&metered));
        eprintln!("round {}/{ROUNDS} done", round + 1);
    }
    println!(
        "{} blocks of 16-512 B per run, allocated on one thread and freed on another, {ROUNDS} \
         runs each (median [min-max]; CPU = both threads):",
        BATCH * BATCHES
    );
    summary("mimalloc", p);
    summary("cap::Cap<mimalloc>", c);
    summary("Metered<mimalloc>", m);
    assert!(metered.allocated() < 1 << 20, "every block counted was freed");
}
