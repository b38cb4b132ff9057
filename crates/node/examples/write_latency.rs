//! Measures the latency of a durable state write on the disk of the given
//! directory: [`DataDir::write`] (the state file's slot and the lock file's
//! record, each synced, at the same time) against one in-place slot write
//! with `fdatasync` (what a write cost before the lock file kept a record).
//!
//! ```text
//! cargo run --release -p tenure-node --example write_latency -- [DIR] [WRITES]
//! ```
//!
//! DIR defaults to a temporary directory under the current one (the disk the
//! data directory would be on); WRITES to 1000. The two kinds of write
//! alternate, so both see the same disk weather.

use std::os::unix::fs::FileExt;
use std::time::Instant;
use tenure_core::{HardState, NodeId, ProtocolKind, Term};
use tenure_node::storage::{DataDir, Identity, SLOT_LEN};

fn percentiles(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    format!("p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms", at(0.5), at(0.9), at(0.99))
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let base = tempfile::tempdir_in(args.next().unwrap_or_else(|| ".".into()))?;
    let writes: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000).max(1);
    let id =
        Identity { cluster_id: "bench".into(), node_id: NodeId(1), protocol: ProtocolKind::Raft };
    let (data, _) = DataDir::open(&base.path().join("data"), id).map_err(std::io::Error::other)?;
    let single = std::fs::File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(base.path().join("single"))?;
    single.write_all_at(&[0; 2 * SLOT_LEN], 0)?;
    single.sync_all()?;
    let (mut with_record, mut slot_only) = (Vec::new(), Vec::new());
    for i in 1..=writes {
        let t = Instant::now();
        data.write(HardState { term: Term(i), voted_for: Some(NodeId(1)) })?;
        with_record.push(t.elapsed().as_secs_f64() * 1e3);
        data.mirror()?;
        let t = Instant::now();
        single.write_all_at(&[i as u8; SLOT_LEN], 0)?;
        single.sync_data()?;
        slot_only.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("{writes} writes in {}", base.path().display());
    println!("state slot + lock record (DataDir::write): {}", percentiles(with_record));
    println!("state slot only (one fdatasync):           {}", percentiles(slot_only));
    Ok(())
}
