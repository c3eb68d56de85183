//! The reserved address range and the slots carved out of it.
//!
//! The range is reserved once, on the first [`build`](crate::build), and never released. It is
//! split into [`MAX_PAGES`] equal spans, one per slot size: span `k` holds slots of `k + 1`
//! pages, one after another. So an address alone says whether it is arena memory (one
//! subtraction and comparison), which slot size it has (a division) and where its slot starts
//! (a second division): no lookup table, nothing to keep in step.
//!
//! Every slot starts with a [`Header`]: the number of live allocations in it (plus one while it
//! is being built), and the link to the next free slot of its size while it is free. A slot
//! goes back to its size's free list when the count reaches zero and is handed out again,
//! dirty, to the next object of that size; its pages stay resident (they are not returned to
//! the operating system).

#![allow(unsafe_code)] // The slots' headers are reached through raw addresses; see each block.

use std::sync::{
    Mutex, OnceLock, PoisonError,
    atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering, fence},
};

/// The unit slots are measured in.
pub(crate) const PAGE: usize = 4096;

/// The largest slot, in pages (256 KiB). Larger objects are built on the ordinary heap.
pub(crate) const MAX_PAGES: usize = 64;

/// Address space reserved for the slots of one size: 16 GiB, so a million objects of 16 KiB
/// each fit. Under Miri (which allocates what it is given) 1 MiB.
#[cfg(not(miri))]
const CLASS_SPAN: usize = 16 << 30;
#[cfg(miri)]
const CLASS_SPAN: usize = 1 << 20;

/// The whole reservation: 1 TiB of address space (`MAP_NORESERVE`: nothing is committed until
/// a slot's page is first written).
const REGION_LEN: usize = CLASS_SPAN * MAX_PAGES;

/// Bytes at the start of every slot kept for its [`Header`]; allocations begin after them.
pub(crate) const HEADER: usize = 16;

/// Where the range starts; null until it is reserved (or if it could not be). Kept as a pointer,
/// not an address, so that every slot pointer derives from the reservation (strict provenance).
static BASE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static RESERVED: OnceLock<usize> = OnceLock::new();

/// Live slots and the bytes they span (pages, not what was allocated in them).
pub(crate) static SLOTS: AtomicU64 = AtomicU64::new(0);
pub(crate) static SLOT_BYTES: AtomicU64 = AtomicU64::new(0);

/// One slot size's bookkeeping.
struct Class {
    /// The first free slot (0: none); the rest are linked through their headers.
    free: Mutex<usize>,
    /// How many slots of this size were ever handed out of the span.
    fresh: AtomicUsize,
}

static CLASSES: [Class; MAX_PAGES] =
    [const { Class { free: Mutex::new(0), fresh: AtomicUsize::new(0) } }; MAX_PAGES];

/// The start of every slot.
#[repr(C)]
struct Header {
    /// Live allocations in the slot, plus one while it is being built.
    live: AtomicUsize,
    /// The next free slot of the same size while this one is free.
    next_free: AtomicUsize,
}

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER);

/// Reserves the range if that has not been tried yet; whether it is there.
pub(crate) fn reserve() -> bool {
    let base = *RESERVED.get_or_init(|| {
        let base = reserve_os();
        BASE.store(base, Ordering::Release);
        base.addr()
    });
    base != 0
}

#[cfg(all(unix, not(miri)))]
fn reserve_os() -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory; the result is checked before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            REGION_LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED { std::ptr::null_mut() } else { p.cast() }
}

#[cfg(miri)]
fn reserve_os() -> *mut u8 {
    use std::alloc::{GlobalAlloc, Layout, System};
    let layout = Layout::from_size_align(REGION_LEN, PAGE).expect("a valid layout");
    unsafe extern "Rust" {
        /// Miri's hook for memory that lives as long as the program (not a leak).
        fn miri_static_root(ptr: *const u8);
    }
    // SAFETY: the layout has a non-zero size. The block is never freed: the range lives as
    // long as the process, as the mapping does outside Miri, which the static-root hook tells Miri.
    unsafe {
        let p = System.alloc(layout);
        if !p.is_null() {
            miri_static_root(p);
        }
        p
    }
}

#[cfg(all(not(unix), not(miri)))]
fn reserve_os() -> *mut u8 {
    std::ptr::null_mut() // No arena on this platform: every build runs on the ordinary heap.
}

