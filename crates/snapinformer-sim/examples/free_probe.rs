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

        fn serialize_bool(self, _: bool) -> Done {
            Ok(())
        }
        fn serialize_i8(self, _: i8) -> Done {
            Ok(())
        }
        fn serialize_i16(self, _: i16) -> Done {
            Ok(())
        }
        fn serialize_i32(self, _: i32) -> Done {
            Ok(())
        }
        fn serialize_i64(self, _: i64) -> Done {
            Ok(())
        }
        fn serialize_u8(self, _: u8) -> Done {
            Ok(())
        }
        fn serialize_u16(self, _: u16) -> Done {
            Ok(())
        }
        fn serialize_u32(self, _: u32) -> Done {
            Ok(())
        }
        fn serialize_u64(self, _: u64) -> Done {
            Ok(())
        }
        fn serialize_f32(self, _: f32) -> Done {
            Ok(())
        }
        fn serialize_f64(self, _: f64) -> Done {
            Ok(())
        }
        fn serialize_char(self, _: char) -> Done {
            Ok(())
        }
        fn serialize_str(self, v: &str) -> Done {
            load(v.as_bytes());
            Ok(())
        }
        fn serialize_bytes(self, v: &[u8]) -> Done {
            load(v);
            Ok(())
        }
        fn serialize_none(self) -> Done {
            Ok(())
        }
        fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Done {
            value.serialize(self)
        }
        fn serialize_unit(self) -> Done {
            Ok(())
        }
        fn serialize_unit_struct(self, _: &'static str) -> Done {
            Ok(())
        }
        fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Done {
            Ok(())
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
        fn serialize_seq(self, _: Option<usize>) -> Result<Toucher, Stopped> {
            Ok(Toucher)
        }
        fn serialize_tuple(self, _: usize) -> Result<Toucher, Stopped> {
            Ok(Toucher)
        }
        fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Toucher, Stopped> {
            Ok(Toucher)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Toucher, Stopped> {
            Ok(Toucher)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Toucher, Stopped> {
            Ok(Toucher)
        }
        fn serialize_struct(self, _: &'static str, _: usize) -> Result<Toucher, Stopped> {
            Ok(Toucher)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Toucher, Stopped> {
            Ok(Toucher)
        }
        // Strings the value formats (timestamps, quantities written with `Display`) are built for
        // the walk, not owned by the value: skip them.
        fn collect_str<T: fmt::Display + ?Sized>(self, _: &T) -> Done {
            Ok(())
        }
        fn is_human_readable(&self) -> bool {
            true
        }
    }

    impl SerializeSeq for Toucher {
        type Ok = ();
        type Error = Stopped;
        fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
            value.serialize(Toucher)
        }
        fn end(self) -> Done {
            Ok(())
        }
    }

    impl SerializeTuple for Toucher {
        type Ok = ();
        type Error = Stopped;
        fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
            value.serialize(Toucher)
        }
        fn end(self) -> Done {
            Ok(())
        }
    }

    impl SerializeTupleStruct for Toucher {
        type Ok = ();
        type Error = Stopped;
        fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
            value.serialize(Toucher)
        }
        fn end(self) -> Done {
            Ok(())
        }
    }

    impl SerializeTupleVariant for Toucher {
        type Ok = ();
        type Error = Stopped;
        fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
            value.serialize(Toucher)
        }
        fn end(self) -> Done {
            Ok(())
        }
    }

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

    impl SerializeStruct for Toucher {
        type Ok = ();
        type Error = Stopped;
        fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, value: &T) -> Done {
            value.serialize(Toucher)
        }
        fn end(self) -> Done {
            Ok(())
        }
    }

    impl SerializeStructVariant for Toucher {
        type Ok = ();
        type Error = Stopped;
        fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, value: &T) -> Done {
            value.serialize(Toucher)
        }
        fn end(self) -> Done {
            Ok(())
        }
    }
}
