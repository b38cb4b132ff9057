//! The embedding example of docs/EMBEDDING.md is `examples/embed.rs`, which
//! `cargo test` compiles: this test checks that the page shows those lines
//! verbatim.

use std::path::Path;

/// The lines of `text` between the line `// README begin` and `// README end`,
/// without their common four-space indentation.
fn marked_region(text: &str) -> String {
    let mut lines = text.lines().skip_while(|l| l.trim() != "// README begin").skip(1);
    let region: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "// README end").collect();
    assert!(!region.is_empty(), "examples/embed.rs has no README markers");
    region.iter().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect::<Vec<_>>().join("\n")
}

/// The first ```rust block after the heading `section`.
fn readme_block(readme: &str, section: &str) -> String {
    let after =
        readme.split_once(section).unwrap_or_else(|| panic!("no {section:?} in docs/EMBEDDING.md"));
    let start = after.1.split_once("```rust\n").expect("a rust block in the section").1;
    start.split_once("\n```").expect("the rust block ends").0.to_string()
}

#[test]
fn readme_embedding_example_is_the_compiled_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = std::fs::read_to_string(root.join("examples/embed.rs")).unwrap();
    let readme = std::fs::read_to_string(root.join("../../docs/EMBEDDING.md")).unwrap();
    let expected = marked_region(&example);
    let shown = readme_block(&readme, "\n## The node\n");
    assert_eq!(
        shown, expected,
        "docs/EMBEDDING.md's example differs from crates/node/examples/embed.rs; \
         copy the lines between the README markers into docs/EMBEDDING.md"
    );
}
