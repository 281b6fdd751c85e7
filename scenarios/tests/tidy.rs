//! The tidy ratchet (TigerBeetle's idea): no function outside tests is
//! longer than 70 lines and no source file longer than 600, except those
//! listed in `scenarios/tests/tidy_allow.txt` at no more than their listed
//! length. The list may only shrink: a listed item that got short enough,
//! or disappeared, must be struck from it, and a new long one fails.
//!
//! The scanner blanks comments, strings and char literals, then matches
//! braces from each `fn` to its body's end; unit-test modules
//! (`#[cfg(test)]` to the end of the file, by house style) and `tests/`
//! directories are not counted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Longest function body allowed outside tests, in lines (signature to
/// closing brace).
const FUNCTION_LINES_MAX: usize = 70;
/// Longest source file allowed, in lines.
const FILE_LINES_MAX: usize = 600;
/// Source roots of the workspace's crates, relative to the workspace root.
const SOURCE_ROOTS: &[&str] = &[
    "core/src",
    "net/src",
    "client/src",
    "node/src",
    "scenarios/src",
    "sim/src",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// `src` with comments, string and char literals replaced by spaces
/// (newlines kept), so braces inside them do not count.
fn blank_literals(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            // A raw string: r"…" or r#…#"…"#…#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &chars[i..j.min(chars.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{7f}') or a lifetime ('a).
            let end = if next == Some('\\') {
                (i + 2..chars.len().min(i + 12)).find(|&k| chars[k] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(end) = end {
                for _ in i..=end {
                    out.push(' ');
                }
                i = end + 1;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// Every function with a body: (name, first line, lines long).
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let line_of = |at: usize| chars[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < chars.len() {
        let is_fn = chars[i] == 'f'
            && chars[i + 1] == 'n'
            && chars[i + 2].is_whitespace()
            && !ident_before(&chars, i);
        if !is_fn {
            i += 1;
            continue;
        }
        let name: String = chars[i + 3..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        // The body opens at the first `{` outside parentheses; a `;` first
        // means a declaration without a body.
        let mut j = i + 3;
        let mut parens = 0i32;
        let mut open = None;
        while j < chars.len() {
            match chars[j] {
                '(' | '[' => parens += 1,
                ')' | ']' => parens -= 1,
                ';' if parens == 0 => break,
                '{' if parens == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let Some(open) = open else {
            i = j;
            continue;
        };
        let mut depth = 0i32;
        let mut k = open;
        while k < chars.len() {
            match chars[k] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        let first = line_of(i);
        let last = line_of(k.min(chars.len() - 1));
        out.push((name, first, last - first + 1));
        // Nested functions are measured too.
        i = open + 1;
    }
    out
}

/// The measured tree: `path::fn` → longest such function, and `path` →
/// file lines, each only where over its limit.
fn measure() -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in SOURCE_ROOTS {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 100,
        "the scanner found the workspace's sources"
    );
    let mut long_fns = BTreeMap::new();
    let mut long_files = BTreeMap::new();
    for path in files {
        let rel = path
            .strip_prefix(&root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&path).expect("utf-8 source");
        let lines = text.lines().count();
        if lines > FILE_LINES_MAX {
            long_files.insert(rel.clone(), lines);
        }
        let code = blank_literals(&text);
        let production = match code.find("#[cfg(test)]") {
            Some(at) => &code[..at],
            None => &code[..],
        };
        for (name, _, len) in functions(production) {
            if len > FUNCTION_LINES_MAX {
                let entry = long_fns.entry(format!("{rel}::{name}")).or_insert(0);
                *entry = (*entry).max(len);
            }
        }
    }
    (long_fns, long_files)
}

/// The allow-list: `fn PATH::NAME LINES` and `file PATH LINES` lines.
fn allowed() -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let mut fns = BTreeMap::new();
    let mut files = BTreeMap::new();
    for line in include_str!("tidy_allow.txt").lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(kind), Some(item), Some(len), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            panic!("tidy_allow.txt: bad line {line:?}");
        };
        let len: usize = len.parse().expect("a line count");
        match kind {
            "fn" => fns.insert(item.to_owned(), len),
            "file" => files.insert(item.to_owned(), len),
            _ => panic!("tidy_allow.txt: unknown kind {kind:?}"),
        };
    }
    (fns, files)
}

fn ratchet(
    kind: &str,
    limit: usize,
    measured: &BTreeMap<String, usize>,
    allowed: &BTreeMap<String, usize>,
) -> String {
    let mut problems = String::new();
    for (item, &len) in measured {
        match allowed.get(item) {
            None => writeln!(
                problems,
                "{kind} {item} is {len} lines (limit {limit}): split it"
            )
            .expect("write"),
            Some(&cap) if len > cap => {
                writeln!(
                    problems,
                    "{kind} {item} grew to {len} lines (allowed {cap}): split it"
                )
                .expect("write");
            }
            Some(&cap) if len < cap => writeln!(
                problems,
                "{kind} {item} shrank to {len} lines: lower its line in tidy_allow.txt to {len}"
            )
            .expect("write"),
            Some(_) => {}
        }
    }
    for item in allowed.keys().filter(|i| !measured.contains_key(*i)) {
        writeln!(
            problems,
            "{kind} {item} is within {limit} lines or gone: strike it from tidy_allow.txt"
        )
        .expect("write");
    }
    problems
}

#[test]
fn functions_and_files_stay_within_their_limits_and_the_allow_list_only_shrinks() {
    let (long_fns, long_files) = measure();
    let (allowed_fns, allowed_files) = allowed();
    let mut problems = ratchet("fn", FUNCTION_LINES_MAX, &long_fns, &allowed_fns);
    problems.push_str(&ratchet(
        "file",
        FILE_LINES_MAX,
        &long_files,
        &allowed_files,
    ));
    assert!(problems.is_empty(), "tidy:\n{problems}");
}

#[test]
fn the_scanner_measures_bodies_and_ignores_braces_in_literals() {
    let code = blank_literals(
        "fn a() {\n    let s = \"}}}\";\n    let c = '}';\n    // }\n    /* { */\n}\nfn b(x: &'static str) -> Vec<u8>;\nfn c<'a>(x: &'a [u8; 2]) -> usize {\n    r#\"{\"#.len()\n}\n",
    );
    let got = functions(&code);
    assert_eq!(
        got,
        vec![("a".to_owned(), 1, 6), ("c".to_owned(), 8, 3)],
        "{code}"
    );
    let mut measured = BTreeMap::new();
    measured.insert("x.rs::long".to_owned(), 90);
    let allowed = BTreeMap::new();
    assert!(ratchet("fn", 70, &measured, &allowed).contains("split it"));
    let allowed = BTreeMap::from([("x.rs::long".to_owned(), 95)]);
    assert!(ratchet("fn", 70, &measured, &allowed).contains("lower its line"));
    let allowed = BTreeMap::from([("x.rs::gone".to_owned(), 95)]);
    assert!(ratchet("fn", 70, &BTreeMap::new(), &allowed).contains("strike it"));
}
