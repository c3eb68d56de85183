//! Model-based tests: random operation sequences applied to the store and to a naive model, with
//! every published snapshot (and snapshots held across later writes) checked against the model.

mod common;

use std::{collections::BTreeMap, sync::Arc};

use common::{Model, TObj, access, base_indexers, check, label_indexers};
use proptest::prelude::*;
use snapinformer_store::{Backend, Change, Chunked, Error, Hamt, Snapshot, StoreBuilder};

#[derive(Debug, Clone)]
enum Op {
    Upsert(TObj),
    /// Re-upserts an existing object with only a new resource version (the common watch update).
    Touch(usize, u16),
    /// Same, for several objects in one batch.
    TouchBatch(Vec<(usize, u16)>),
    Delete(TObj),
    DeleteKey(String),
    Batch(Vec<Change<TObj>>),
    Replace(Vec<TObj>, u32),
    AddLabelIndexers,
    Hold,
    Release(usize),
}

fn obj_strategy(space: u32) -> impl Strategy<Value = TObj> {
    (0..space, 0..3u32, 0..6u32, 0..5u32, 0..3u32, 0..4u32, any::<u16>()).prop_map(
        |(name, ns, node, owner, owners, app, rv)| TObj {
            name: format!("obj-{name}"),
            ns: match ns {
                0 => None,
                n => Some(format!("ns-{n}")),
            },
            rv: rv.to_string(),
            node: if node == 0 { String::new() } else { format!("node-{node}") },
            owners: (0..owners).map(|i| format!("uid-{}", (owner + i) % 5)).collect(),
            labels: if app == 0 {
                BTreeMap::new()
            } else {
                BTreeMap::from([
                    ("app".to_string(), format!("app-{app}")),
                    ("tier".to_string(), "web".into()),
                ])
            },
        },
    )
}

fn op_strategy(space: u32) -> impl Strategy<Value = Op> {
    let change = prop_oneof![
        4 => obj_strategy(space).prop_map(|o| Change::Upsert(Arc::new(o))),
        1 => obj_strategy(space).prop_map(|o| Change::Delete(Arc::new(o))),
        1 => obj_strategy(space).prop_map(|o| Change::DeleteKey(o.key())),
    ];
    prop_oneof![
        8 => obj_strategy(space).prop_map(Op::Upsert),
        6 => (any::<usize>(), any::<u16>()).prop_map(|(i, rv)| Op::Touch(i, rv)),
        2 => prop::collection::vec((any::<usize>(), any::<u16>()), 1..30).prop_map(Op::TouchBatch),
        2 => obj_strategy(space).prop_map(Op::Delete),
        1 => obj_strategy(space).prop_map(|o| Op::DeleteKey(o.key())),
        3 => prop::collection::vec(change, 0..40).prop_map(Op::Batch),
        1 => (prop::collection::vec(obj_strategy(space), 0..60), any::<u32>()).prop_map(|(v, rv)| Op::Replace(v, rv)),
        1 => Just(Op::AddLabelIndexers),
        2 => Just(Op::Hold),
        1 => (0..8usize).prop_map(Op::Release),
    ]
}

fn model_apply(model: &mut Model, change: &Change<TObj>) {
    match change {
        Change::Upsert(o) => {
            model.items.insert(o.key(), (**o).clone());
            model.rv = Some(o.rv.clone());
        }
        Change::Delete(o) => {
            model.items.remove(&o.key());
            // A delete with the final state reports its version.
            if !o.rv.is_empty() {
                model.rv = Some(o.rv.clone());
            }
        }
        Change::DeleteKey(k) => {
            model.items.remove(k);
        }
    }
}

fn run<B: Backend>(ops: Vec<Op>) {
    run_with::<B>(ops, true);
}

