//! The arena's behaviour as its users see it, with `ArenaAlloc` around the system allocator as
//! the test program's global allocator. Runs under Miri too (`cargo +nightly miri test -p
//! snapinformer-arena`), which checks every unsafe block these paths reach for undefined
//! behaviour and data races.

use std::{
    alloc::System,
    cell::Cell,
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
};

use snapinformer_arena::{ArenaAlloc, available, build, in_arena, stats};

#[global_allocator]
static ALLOC: ArenaAlloc<System> = ArenaAlloc::new(System);

/// Tests that compare process-wide counters run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Clone, Debug, PartialEq)]
struct Obj {
    name: String,
    labels: BTreeMap<String, String>,
    items: Vec<String>,
}

fn obj(n: usize) -> Obj {
    Obj {
        name: format!("pod-{n}"),
        labels: (0..3).map(|i| (format!("key-{i}"), format!("value-{n}-{i}"))).collect(),
        items: (0..n % 5 + 1).map(|i| "x".repeat(i * 7 + n % 13)).collect(),
    }
}

/// Every heap block the object owns.
fn blocks(o: &Obj) -> Vec<*const u8> {
    let mut v = vec![o.name.as_ptr(), o.items.as_ptr().cast::<u8>()];
    v.extend(o.labels.iter().flat_map(|(k, x)| [k.as_ptr(), x.as_ptr()]));
    v.extend(o.items.iter().filter(|s| !s.is_empty()).map(|s| s.as_ptr()));
    v
}

#[test]
fn an_object_and_everything_it_owns_are_built_in_one_slot_of_whole_pages() {
    let _s = serial();
    assert!(available(), "the test program's global allocator is an ArenaAlloc");
    let model = obj(3);
    let before = stats();
    let built = build(|| Arc::new(model.clone()));
    let after = stats();
    assert_eq!(*built, model);
    assert_eq!(after.built, before.built + 1);
    assert_eq!(after.slots, before.slots + 1);
    assert_eq!(after.slot_bytes - before.slot_bytes, 4096, "a small object takes one page");
    let arc_block = Arc::as_ptr(&built).cast::<u8>();
    assert!(in_arena(arc_block));
    for b in blocks(&built) {
        assert!(in_arena(b));
        let distance = (b as usize).abs_diff(arc_block as usize);
        assert!(distance < 4096, "every block in the same page-sized slot");
    }
    drop(built);
    assert_eq!(stats().slots, before.slots, "dropping the object frees its slot");
}

#[test]
fn a_freed_slot_is_reused_by_the_next_object_of_its_size() {
    let _s = serial();
    let first = build(|| Box::new(obj(1)));
    let addr = &*first as *const Obj as usize;
    drop(first);
    let second = build(|| Box::new(obj(1)));
    assert_eq!(&*second as *const Obj as usize, addr);
    assert_eq!(*second, obj(1));
}

#[test]
fn a_block_taken_out_of_an_object_keeps_its_slot_until_it_is_freed() {
    let _s = serial();
    let before = stats().slots;
    let built = build(|| obj(4));
    let Obj { name, labels, items } = built;
    drop(labels);
    drop(items);
    assert_eq!(stats().slots, before + 1, "the name still lives in the slot");
    assert_eq!(name, "pod-4");
    drop(name);
    assert_eq!(stats().slots, before);
}

#[test]
fn blocks_freed_on_other_threads_free_the_slot_with_the_last_one() {
    let _s = serial();
    let before = stats().slots;
    let built = build(|| obj(9));
    let expected = obj(9);
    let handles: Vec<_> = built
        .items
        .into_iter()
        .zip(expected.items)
        .map(|(s, want)| {
            std::thread::spawn(move || {
                assert_eq!(s, want);
                drop(s);
            })
        })
        .collect();
    drop(built.labels);
    for h in handles {
        h.join().expect("the freeing thread finished");
    }
    assert_eq!(built.name, "pod-9");
    drop(built.name);
    assert_eq!(stats().slots, before);
}

#[test]
fn a_block_that_grows_after_the_build_moves_to_the_ordinary_heap() {
    let _s = serial();
    let before = stats().slots;
    let mut built = build(|| obj(2));
    assert!(in_arena(built.items.as_ptr()));
    built.items.reserve(1000);
    built.items.push("later".into());
    assert!(!in_arena(built.items.as_ptr()));
    assert!(!in_arena(built.items.last().expect("pushed").as_ptr()));
    let mut model = obj(2);
    model.items.push("later".into());
    assert_eq!(built, model);
    drop(built);
    assert_eq!(stats().slots, before);
}

