//! The README's Rust example is the facade crate's doctest (`src/lib.rs`), line for line, so that
//! what a newcomer copies from the README is what `cargo test` runs.

use crate::fixtures::checkout;

/// The lines inside the first ```` ```rust ```` fence of `lines`.
fn rust_block(lines: impl Iterator<Item = String>) -> Vec<String> {
    lines
        .skip_while(|l| l.trim() != "```rust")
        .skip(1)
        .take_while(|l| l.trim() != "```")
        .collect()
}

#[test]
fn the_readme_rust_example_is_the_crate_doctest() {
    let root = checkout();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let shown = rust_block(readme.lines().map(str::to_owned));
    let doc = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l).to_owned());
    // Lines rustdoc hides (`# fn main() …`) run but are not shown.
    let doctest: Vec<String> = rust_block(doc)
        .into_iter()
        .filter(|l| l != "#" && !l.starts_with("# "))
        .collect();
    assert!(shown.len() > 10, "README.md has no Rust example: {shown:?}");
    assert_eq!(
        shown, doctest,
        "README.md's Rust example and src/lib.rs's doctest differ"
    );
}
