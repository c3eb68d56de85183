//! Model test: random streams of pod writes (creates, updates that change images, labels,
//! nodes and phases, deletes, re-creates) go to a store of compact pods and to a naive model of
//! `k8s_openapi` pods. Every published snapshot, and snapshots held across later writes, must
//! read back every pod equal to the pod that was stored, field for field (as
//! `serde_json::Value` and as a `Pod`), with the indexes agreeing.

mod common;

use std::{collections::BTreeMap, sync::Arc};

use common::{PodSpec, pod};
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use snapinformer_compact::{CompactPod, Interner, access, node_name_index, owner_uid_index};
use snapinformer_store::{Snapshot, StoreBuilder};

type Model = BTreeMap<String, Pod>;

#[derive(Debug, Clone)]
enum Op {
    Upsert(PodSpec),
    Delete(u32, u32),
}

fn spec_strategy() -> impl Strategy<Value = PodSpec> {
    (0..3u32, 0..6u32, 0..3u32, 0..4u32, 0..4u32, 0..3u32, 0..3u8, any::<bool>()).prop_map(
        |(set, ordinal, incarnation, node, image, extra_label, phase, managed_fields)| PodSpec {
            set,
            ordinal,
            incarnation,
            rv: 0,
            node,
            image,
            extra_label,
            phase,
            managed_fields,
        },
    )
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => spec_strategy().prop_map(Op::Upsert),
        1 => (0..3u32, 0..6u32).prop_map(|(s, o)| Op::Delete(s, o)),
    ]
}

fn key(set: u32, ordinal: u32) -> String {
    format!("default/web-{set}-{ordinal}")
}

fn owner_uid(set: u32) -> String {
    format!("5e1f0c2a-0000-4b7e-9d3c-{set:012x}")
}

/// Every pod of `model` reads back from `snap` equal to the stored one, and nothing else is
/// there; the owner and node indexes agree with the model.
fn check(snap: &Snapshot<CompactPod>, model: &Model) {
    assert_eq!(snap.len(), model.len());
    for (k, expected) in model {
        let got = snap.get_by_key(k).unwrap_or_else(|| panic!("{k} missing"));
        assert_eq!(got.to_json(), serde_json::to_value(expected).unwrap(), "{k}");
        assert_eq!(&got.to_pod().unwrap(), expected, "{k}");
        assert_eq!(got.name(), expected.metadata.name.as_deref());
        assert_eq!(got.labels(), expected.metadata.labels.as_ref());
        assert_eq!(got.node_name(), expected.spec.as_ref().and_then(|s| s.node_name.as_deref()));
    }
    for set in 0..3 {
        let mut got: Vec<String> = snap
            .by_index_refs("owner", &owner_uid(set))
            .unwrap()
            .into_iter()
            .map(|p| p.name().unwrap().to_owned())
            .collect();
        got.sort();
        let mut want: Vec<String> = model
            .values()
            .filter(|p| {
                p.metadata.owner_references.iter().flatten().any(|o| o.uid == owner_uid(set))
            })
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        want.sort();
        assert_eq!(got, want, "owner index of set {set}");
    }
    for (node, names) in snap.index_values("node").unwrap().into_iter().map(|n| {
        let names = snap.by_index_refs("node", &n).unwrap().len();
        (n, names)
    }) {
        let want = model
            .values()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&*node))
            .count();
        assert_eq!(names, want, "node index {node}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_snapshot_reads_back_every_pod_as_stored(
        batches in prop::collection::vec(prop::collection::vec(op_strategy(), 1..12), 1..14),
        hold_every in 1..4usize,
    ) {
        let mut interner = Interner::new();
        let (mut writer, reader) = StoreBuilder::new(access())
            .covering_index("owner", owner_uid_index())
            .index("node", node_name_index())
            .build()
            .unwrap();
        let mut model = Model::new();
        let mut held: Vec<(Snapshot<CompactPod>, Model)> = Vec::new();
        let mut rv = 0u64;
        for (i, ops) in batches.into_iter().enumerate() {
            let mut batch = writer.batch();
            for op in ops {
                match op {
                    Op::Upsert(mut spec) => {
                        rv += 1;
                        spec.rv = rv;
                        let p = pod(&spec);
                        let json = serde_json::to_vec(&p).unwrap();
                        let compact = CompactPod::decode(&mut interner, &json).unwrap();
                        batch.upsert(Arc::new(compact)).unwrap();
                        model.insert(key(spec.set, spec.ordinal), p);
                    }
                    Op::Delete(set, ordinal) => {
                        let k = key(set, ordinal);
                        let removed = batch.delete_key(&k);
                        prop_assert_eq!(removed.is_some(), model.remove(&k).is_some());
                    }
                }
            }
            batch.commit();
            let snap = reader.snapshot();
            check(&snap, &model);
            if i % hold_every == 0 {
                held.push((snap, model.clone()));
            }
            for (snap, m) in &held {
                check(snap, m);
            }
        }
        drop(held);
        drop(writer);
        drop(reader);
        interner.sweep();
        prop_assert_eq!(interner.stats().entries(), 0);
    }
}

#[test]
fn pods_of_one_set_share_their_containers_owner_and_volumes() {
    let mut interner = Interner::new();
    let pods: Vec<CompactPod> = (0..10)
        .map(|ordinal| {
            let spec = PodSpec {
                set: 1,
                ordinal,
                incarnation: 0,
                rv: u64::from(ordinal) + 1,
                node: ordinal % 3,
                image: 1,
                extra_label: 0,
                phase: 1,
                managed_fields: true,
            };
            let json = serde_json::to_vec(&pod(&spec)).unwrap();
            CompactPod::decode(&mut interner, &json).unwrap()
        })
        .collect();
    let first = &pods[0];
    for p in &pods[1..] {
        assert!(p.containers().unwrap().ptr_eq(first.containers().unwrap()));
        assert!(p.owner_references().unwrap().ptr_eq(first.owner_references().unwrap()));
        let volumes = |p: &CompactPod| p.get(&["spec", "tolerations"]).unwrap().as_array().cloned();
        assert!(volumes(p).unwrap().ptr_eq(&volumes(first).unwrap()));
        let kcm = |p: &CompactPod| p.managed_fields().unwrap()[0].as_object().cloned().unwrap();
        assert!(kcm(p).ptr_eq(&kcm(first)), "equal managedFields entries are shared");
    }
    assert_eq!(first.controller_uid(), Some(owner_uid(1).as_str()));
    assert_eq!(first.annotation("prometheus.io/port"), Some("9102"));
}
