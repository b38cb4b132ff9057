//! Replays every file of `corpus/<target>/` through its target: the seeds
//! (`seed-*`, made by `tenure_fuzz::seeds`) and every input that ever
//! crashed a target (`crash-*`, the regression tests of the bugs they found).

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target)
}

#[test]
fn every_corpus_file_passes_its_target() {
    for &(name, run) in tenure_fuzz::TARGETS {
        let dir = corpus(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(files.len() >= 3, "{}: {} files, expected the seeds", dir.display(), files.len());
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let result = std::panic::catch_unwind(|| run(&data));
            assert!(result.is_ok(), "{} fails its target", file.display());
        }
    }
}

/// The seed files are what `tenure_fuzz::seeds` makes today (a format change
/// shows here); `TENURE_FUZZ_WRITE_SEEDS=1 cargo test -p tenure-fuzz` writes them.
#[test]
fn the_seed_files_are_up_to_date() {
    let write = std::env::var_os("TENURE_FUZZ_WRITE_SEEDS").is_some();
    for (target, name, bytes) in tenure_fuzz::seeds::all() {
        assert!(tenure_fuzz::TARGETS.iter().any(|&(t, _)| t == target), "{target}");
        let path = corpus(target).join(format!("seed-{name}"));
        if write {
            std::fs::create_dir_all(corpus(target)).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap_or_default();
        assert!(
            on_disk == bytes,
            "{} is out of date: TENURE_FUZZ_WRITE_SEEDS=1 cargo test -p tenure-fuzz",
            path.display()
        );
    }
}
