//! Runs the data-driven scripts in `tests/testdata` (the format is described
//! in [`tenure_core::testkit::script`]): each stanza's commands, then a
//! comparison of what they printed with the expected output written below
//! them. Set `TENURE_REWRITE=1` to write the actual output into the scripts
//! instead (then review the diff: it is the test's oracle).

use std::fs;
use std::path::{Path, PathBuf};
use tenure_core::testkit::script;

/// The environment variable that turns comparison into rewriting.
const REWRITE: &str = "TENURE_REWRITE";

fn scripts() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    files
}

/// The lines of `expected` and `actual` that differ, as `-` and `+` lines
/// with their line numbers (a longest-common-subsequence diff: scripts are short).
fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] =
                if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("-{:>4} {}\n", i + 1, a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+{:>4} {}\n", j + 1, b[j]));
            j += 1;
        }
    }
    out
}

#[test]
fn every_script_prints_what_it_expects() {
    let files = scripts();
    assert!(files.len() >= 6, "the scripts are missing: {files:?}");
    let rewrite = std::env::var_os(REWRITE).is_some();
    let mut failures = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let actual = script::rewrite(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if actual == text {
            continue;
        }
        if rewrite {
            fs::write(&path, &actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        } else {
            failures.push(format!("{}:\n{}", path.display(), diff(&text, &actual)));
        }
    }
    assert!(
        failures.is_empty(),
        "scripts whose output changed (rerun with {REWRITE}=1 to accept, then review):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_diff_shows_changed_lines() {
    assert_eq!(diff("a\nb\nc\n", "a\nx\nc\n"), "-   2 b\n+   2 x\n");
    assert_eq!(diff("a\n", "a\n"), "");
}
