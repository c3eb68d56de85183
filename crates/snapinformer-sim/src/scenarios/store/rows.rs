//! The rows the `store` command can run, and how each worker process is started: the one list to
//! extend with a row.
//!
//! Every row runs as a worker process following [`crate::harness::worker`]'s protocol, started
//! with the scenario's parameters as flags:
//!
//! ```text
//! <program> store --objects N --nodes N --readers N --duration <ms>ms --rate N
//!     --updates N --pod-profile realistic|small --placement unpinned|pinned
//!     [--sweep R1,R2,... --sweep-duration <ms>ms]
//!     --worker <row name> --worker-out <file>
//! ```
//!
//! and writes one [`StoreRowReport`](super::StoreRowReport) as JSON to the `--worker-out` file.
//! In-process rows ([`InProcessRow`]) run in this executable; the Go rows run in the client-go
//! worker ([`crate::rows::client_go`]), built before the first row runs.
//!
//! The rows are compared in pairs ([`PAIRS`]): each of ours against the client-go row that
//! measures the same thing at the same point.

use std::path::PathBuf;

use super::InProcessRow;
use crate::rows::CacheKind;

/// How a row's worker is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    /// This executable's `store --worker <name>`: a cache alone or our informer pipeline.
    InProcess(InProcessRow),
    /// The Go client-go worker of `baselines/client-go` (`snapinformer-client-go store ...`),
    /// built with `go build` (or taken from the cache) before the first row runs.
    ClientGo,
    /// Another program speaking the worker protocol (`<program> store ... --worker <name>`).
    Program(PathBuf),
}

/// One row of the `store` report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreRow {
    /// Report name, also the `--worker` argument.
    pub name: String,
    /// How its worker starts.
    pub runner: Runner,
}

/// What a row measures, for grouping the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// A whole informer (source, queue, batched apply, handler); visible at the handler.
    Pipeline,
    /// A store alone, ours or client-go's; visible at publication.
    Store,
    /// Our Rust baselines and variants (controls); visible at publication.
    Control,
}

impl Group {
    /// Heading of the group in the report.
    pub fn heading(self) -> &'static str {
        match self {
            Group::Pipeline => {
                "informer pipelines (visible when the registered event handler receives the update)"
            }
            Group::Store => "stores alone (visible when the store publishes the update)",
            Group::Control => "controls: Rust baselines and variants (visible at publication)",
        }
    }
}

/// The group of the row named `name`.
pub fn group(name: &str) -> Group {
    match name {
        super::informer_row::NAME
        | super::informer_row::COMPACT_NAME
        | super::informer_row::ARENA_NAME
        | super::informer_row::COVERING_NAME
        | CLIENT_GO => Group::Pipeline,
        "snapshot" | "snapshot-bg" | CLIENT_GO_INDEXER => Group::Store,
        _ => Group::Control,
    }
}

/// The Go informer row.
pub const CLIENT_GO: &str = "client-go";
/// The Go bare-indexer row.
pub const CLIENT_GO_INDEXER: &str = "client-go-indexer";

/// One of ours against the client-go row that measures the same thing at the same point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// What the pair compares.
    pub what: &'static str,
    /// Our row.
    pub ours: &'static str,
    /// The client-go row.
    pub anchor: &'static str,
}

/// The headline pairs: the informer pipelines, and the stores alone.
pub const PAIRS: [Pair; 3] = [
    Pair { what: "informer pipelines", ours: super::informer_row::NAME, anchor: CLIENT_GO },
    Pair { what: "stores alone", ours: "snapshot", anchor: CLIENT_GO_INDEXER },
    Pair { what: "stores alone", ours: "snapshot-bg", anchor: CLIENT_GO_INDEXER },
];

/// Every row `store` can run, in report order (the pairs first); without `--rows`, all of them
/// run.
pub fn registry() -> Vec<StoreRow> {
    let in_process = |row: InProcessRow| StoreRow {
        name: row.name().to_owned(),
        runner: Runner::InProcess(row),
    };
    let go = |name: &str| StoreRow { name: name.to_owned(), runner: Runner::ClientGo };
    let mut rows = vec![
        in_process(InProcessRow::Informer),
        go(CLIENT_GO),
        in_process(InProcessRow::Cache(CacheKind::Snapshot)),
        in_process(InProcessRow::Cache(CacheKind::SnapshotBg)),
        go(CLIENT_GO_INDEXER),
        in_process(InProcessRow::InformerCompact),
        in_process(InProcessRow::InformerArena),
        in_process(InProcessRow::InformerCovering),
    ];
    for kind in CacheKind::ALL {
        if !rows.iter().any(|r| r.name == kind.name()) {
            rows.push(in_process(InProcessRow::Cache(kind)));
        }
    }
    rows
}

/// The rows named in `names` (report order kept as given), or every row when `names` is empty.
pub fn select(names: &[String]) -> Result<Vec<StoreRow>, String> {
    let all = registry();
    if names.is_empty() {
        return Ok(all);
    }
    names
        .iter()
        .map(|n| {
            all.iter().find(|r| &r.name == n).cloned().ok_or_else(|| {
                let known: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
                format!("unknown row {n:?} (rows: {})", known.join(", "))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_selected_by_name_in_the_order_given() {
        let rows = select(&["locked".into(), "snapshot".into()]).unwrap();
        assert_eq!(rows[0].runner, Runner::InProcess(InProcessRow::Cache(CacheKind::Locked)));
        assert_eq!(rows[1].name, "snapshot");
        assert!(select(&["etcd".into()]).unwrap_err().contains("unknown row \"etcd\""));
    }

    #[test]
    fn the_default_rows_are_every_cache_every_informer_of_ours_and_both_client_go_rows() {
        let all = select(&[]).unwrap();
        // Ours: snapinformer, -compact, -arena, -keys; and the two client-go rows.
        assert_eq!(all.len(), CacheKind::ALL.len() + 6);
        let names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names[..5],
            ["snapinformer", "client-go", "snapshot", "snapshot-bg", "client-go-indexer"],
            "the pairs come first"
        );
        for name in [CLIENT_GO, CLIENT_GO_INDEXER] {
            let row = all.iter().find(|r| r.name == name).unwrap();
            assert_eq!(row.runner, Runner::ClientGo);
        }
        for kind in CacheKind::ALL {
            assert!(names.contains(&kind.name()), "{} is a default row", kind.name());
        }
        let compact = all.iter().find(|r| r.name == "snapinformer-compact").unwrap();
        assert_eq!(compact.runner, Runner::InProcess(InProcessRow::InformerCompact));
        assert_eq!(group("snapinformer-compact"), Group::Pipeline);
        let arena = all.iter().find(|r| r.name == "snapinformer-arena").unwrap();
        assert_eq!(arena.runner, Runner::InProcess(InProcessRow::InformerArena));
        assert_eq!(group("snapinformer-arena"), Group::Pipeline);
        let covering = all.iter().find(|r| r.name == "snapinformer-covering").unwrap();
        assert_eq!(covering.runner, Runner::InProcess(InProcessRow::InformerCovering));
        assert_eq!(group("snapinformer-covering"), Group::Pipeline);
    }

    #[test]
    fn every_pair_names_rows_of_the_same_group() {
        for pair in PAIRS {
            assert_eq!(group(pair.ours), group(pair.anchor), "{pair:?}");
            assert_ne!(group(pair.ours), Group::Control);
        }
        assert_eq!(group("locked-batch"), Group::Control);
    }
}