/// Runs `ops` on a store reclaiming in the background (the default) or inline.
fn run_with<B: Backend>(ops: Vec<Op>, background_reclaim: bool) {
    let (mut writer, reader) = StoreBuilder::new(access())
        .backend::<B>()
        .indexers(base_indexers())
        .background_reclaim(background_reclaim)
        .build()
        .unwrap();
    let mut model = Model::new();
    let mut held: Vec<(Snapshot<TObj, B>, Model)> = Vec::new();
    let mut last_publication = reader.snapshot().publication();
    for op in ops {
        match op {
            Op::Upsert(o) => {
                writer.add(Arc::new(o.clone())).unwrap();
                model_apply(&mut model, &Change::Upsert(Arc::new(o)));
            }
            Op::Touch(i, rv) => {
                if let Some(o) = model.items.values().nth(i % model.items.len().max(1)).cloned() {
                    let touched = TObj { rv: format!("t{rv}"), ..o };
                    writer.update(Arc::new(touched.clone())).unwrap();
                    model_apply(&mut model, &Change::Upsert(Arc::new(touched)));
                }
            }
            Op::TouchBatch(picks) => {
                let mut changes = Vec::new();
                for (i, rv) in picks {
                    if let Some(o) = model.items.values().nth(i % model.items.len().max(1)).cloned()
                    {
                        let touched = Arc::new(TObj { rv: format!("t{rv}"), ..o });
                        model_apply(&mut model, &Change::Upsert(touched.clone()));
                        changes.push(Change::Upsert(touched));
                    }
                }
                assert!(writer.apply(changes).rejected.is_empty());
            }
            Op::Delete(o) => {
                let removed = writer.delete(&o).unwrap();
                assert_eq!(removed.map(|r| (*r).clone()), model.items.remove(&o.key()));
                if !o.rv.is_empty() {
                    model.rv = Some(o.rv.clone());
                }
            }
            Op::DeleteKey(k) => {
                let removed = writer.delete_key(&k);
                assert_eq!(removed.map(|r| (*r).clone()), model.items.remove(&k));
            }
            Op::Batch(changes) => {
                let before = reader.snapshot();
                for c in &changes {
                    model_apply(&mut model, c);
                }
                let outcome = writer.apply(changes.clone());
                assert!(outcome.rejected.is_empty());
                assert_eq!(outcome.applied, changes.len());
                // One publication for the whole batch (none if it was empty).
                let after = reader.snapshot();
                let expect = before.publication() + u64::from(!changes.is_empty());
                assert_eq!(after.publication(), expect);
            }
            Op::Replace(objs, rv) => {
                writer.replace(objs.iter().cloned().map(Arc::new), rv.to_string()).unwrap();
                model.items = objs.into_iter().map(|o| (o.key(), o)).collect();
                model.rv = Some(rv.to_string());
            }
            Op::AddLabelIndexers => {
                let res = writer.add_indexers(label_indexers());
                if model.indexes.iter().any(|i| i == "app") {
                    assert_eq!(res, Err(Error::IndexExists("app".into())));
                } else {
                    res.unwrap();
                    model.indexes.extend(["app".to_string(), "labelpairs".to_string()]);
                }
            }
            Op::Hold => held.push((reader.snapshot(), model.clone())),
            Op::Release(i) => {
                if !held.is_empty() {
                    let (snap, m) = held.remove(i % held.len());
                    check(&snap, &m);
                }
            }
        }
        let snap = reader.snapshot();
        assert!(snap.publication() >= last_publication, "publications go forward");
        last_publication = snap.publication();
        check(&snap, &model);
    }
    for (snap, m) in &held {
        check(snap, m);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn hamt_snapshots_match_the_model_at_every_publication(ops in prop::collection::vec(op_strategy(48), 1..120)) {
        run::<Hamt>(ops);
    }

    #[test]
    fn chunked_snapshots_match_the_model_at_every_publication(ops in prop::collection::vec(op_strategy(48), 1..120)) {
        run::<Chunked>(ops);
    }

    #[test]
    fn chunked_with_inline_reclamation_matches_the_model_at_every_publication(ops in prop::collection::vec(op_strategy(48), 1..120)) {
        run_with::<Chunked>(ops, false);
    }

    #[test]
    fn hamt_matches_the_model_with_many_keys(ops in prop::collection::vec(op_strategy(2000), 200..400)) {
        run::<Hamt>(ops);
    }

    #[test]
    fn chunked_matches_the_model_with_many_keys(ops in prop::collection::vec(op_strategy(2000), 200..400)) {
        run::<Chunked>(ops);
    }
}
