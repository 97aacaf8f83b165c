//! The layer rule, checked: every `crate::` path in `engine/src` names its own layer or a lower
//! one (`layout` → `store` → `read` → `write` → `ops`, with `error`, `options` and `metrics`
//! beneath all), through the module path (not a crate-root re-export), and the files import
//! each other in no circle. And the write path's rules: only `store/` names the RocksDB handle or builds a
//! WriteBatch, and a session's keys are first written by one function, from the two writers
//! that create sessions, and only the two writers of its system of record's own changes write
//! past a commit hook. And `Store`'s method map (its type doc, `store/mod.rs`) names every
//! public method of `Store` with the file that holds it, and nothing else (the fleet boundary's
//! test, `ops/tests/fleet_boundary.rs`, calls each of them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first; `error`, `options` and `metrics` are the base every layer may use.
const LAYERS: [&str; 6] = ["base", "layout", "store", "read", "write", "ops"];

/// The layer of a module path's first segment, if it is one.
fn layer_of_module(first: &str) -> Option<usize> {
    match first {
        "error" | "options" | "metrics" => Some(0),
        other => LAYERS.iter().position(|l| *l == other),
    }
}

/// Whether `module` is a test module (a `tests` module or one inside it).
fn is_tests(module: &str) -> bool {
    module.ends_with("::tests") || module.contains("::tests::")
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file (`ops/import/mod.rs` → `ops::import`).
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The code of a file without comments and its `#[cfg(test)] mod tests` (tests may reach
/// anywhere, as `test_support.rs` does).
fn code(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at]);
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path that follows `crate::` in `code`, a `{…}` group expanded one level deep.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let before = rest[..at].chars().last();
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let item = item.trim();
                if !item.is_empty() {
                    out.push(item.to_owned());
                }
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(after.len());
            out.push(after[..end].trim_end_matches(':').to_owned());
        }
    }
    out
}

/// The file module a path lands in: its longest prefix that is a known module.
fn target_module(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|m| modules.contains(m))
}

/// The engine's `src` directory and every `.rs` file under it, sorted. The directory is the one
/// cargo runs the test for, not the one it was compiled in: a target directory shared between
/// checkouts may hand this checkout a test binary built in another.
fn engine_sources() -> (PathBuf, Vec<PathBuf>) {
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let src = crate_dir.join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    (src, files)
}

#[test]
fn every_crate_path_goes_down_the_layers_and_no_files_import_in_a_circle() {
    let (src, files) = engine_sources();
    let mut modules = BTreeSet::new();
    for f in &files {
        modules.insert(module_of(f.strip_prefix(&src).expect("under src")));
    }
    let mut problems = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src");
        let module = module_of(rel);
        // Tests may reach anywhere, as `test_support.rs` does.
        if ["lib", "layering", "test_support"].contains(&module.as_str()) || is_tests(&module) {
            continue;
        }
        let first = module.split("::").next().unwrap_or_default();
        let Some(own) = layer_of_module(first) else {
            problems.push(format!("{}: in no layer", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(f).expect("read source");
        for path in crate_paths(&code(&text)) {
            let head = path.split("::").next().unwrap_or_default();
            let Some(layer) = layer_of_module(head) else {
                problems.push(format!(
                    "{}: `crate::{path}` is no layer's module path (use it, not a re-export)",
                    rel.display()
                ));
                continue;
            };
            if layer > own {
                problems.push(format!(
                    "{}: `crate::{path}` imports from {} above its layer {}",
                    rel.display(),
                    LAYERS[layer],
                    LAYERS[own]
                ));
            }
            if let Some(target) = target_module(&path, &modules).filter(|t| *t != module) {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    // A circle among files: a depth-first search finding a module on its own path.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        circles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| p == m) {
            circles.push(format!("{} → {m}", path[at..].join(" → ")));
            return;
        }
        if !done.insert(m.to_owned()) {
            return;
        }
        path.push(m.to_owned());
        for next in edges.get(m).into_iter().flatten() {
            visit(next, edges, path, done, circles);
        }
        path.pop();
    }
    let mut circles = Vec::new();
    let mut done = BTreeSet::new();
    for m in edges.keys() {
        visit(m, &edges, &mut Vec::new(), &mut done, &mut circles);
    }
    problems.extend(circles.into_iter().map(|c| format!("import circle: {c}")));
    assert!(
        problems.is_empty(),
        "layer rule broken:\n{}",
        problems.join("\n")
    );
}

/// Every source file under `src`, relative, with its text.
fn sources_with_text() -> Vec<(PathBuf, String)> {
    let (src, files) = engine_sources();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).expect("read source");
            (f.strip_prefix(&src).expect("under src").to_path_buf(), text)
        })
        .collect()
}

/// Where `code` names the store's RocksDB handle (a `.db` field) or builds a WriteBatch.
fn handle_uses(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    if code.contains("WriteBatch") {
        found.push("WriteBatch".to_owned());
    }
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices(".db") {
        let after = bytes.get(at + 3).copied().unwrap_or(b' ');
        if !(after.is_ascii_alphanumeric() || after == b'_' || after == b'"') {
            found.push(format!("`.db` at byte {at}"));
        }
    }
    found
}

