//! What freeing a replaced realistic pod costs, and whether touching its blocks before the drop
//! makes the drop cheaper: one thread builds pods and replaces them at random over a
//! population, as an informer's source and writer do, and a second thread frees what they
//! replaced, as the reclaimers do.
//!
//! ```text
//! cargo run --release -p snapinformer-sim --example free_probe -- 200000 plain
//! cargo run --release -p snapinformer-sim --example free_probe -- 200000 touch
//! ```
//!
//! Arguments: pods (default 200,000), and `plain` (drop the replaced pod) or `touch` (walk it
//! first with [`touch::touch`], which loads the first byte of every string it owns,
//! so that the drop's cache misses overlap in the walk instead of following one another).
//! Prints, per pass over as many replacements as there are pods, the nanoseconds per
//! replacement the building thread spent building, and the freeing thread spent walking and
//! dropping. One process per mode: the heap's history is part of what is measured.

use std::{sync::Arc, sync::mpsc, thread, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_sim::pods::{PodProfile, Rng, Shape, make_pod};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(200_000, |s| s.parse().expect("a pod count"));
    let touch = match args.next().as_deref() {
        None | Some("plain") => false,
        Some("touch") => true,
        Some(other) => panic!("unknown mode {other:?}: plain or touch"),
    };
    let shape = Shape::for_objects(n, 1000).with_profile(PodProfile::Realistic);
    let mut pods: Vec<Arc<Pod>> =
        (0..n).map(|i| Arc::new(make_pod(&shape, i, 1, i % 1000))).collect();
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    println!("{n} pods, {}", if touch { "touch" } else { "plain" });
    for pass in 0..6 {
        let (tx, rx) = mpsc::sync_channel::<Arc<Pod>>(256);
        let freer = thread::spawn(move || {
            let (mut walk, mut free, mut count) = (0u128, 0u128, 0u128);
            for pod in rx {
                let t0 = Instant::now();
                if touch {
                    touch::touch(&*pod);
                }
                let t1 = Instant::now();
                drop(pod);
                let t2 = Instant::now();
                walk += (t1 - t0).as_nanos();
                free += (t2 - t1).as_nanos();
                count += 1;
            }
            (walk / count.max(1), free / count.max(1))
        });
        let mut build = 0u128;
        for u in 0..n {
            let i = rng.below(n);
            let t0 = Instant::now();
            let pod = Arc::new(make_pod(&shape, i, (2 + pass * n + u) as u64, i % 1000));
            build += t0.elapsed().as_nanos();
            tx.send(std::mem::replace(&mut pods[i], pod)).expect("the freeing thread runs");
        }
        drop(tx);
        let (walk, free) = freer.join().expect("the freeing thread ends");
        println!(
            "pass {pass}: build {} ns; freeing thread: walk {walk} ns, drop {free} ns, both {} ns",
            build / n as u128,
            walk + free
        );
    }
}

/// A `serde` walker that loads the first byte of every string and byte buffer a value
/// serializes, and keeps nothing: touching an object's scattered blocks before dropping it.
/// Strings the value formats for serialization (timestamps) are built for the walk, not owned
/// by the value, and skipped where `collect_str` is used.
mod touch {
    use std::fmt;

    use serde::{
        Serialize,
        ser::{
            self, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant,
            SerializeTuple, SerializeTupleStruct, SerializeTupleVariant,
        },
    };

    /// Loads the first byte of every string and byte buffer `value` serializes, and nothing else.
    /// A value whose `Serialize` implementation fails part-way is touched up to there.
    pub(crate) fn touch<T: Serialize + ?Sized>(value: &T) {
        let _ = value.serialize(Toucher);
    }

    fn load(bytes: &[u8]) {
        if let Some(first) = bytes.first() {
            std::hint::black_box(*first);
        }
    }

    /// The walker: every method succeeds and keeps nothing.
    struct Toucher;

    /// Never produced by [`Toucher`]; only a `Serialize` implementation's own error reaches it.
    #[derive(Debug)]
    struct Stopped;

