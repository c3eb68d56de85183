//! A global allocator wrapper that counts the bytes allocated and not yet freed, and their peak,
//! without a shared counter per call.

#![allow(unsafe_code)] // Implementing `GlobalAlloc` is unsafe by definition; see each block.

use std::{
    alloc::{GlobalAlloc, Layout},
    cell::Cell,
    sync::atomic::{AtomicIsize, AtomicUsize, Ordering},
};

/// Stripes the process's first threads get one each, to themselves.
const OWN_STRIPES: usize = 256;

/// Stripes the later threads share (never one of the first threads': those are written without
/// a locked instruction, and a second writer would lose updates).
const SHARED_STRIPES: usize = 16;

const STRIPES: usize = OWN_STRIPES + SHARED_STRIPES;

/// A stripe whose net count reaches this many bytes, either way, is moved into the global
/// count, where the peak is kept.
const FLUSH: isize = 64 << 10;

/// One stripe, on a cache line pair of its own (the adjacent-line prefetcher pairs lines).
#[repr(align(128))]
struct Stripe(AtomicIsize);

static STRIPE: [Stripe; STRIPES] = [const { Stripe(AtomicIsize::new(0)) }; STRIPES];

/// What the stripes have moved into the global count: the live bytes but for what the stripes
/// still hold.
static FLUSHED: AtomicIsize = AtomicIsize::new(0);

/// The largest global count seen (after a stripe's move, or when [`Metered::allocated`] read).
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// How many threads have been dealt a stripe.
static DEALT: AtomicUsize = AtomicUsize::new(0);

/// A thread's stripe index before the thread has been dealt one.
const UNDEALT: usize = usize::MAX;

thread_local! {
    // This thread's stripe (an index below `OWN_STRIPES` is the thread's alone).
    // Const-initialized and without `Drop`: reading it never allocates or registers a
    // destructor, so the allocator may use it at any point of a thread's life. A thread's
    // stripe outlives the thread, and so does its count.
    static MINE: Cell<usize> = const { Cell::new(UNDEALT) };
}

/// A global allocator that counts the bytes its callers asked for and have not freed, and their
/// peak, and passes every call to the allocator it wraps.
///
/// Counting with one shared atomic per call (as the `cap` crate does) makes every allocation
/// and free in the process a read-modify-write of the same cache line: a writer thread that
/// allocates while a reclaimer thread frees passes that line back and forth at each call. Here
/// each of the process's first 256 threads counts on a stripe of its own, with a plain load and
/// store (later threads share 16 other stripes, with an atomic add), and a stripe moves its count
/// into the shared total only when it has gathered 64 KiB either way. A stripe, and its count,
/// outlive its thread.
///
/// - [`allocated`](Metered::allocated) is the shared total plus every stripe: exact in a quiet
///   process; while threads allocate, a stripe being moved (at most 64 KiB) may be missed for
///   that moment.
/// - [`peak`](Metered::peak) is the largest shared total seen at a move or at a read of
///   [`allocated`](Metered::allocated); it can differ from the true peak by what the stripes
///   held at that moment, at most 64 KiB per stripe in use (17 MiB with 272 threads or more).
///
/// The counts are the process's: install one `Metered` as the global allocator.
///
/// ```
/// #[global_allocator]
/// static HEAP: snapinformer_arena::Metered<std::alloc::System> =
///     snapinformer_arena::Metered::new(std::alloc::System);
/// # fn main() {
/// let before = HEAP.allocated();
/// let v = vec![0u8; 1 << 20];
/// assert_eq!(HEAP.allocated() - before, 1 << 20);
/// # drop(v);
/// # }
/// ```
#[derive(Debug, Default)]
pub struct Metered<A> {
    inner: A,
}

impl<A> Metered<A> {
    /// Wraps `inner`, which serves every call.
    pub const fn new(inner: A) -> Self {
        Metered { inner }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// Bytes allocated and not yet freed, process-wide, as requested (the inner allocator's
    /// rounding is not in them). Exact at the moment each stripe is read.
    pub fn allocated(&self) -> usize {
        let held: isize = STRIPE.iter().map(|s| s.0.load(Ordering::Relaxed)).sum();
        let live = (FLUSHED.load(Ordering::Relaxed) + held).max(0) as usize;
        PEAK.fetch_max(live, Ordering::Relaxed);
        live
    }

    /// The largest [`allocated`](Self::allocated) seen since the process started (see the type's
    /// docs for how close it is).
    pub fn peak(&self) -> usize {
        PEAK.load(Ordering::Relaxed)
    }
}

/// Adds `delta` bytes to this thread's stripe, moving the stripe's count into the shared total
/// once it has gathered [`FLUSH`] bytes either way.
#[inline]
fn count(delta: isize) {
    let index = MINE.with(|m| {
        if m.get() == UNDEALT {
            let dealt = DEALT.fetch_add(1, Ordering::Relaxed);
            m.set(if dealt < OWN_STRIPES { dealt } else { OWN_STRIPES + dealt % SHARED_STRIPES });
        }
        m.get()
    });
    let stripe = &STRIPE[index].0;
    if index < OWN_STRIPES {
        // Only this thread writes its stripe: a plain load and store, no locked instruction.
        // (A reader summing meanwhile may see the stripe reset before the shared total has
        // what it held, and miss it for that moment; a quiet process reads exact.)
        let now = stripe.load(Ordering::Relaxed) + delta;
        if now >= FLUSH || now <= -FLUSH {
            stripe.store(0, Ordering::Relaxed);
            flush(now);
        } else {
            stripe.store(now, Ordering::Relaxed);
        }
    } else {
        let now = stripe.fetch_add(delta, Ordering::Relaxed) + delta;
        if now >= FLUSH || now <= -FLUSH {
            // Other threads share this stripe and may move it at the same time: each moves
            // what it took, and the sum stays exact.
            flush(stripe.swap(0, Ordering::Relaxed));
        }
    }
}

/// Moves `moved` bytes from a stripe into the shared total, and raises the peak to it.
fn flush(moved: isize) {
    let total = FLUSHED.fetch_add(moved, Ordering::Relaxed) + moved;
    if moved > 0 {
        PEAK.fetch_max(total.max(0) as usize, Ordering::Relaxed);
    }
}

/// A block's size as a count (sizes never exceed `isize::MAX`: `Layout` guarantees it).
#[inline]
fn bytes(size: usize) -> isize {
    size as isize
}

// SAFETY: every call is passed to the inner allocator unchanged, with the caller's contract;
// counting touches only atomics and a const thread-local without destructor, so it never
// allocates, never unwinds and may run at any point of a thread's life.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Metered<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (a layout of non-zero size) is passed on unchanged.
        let p = unsafe { self.inner.alloc(layout) };
        if !p.is_null() {
            count(bytes(layout.size()));
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if !p.is_null() {
            count(bytes(layout.size()));
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from the inner one, with `layout`
        // (the caller's contract).
        unsafe { self.inner.dealloc(ptr, layout) };
        count(-bytes(layout.size()));
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and the caller's contract on `new_size` holds.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(bytes(new_size) - bytes(layout.size()));
        }
        p
    }
}
