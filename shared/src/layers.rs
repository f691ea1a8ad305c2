//! The layer rule, checked over the source tree: a module may use its own folder and the
//! folders below it ([`LAYERS`], bottom first), never one above, and no two files use each
//! other, directly or around a circle. Every `crate::` path counts (imports, qualified names,
//! macros); comments do not. The circle rule holds for every crate of the repository too
//! (functions, `local/`, `tests/`): [`crate_roots`]. No file is over [`MAX_FILE_LINES`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The folders of `shared/src`, bottom first.
const LAYERS: [&str; 5] = ["model", "store", "observe", "ops", "http"];

/// A source file by its module path (`ops::ingest::state`) with the text it holds; folders in
/// `other_roots` (another crate's sources) are left out.
fn modules(root: &Path, other_roots: &[PathBuf]) -> BTreeMap<String, String> {
    fn walk(dir: &Path, other_roots: &[PathBuf], found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("src is readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                if !other_roots.contains(&path) {
                    walk(&path, other_roots, found);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(root, other_roots, &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(root).ok()?.with_extension("");
            let mut parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            Some((parts.join("::"), without_comments(&text)))
        })
        .collect()
}

/// `text` without `//` and `/* */` comments (doc comments included) and string literals.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '"' && !escaped {
                        break;
                    }
                    escaped = c == '\\' && !escaped;
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    out
}

/// Every module path a file names: `crate::a::b`, each branch of `crate::{a, b::c}`, and
/// `super::x` resolved from `module`.
fn named_paths(module: &str, text: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| {
                p.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|p| !p.is_empty())
            .collect()
    };
    let mut paths = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for branch in group[..end].split(',') {
                paths.push(ident(branch.trim()));
            }
        } else {
            paths.push(ident(after));
        }
        rest = after;
    }
    let own: Vec<String> = module.split("::").map(str::to_string).collect();
    let mut rest = text;
    while let Some(at) = rest.find("super::") {
        let before_is_path = rest[..at].ends_with("::");
        let after = &rest[at + "super::".len()..];
        if !before_is_path && !after.starts_with('*') && !after.starts_with("super") {
            let parent = own[..own.len().saturating_sub(1)].to_vec();
            // `super::{a, b::c}`: each branch, as for `crate::{..}`.
            let branches: Vec<&str> = match after.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(group.len())]
                    .split(',')
                    .collect(),
                None => vec![after],
            };
            for branch in branches {
                let mut path = parent.clone();
                path.extend(ident(branch.trim()));
                paths.push(path);
            }
        }
        rest = after;
    }
    paths
}

/// The file a path lands in: the longest module path that starts it.
fn file_of<'a>(path: &[String], files: &'a BTreeMap<String, String>) -> Option<&'a str> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find_map(|m| files.get_key_value(&m).map(|(k, _)| k.as_str()))
}

fn layer(module: &str) -> Option<usize> {
    let top = module.split("::").next()?;
    LAYERS.iter().position(|l| *l == top)
}

/// Whether `text` names a path starting at `name` (`name::x`, not `other::name::x`).
fn names_relative(text: &str, name: &str) -> bool {
    let pattern = format!("{name}::");
    text.match_indices(&pattern).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

/// File-to-file uses, each file's use of itself left out: the paths of [`named_paths`], and a
/// parent's relative paths into its own submodules (`report::markdown` in `bench/mod.rs`).
fn uses(files: &BTreeMap<String, String>) -> BTreeMap<&str, BTreeSet<&str>> {
    files
        .iter()
        .map(|(module, text)| {
            let mut targets: BTreeSet<&str> = named_paths(module, text)
                .iter()
                .filter_map(|p| file_of(p, files))
                .filter(|t| *t != module && !t.is_empty())
                .collect();
            let prefix = if module.is_empty() {
                String::new()
            } else {
                format!("{module}::")
            };
            for child in files.keys() {
                let Some(name) = child.strip_prefix(&prefix) else {
                    continue;
                };
                if !name.is_empty() && !name.contains("::") && names_relative(text, name) {
                    targets.insert(child.as_str());
                }
            }
            (module.as_str(), targets)
        })
        .collect()
}

/// Every circle of uses, as the files on it (Tarjan's strongly connected components).
fn circles<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(v: &'a str, g: &BTreeMap<&'a str, BTreeSet<&'a str>>, s: &mut State<'a>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in g.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, g, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(v, graph, &mut state);
        }
    }
    state.found
}