    impl fmt::Display for Stopped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the value stopped its own serialization")
        }
    }

    impl std::error::Error for Stopped {}

    impl ser::Error for Stopped {
        fn custom<M: fmt::Display>(_: M) -> Self {
            Stopped
        }
    }

    type Done = Result<(), Stopped>;

    /// Serializer methods for values that own nothing to touch.
    macro_rules! ignore {
        ($($method:ident($($ty:ty),*)),* $(,)?) => {$(
            fn $method(self, $(_: $ty),*) -> Done {
                Ok(())
            }
        )*};
    }

    /// Serializer methods that begin a compound value: its parts come through the walker.
    macro_rules! begin {
        ($($method:ident($($ty:ty),*)),* $(,)?) => {$(
            fn $method(self, $(_: $ty),*) -> Result<Toucher, Stopped> {
                Ok(Toucher)
            }
        )*};
    }

    impl ser::Serializer for Toucher {
        type Ok = ();
        type Error = Stopped;
        type SerializeSeq = Toucher;
        type SerializeTuple = Toucher;
        type SerializeTupleStruct = Toucher;
        type SerializeTupleVariant = Toucher;
        type SerializeMap = Toucher;
        type SerializeStruct = Toucher;
        type SerializeStructVariant = Toucher;

        // Numbers, booleans and characters own no heap memory.
        ignore!(
            serialize_bool(bool),
            serialize_i8(i8),
            serialize_i16(i16),
            serialize_i32(i32),
            serialize_i64(i64),
            serialize_u8(u8),
            serialize_u16(u16),
            serialize_u32(u32),
            serialize_u64(u64),
            serialize_f32(f32),
            serialize_f64(f64),
            serialize_char(char),
            serialize_none(),
            serialize_unit(),
            serialize_unit_struct(&'static str),
            serialize_unit_variant(&'static str, u32, &'static str),
        );
        fn serialize_str(self, v: &str) -> Done {
            load(v.as_bytes());
            Ok(())
        }
        fn serialize_bytes(self, v: &[u8]) -> Done {
            load(v);
            Ok(())
        }
        fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Done {
            value.serialize(self)
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            value: &T,
        ) -> Done {
            value.serialize(self)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            value: &T,
        ) -> Done {
            value.serialize(self)
        }
        begin!(
            serialize_seq(Option<usize>),
            serialize_tuple(usize),
            serialize_tuple_struct(&'static str, usize),
            serialize_tuple_variant(&'static str, u32, &'static str, usize),
            serialize_map(Option<usize>),
            serialize_struct(&'static str, usize),
            serialize_struct_variant(&'static str, u32, &'static str, usize),
        );
        // Strings the value formats (timestamps, quantities written with `Display`) are built for
        // the walk, not owned by the value: skip them.
        fn collect_str<T: fmt::Display + ?Sized>(self, _: &T) -> Done {
            Ok(())
        }
        fn is_human_readable(&self) -> bool {
            true
        }
    }

    /// The compound serializers that take one value at a time: each serializes it with a
    /// fresh walker.
    macro_rules! one_value_at_a_time {
        ($($trait:ident::$method:ident($($name:ty),*)),* $(,)?) => {$(
            impl $trait for Toucher {
                type Ok = ();
                type Error = Stopped;
                fn $method<T: Serialize + ?Sized>(&mut self, $(_: $name,)* value: &T) -> Done {
                    value.serialize(Toucher)
                }
                fn end(self) -> Done {
                    Ok(())
                }
            }
        )*};
    }

    one_value_at_a_time!(
        SerializeSeq::serialize_element(),
        SerializeTuple::serialize_element(),
        SerializeTupleStruct::serialize_field(),
        SerializeTupleVariant::serialize_field(),
        SerializeStruct::serialize_field(&'static str),
        SerializeStructVariant::serialize_field(&'static str),
    );

    impl SerializeMap for Toucher {
        type Ok = ();
        type Error = Stopped;
        fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Done {
            key.serialize(Toucher)
        }
        fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
            value.serialize(Toucher)
        }
        fn end(self) -> Done {
            Ok(())
        }
    }
}