#[test]
fn the_last_block_of_a_build_grows_in_place() {
    let _s = serial();
    let v = build(|| {
        let mut v = Vec::with_capacity(4);
        v.extend(0..100u64); // the vector is the slot's last block while it grows
        v
    });
    assert!(in_arena(v.as_ptr()));
    assert_eq!(v, (0..100).collect::<Vec<u64>>());
}

#[test]
fn a_build_inside_a_build_lands_in_the_outer_slot() {
    let _s = serial();
    let outer = build(|| (obj(1), build(|| obj(2))));
    let distance = (outer.0.name.as_ptr() as usize).abs_diff(outer.1.name.as_ptr() as usize);
    assert!(in_arena(outer.1.name.as_ptr()));
    assert!(distance < 4096);
    assert_eq!(outer, (obj(1), obj(2)));
}

#[test]
fn a_panicking_constructor_leaves_the_thread_allocating_on_the_ordinary_heap() {
    let _s = serial();
    let before = stats().slots;
    let r = std::panic::catch_unwind(|| {
        build(|| {
            let o = obj(5);
            if o.name.len() < 100 {
                panic!("the constructor fails");
            }
            o
        })
    });
    assert!(r.is_err());
    let after = Box::new(7u64);
    assert!(!in_arena(&*after as *const u64));
    // The panic's payload, and whatever the panic hook allocated (the test harness's captured
    // output may grow), were allocated during the build, in its slot: they keep it alive as
    // long as they live, one slot at most.
    drop(r);
    assert!(stats().slots <= before + 1);
    let again = build(|| obj(6));
    assert!(in_arena(again.name.as_ptr()));
    assert_eq!(again, obj(6));
}

#[test]
fn an_object_larger_than_the_largest_slot_is_built_plainly() {
    let _s = serial();
    let before = stats();
    let big = build(|| vec![1u8; 300 * 1024]);
    assert!(!in_arena(big.as_ptr()));
    assert_eq!(stats().plain, before.plain + 1);
    assert_eq!(stats().slots, before.slots);
    assert!(big.iter().all(|&b| b == 1));
}

#[test]
fn a_constructor_that_allocates_more_the_second_time_overflows_without_losing_anything() {
    let _s = serial();
    let runs = Cell::new(0usize);
    let before = stats();
    let built = build(|| {
        runs.set(runs.get() + 1);
        (0..runs.get() * 40).map(|i| format!("item {i} of a growing list")).collect::<Vec<_>>()
    });
    assert_eq!(runs.get(), 2);
    assert_eq!(built.len(), 80);
    assert!(built.iter().enumerate().all(|(i, s)| *s == format!("item {i} of a growing list")));
    assert_eq!(stats().overflowed, before.overflowed + 1);
    assert!(built.iter().any(|s| !in_arena(s.as_ptr())), "what did not fit is elsewhere");
    drop(built);
    assert_eq!(stats().slots, before.slots);
}

#[test]
fn zeroed_allocations_in_a_reused_slot_are_zero() {
    let _s = serial();
    drop(build(|| vec![0xffu8; 3000]));
    let zeroed = build(|| vec![0u8; 3000]);
    assert!(in_arena(zeroed.as_ptr()));
    assert!(zeroed.iter().all(|&b| b == 0));
}

/// A random mix of builds, drops, blocks taken out and freed elsewhere, and growth, checked
/// against plain copies of every object at every step; at the end every slot is free again.
#[test]
fn random_builds_and_frees_match_plain_copies_and_free_every_slot() {
    let _s = serial();
    let before = stats().slots;
    let steps = if cfg!(miri) { 60 } else { 4000 };
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng as usize
    };
    let mut live: Vec<(Obj, Obj)> = Vec::new(); // (built, model)
    let mut loose: Vec<String> = Vec::new(); // blocks taken out of objects
    for _ in 0..steps {
        match next() % 6 {
            0 | 1 => {
                let model = obj(next() % 50);
                live.push((build(|| model.clone()), model));
            }
            2 if !live.is_empty() => {
                let i = next() % live.len();
                live.swap_remove(i);
            }
            3 if !live.is_empty() => {
                let i = next() % live.len();
                let (built, model) = &mut live[i];
                if let Some(s) = built.items.pop() {
                    assert_eq!(Some(&s), model.items.last());
                    model.items.pop();
                    loose.push(s);
                }
            }
            4 if !live.is_empty() => {
                let i = next() % live.len();
                let (built, model) = &mut live[i];
                built.name.push_str("-grown");
                model.name.push_str("-grown");
            }
            5 if !loose.is_empty() => {
                let i = next() % loose.len();
                loose.swap_remove(i);
            }
            _ => {}
        }
        for (built, model) in &live {
            assert_eq!(built, model);
        }
    }
    drop(live);
    drop(loose);
    assert_eq!(stats().slots, before);
}