/// Whether `addr` lies in the reserved range.
#[inline]
pub(crate) fn contains(addr: usize) -> bool {
    let base = BASE.load(Ordering::Acquire).addr();
    base != 0 && addr.wrapping_sub(base) < REGION_LEN
}

/// A pointer to `addr`, which must lie in the range, with the reservation's provenance.
#[inline]
pub(crate) fn pointer(addr: usize) -> *mut u8 {
    BASE.load(Ordering::Acquire).with_addr(addr)
}

/// The start of the slot holding `addr` (which must lie in the range) and its size in bytes.
#[inline]
fn slot_of(addr: usize) -> (usize, usize) {
    let base = BASE.load(Ordering::Acquire).addr();
    let class = (addr - base) / CLASS_SPAN;
    let size = (class + 1) * PAGE;
    let class_base = base + class * CLASS_SPAN;
    (class_base + (addr - class_base) / size * size, size)
}

/// The header of the slot starting at `slot`.
#[inline]
fn header(slot: usize) -> &'static Header {
    debug_assert!(contains(slot) && slot.is_multiple_of(PAGE));
    // SAFETY: `slot` is the start of a slot in the range, which is mapped read-write for the
    // rest of the process and page-aligned (so aligned for `Header`). A slot's first `HEADER`
    // bytes are written as a `Header` before its first use (`take`) and are never handed out
    // as allocation memory, so they always hold an initialized `Header`, accessed only through
    // its atomics.
    unsafe { &*pointer(slot).cast::<Header>() }
}

/// A free slot of `pages` pages with its count at one (the builder's guard), or `None` when the
/// span of that size is used up or the range is not reserved.
pub(crate) fn take(pages: usize) -> Option<usize> {
    debug_assert!((1..=MAX_PAGES).contains(&pages));
    let base = BASE.load(Ordering::Acquire).addr();
    if base == 0 {
        return None;
    }
    let class = &CLASSES[pages - 1];
    let size = pages * PAGE;
    let reused = {
        let mut head = class.free.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = *head;
        if slot != 0 {
            *head = header(slot).next_free.load(Ordering::Relaxed);
        }
        slot
    };
    let slot = if reused != 0 {
        // Every allocation in it was freed before it joined the list (the count reached zero),
        // and the list's lock orders those frees before this store.
        header(reused).live.store(1, Ordering::Relaxed);
        reused
    } else {
        let i = class
            .fresh
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |i| {
                ((i + 1) * size <= CLASS_SPAN).then_some(i + 1)
            })
            .ok()?;
        let slot = base + (pages - 1) * CLASS_SPAN + i * size;
        // SAFETY: the slot lies in the range (`(i + 1) * size <= CLASS_SPAN`), was never handed
        // out before (`fresh` hands out each index once), so nothing else refers to its memory;
        // the address is page-aligned. Writing initializes the header before any read of it.
        unsafe {
            std::ptr::write(
                pointer(slot).cast::<Header>(),
                Header { live: AtomicUsize::new(1), next_free: AtomicUsize::new(0) },
            );
        }
        slot
    };
    SLOTS.fetch_add(1, Ordering::Relaxed);
    SLOT_BYTES.fetch_add(size as u64, Ordering::Relaxed);
    Some(slot)
}

/// Counts one more allocation in the slot starting at `slot`.
#[inline]
pub(crate) fn retain(slot: usize) {
    header(slot).live.fetch_add(1, Ordering::Relaxed);
}

/// Releases the allocation at `addr` (in the range): frees its slot if it was the last.
#[inline]
pub(crate) fn release(addr: usize) {
    let (slot, size) = slot_of(addr);
    release_slot(slot, size);
}

/// Drops one count of the slot starting at `slot` of `size` bytes; frees it at zero.
pub(crate) fn release_slot(slot: usize, size: usize) {
    let h = header(slot);
    if h.live.fetch_sub(1, Ordering::Release) != 1 {
        return;
    }
    // Every other release happened before this point (as for `Arc`): the slot's memory is no
    // longer anyone's.
    fence(Ordering::Acquire);
    let class = &CLASSES[size / PAGE - 1];
    {
        let mut head = class.free.lock().unwrap_or_else(PoisonError::into_inner);
        h.next_free.store(*head, Ordering::Relaxed);
        *head = slot;
    }
    SLOTS.fetch_sub(1, Ordering::Relaxed);
    SLOT_BYTES.fetch_sub(size as u64, Ordering::Relaxed);
}