/// Every crate's source folder under `dir`: a folder holding `lib.rs` or `main.rs` (a library,
/// a binary or an integration test binary), build output, dependencies and hidden folders left
/// out.
fn crate_roots(dir: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if dir.join("lib.rs").is_file() || dir.join("main.rs").is_file() {
        roots.push(dir.to_path_buf());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("a readable folder")
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if !name.starts_with('.') && name != "target" && name != "node_modules" {
            roots.extend(crate_roots(&path));
        }
    }
    roots
}

#[test]
fn no_module_imports_upward_and_none_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = modules(&root, &[]);
    let graph = uses(&files);
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        for to in targets {
            if let (Some(a), Some(b)) = (layer(from), layer(to)) {
                if b > a {
                    upward.push(format!("{from} -> {to}"));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "modules using a layer above their own: {upward:#?}"
    );
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "files using each other in a circle: {found:#?}"
    );
    for module in files.keys().filter(|m| !m.is_empty() && *m != "layers") {
        assert!(layer(module).is_some(), "{module} is in no layer folder");
    }
}

/// Lines a file of this crate may hold (issue 38 item 13): past it, a file holds more than one
/// idea and is split by idea.
const MAX_FILE_LINES: usize = 900;

#[test]
fn no_file_of_the_key_design_crate_is_over_900_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long: Vec<String> = modules(&root, &[])
        .iter()
        .map(|(module, text)| (module, text.lines().count()))
        .filter(|(_, lines)| *lines > MAX_FILE_LINES)
        .map(|(module, lines)| format!("{module}: {lines} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines, to split by idea: {long:#?}"
    );
}

#[test]
fn no_crate_of_the_repository_has_files_using_each_other_in_a_circle() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("shared/ sits in the repository");
    let roots = crate_roots(repo);
    assert!(
        roots.len() > 10,
        "the functions, local/ and tests/ crates: {roots:#?}"
    );
    let mut found = Vec::new();
    for root in &roots {
        let files = modules(root, &roots);
        for circle in circles(&uses(&files)) {
            let name = root.strip_prefix(repo).unwrap_or(root).display();
            found.push(format!("{name}: {}", circle.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "files using each other in a circle: {found:#?}"
    );
}

#[test]
fn the_check_sees_an_upward_use_and_a_circle() {
    let files: BTreeMap<String, String> = [
        (
            "model::a",
            "use crate::ops::b::thing; // crate::http::x in a comment",
        ),
        (
            "ops::b",
            "use super::c::{x};\nfn f() { crate::model::a::g() }",
        ),
        ("ops::c", "pub use crate::ops::b::f;"),
    ]
    .into_iter()
    .map(|(m, t)| (m.to_string(), without_comments(t)))
    .collect();
    let graph = uses(&files);
    assert_eq!(
        graph["model::a"],
        BTreeSet::from(["ops::b"]),
        "the comment is not a use"
    );
    // model::a -> ops::b -> ops::c -> ops::b and ops::b -> model::a: one circle of all three.
    assert_eq!(circles(&graph), vec![vec!["model::a", "ops::b", "ops::c"]]);
    let acyclic: BTreeMap<String, String> = [("model::a", ""), ("ops::b", "use crate::model::a;")]
        .into_iter()
        .map(|(m, t)| (m.to_string(), without_comments(t)))
        .collect();
    assert!(
        circles(&uses(&acyclic)).is_empty(),
        "a use one way is no circle"
    );
}
