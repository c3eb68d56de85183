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
//! In-process rows ([`CacheKind`]) run in this executable; a row backed by another program (the
//! Go `client-go` worker) is a [`Runner::Program`] entry.

use std::path::PathBuf;

use crate::rows::CacheKind;

/// How a row's worker is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    /// This executable's `store --worker <name>`, running the in-process cache.
    InProcess(CacheKind),
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

/// Every row `store` can run, in report order; without `--rows`, all of them run.
pub fn registry() -> Vec<StoreRow> {
    CacheKind::ALL
        .into_iter()
        .map(|k| StoreRow { name: k.name().to_owned(), runner: Runner::InProcess(k) })
        .collect()
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
        assert_eq!(rows[0].runner, Runner::InProcess(CacheKind::Locked));
        assert_eq!(rows[1].name, "snapshot");
        assert_eq!(select(&[]).unwrap().len(), CacheKind::ALL.len());
        assert!(select(&["etcd".into()]).unwrap_err().contains("unknown row \"etcd\""));
    }
}