/// Calls only some modules make (their tests aside): the call, those modules, and what it does.
const SOLE_CALLERS: [(&str, &[&str], &str); 2] = [
    // A session's keys come into being only here: a whole log landed (import, fork, a
    // migration's successor) or a live session created with its first batch.
    (
        ".insert_session(",
        &["ops::append::creation", "write::session_writer"],
        "create sessions",
    ),
    // A store with a commit hook takes changes without it only from the writers that apply
    // what its system of record holds: replicated appends and `Store::apply_recorded`.
    (
        "Recorded::by_the_system_of_record(",
        &["ops::append::call", "ops::retention"],
        "write past a commit hook",
    ),
];

#[test]
fn only_the_store_layer_touches_rocksdb_and_sole_callers_create_and_write_past_a_hook() {
    let mut problems = Vec::new();
    let mut callers = vec![BTreeSet::new(); SOLE_CALLERS.len()];
    for (rel, text) in sources_with_text() {
        let module = module_of(&rel);
        if module == "layering" {
            continue;
        }
        // Tests included: they plant damage through the store's seam too.
        let with_tests: String = text
            .lines()
            .map(|l| l.find("//").map_or(l, |at| &l[..at]))
            .collect::<Vec<_>>()
            .join("\n");
        if !module.starts_with("store") {
            for use_ in handle_uses(&with_tests) {
                problems.push(format!("{}: names {use_} outside store/", rel.display()));
            }
        }
        for ((call, ..), found) in SOLE_CALLERS.iter().zip(&mut callers) {
            if !is_tests(&module) && code(&text).contains(call) {
                found.insert(module.clone());
            }
        }
    }
    for ((call, sole, what), found) in SOLE_CALLERS.iter().zip(callers) {
        let sole: BTreeSet<String> = sole.iter().map(|m| (*m).to_owned()).collect();
        if found != sole {
            problems.push(format!("{found:?} {what} (`{call}`); only {sole:?} may"));
        }
    }
    assert!(
        problems.is_empty(),
        "write path rule broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_handle_checker_sees_what_it_must_refuse() {
    assert_eq!(handle_uses("let b = WriteBatch::default();").len(), 1);
    assert_eq!(handle_uses("self.db.put_cf(cf, k, v)").len(), 1);
    assert_eq!(handle_uses("store\n    .db\n    .get(k)").len(), 1);
    assert!(handle_uses("let dir = tmp.path().join(\"db\"); x.dbg").is_empty());
}

#[test]
fn the_checker_sees_what_it_must_refuse() {
    let code = code("use crate::{ops::fork::Segment, error::Error};\n// crate::ops in a comment\nlet x = crate::layout::keys::event_key(1);");
    assert_eq!(
        crate_paths(&code),
        [
            "ops::fork::Segment",
            "error::Error",
            "layout::keys::event_key"
        ]
    );
    assert_eq!(layer_of_module("ops"), Some(5));
    assert_eq!(layer_of_module("Store"), None);
}

/// Every `pub fn` of an `impl Store {` block in `text` (rustfmt's layout: methods at four
/// spaces, the block closed by a `}` in column 0).
fn store_methods(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line == "impl Store {" {
            inside = true;
        } else if line.starts_with('}') {
            inside = false;
        } else if let Some(rest) = line.strip_prefix("    pub fn ").filter(|_| inside) {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            out.push(rest[..end].to_owned());
        }
    }
    out
}

/// Every public method of `Store` (its `impl Store` blocks' `pub fn`s), with the file it is in.
fn store_methods_by_file(sources: &[(PathBuf, String)]) -> BTreeSet<(String, String)> {
    let mut methods = BTreeSet::new();
    for (rel, text) in sources {
        for name in store_methods(text) {
            methods.insert((name, rel.display().to_string()));
        }
    }
    methods
}

/// The names of every public method of `Store`.
pub(crate) fn store_public_methods() -> BTreeSet<String> {
    store_methods_by_file(&sources_with_text())
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn the_store_method_map_names_every_public_method_where_it_lives() {
    let sources = sources_with_text();
    let methods = store_methods_by_file(&sources);
    // The map: the rows of `Store`'s doc table, `| concern | methods | file |`.
    let (_, store) = sources
        .iter()
        .find(|(rel, _)| rel == Path::new("store/mod.rs"))
        .expect("store/mod.rs");
    let mut mapped = BTreeSet::new();
    for row in store.lines().filter_map(|l| l.strip_prefix("/// |")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let [_, names, file, ..] = cells[..] else {
            continue;
        };
        let file = file.trim_matches('`');
        for link in names.split("(Store::").skip(1) {
            let end = link.find(')').unwrap_or(link.len());
            mapped.insert((link[..end].to_owned(), file.to_owned()));
        }
    }
    assert!(methods.len() > 40, "found only {methods:?}");
    assert_eq!(
        mapped, methods,
        "Store's method map (store/mod.rs) and its public methods (name, file) differ"
    );
}
