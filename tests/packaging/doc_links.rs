//! The documentation's links resolve: every relative Markdown link `[..](path#anchor)` in a
//! tracked `*.md` file names a file or folder that exists and, with an anchor into a Markdown
//! file, a heading whose GitHub anchor that is; every link to this repository's own files on
//! GitHub (`https://github.com/mosc-guard/mosc-guard/blob/main/...`, the alerts' `runbook_url`
//! among them) in any tracked file does the same; and every `docs/<name>.md` a file mentions in
//! plain text exists. A doc moved or a heading renamed without its references fails here,
//! naming every broken one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use testkit::markdown::{heading_anchors, prose_lines, slug};

/// The repository as GitHub serves its files; links under it are checked like relative ones.
const REPO_BLOB: &str = "https://github.com/mosc-guard/mosc-guard/blob/main/";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's files: tracked ones and new ones not ignored (so a doc is checked before
/// it is committed), deleted ones left out.
fn repo_files() -> Vec<PathBuf> {
    let out = Command::new("git")
        .current_dir(root())
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .expect("run git ls-files (the test reads the tracked files)");
    assert!(
        out.status.success(),
        "git ls-files failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .filter(|p| root().join(p).is_file())
        .collect()
}

/// `line` with its inline code spans blanked out, so a link shown as code is not followed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// The targets of the inline links `[text](target)` (and images) in a line of prose; a
/// target's optional title (`"..."`) and angle brackets are dropped.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = line.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        // The target ends at the `)` that balances the `(`.
        let mut depth = 0usize;
        let mut end = None;
        for (j, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(j);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let target = after[..end].trim();
        let target = target.split_once(" \"").map_or(target, |(t, _)| t);
        let target = target.trim_start_matches('<').trim_end_matches('>');
        targets.push(target.to_string());
        rest = &after[end..];
    }
    targets
}

/// `base` joined with a relative `path`, `..` and `.` resolved; `None` if it leaves the
/// repository.
fn normalize(base: &Path, path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    let joined = if let Some(abs) = path.strip_prefix('/') {
        PathBuf::from(abs)
    } else {
        base.join(path)
    };
    for c in joined.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// Checks one link target of `from` (a repository path; `dir` is where relative paths start).
/// Returns why it is broken, if it is.
fn check_target(
    dir: &Path,
    from: &Path,
    target: &str,
    anchors_of: &mut BTreeMap<PathBuf, BTreeSet<String>>,
) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_path_buf()
    } else {
        match normalize(dir, path) {
            Some(p) => p,
            None => return Some(format!("{path} leaves the repository")),
        }
    };
    let full = root().join(&file);
    if !full.exists() {
        return Some(format!("{} does not exist", file.display()));
    }
    // `file.md#` (a prefix such as tests/packaging/alerts.rs's RUNBOOK_BASE) names no heading.
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if file.extension().and_then(|e| e.to_str()) != Some("md") {
        // Anchors into source files (`#L10`) are GitHub's line links, not headings.
        return None;
    }
    let anchors = anchors_of
        .entry(file.clone())
        .or_insert_with(|| heading_anchors(&std::fs::read_to_string(&full).unwrap_or_default()));
    if anchors.contains(anchor) {
        None
    } else {
        Some(format!(
            "{} has no heading with anchor #{anchor}",
            file.display()
        ))
    }
}

#[test]
fn every_relative_markdown_link_resolves() {
    let mut anchors_of = BTreeMap::new();
    let mut broken = Vec::new();
    let mut checked = 0;
    let files = repo_files();
    let docs: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("md"))
        .collect();
    assert!(
        docs.iter().any(|p| p.as_path() == Path::new("README.md")),
        "README.md is among the files read ({docs:?})"
    );
    for doc in docs {
        let text = std::fs::read_to_string(root().join(doc))
            .unwrap_or_else(|e| panic!("read {}: {e}", doc.display()));
        let dir = doc.parent().unwrap_or(Path::new(""));
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                let target = match target.strip_prefix(REPO_BLOB) {
                    Some(inside) => format!("/{inside}"),
                    None if target.contains("://") || target.starts_with("mailto:") => continue,
                    None => target,
                };
                checked += 1;
                if let Some(why) = check_target(dir, doc, &target, &mut anchors_of) {
                    broken.push(format!("{}:{n}: ({target}): {why}", doc.display()));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: is the parser broken?"
    );
    assert_none_broken(&broken);
}

/// Every `https://github.com/mosc-guard/mosc-guard/blob/main/<path>[#anchor]` in any tracked file
/// (the PrometheusRule's `runbook_url`s, the bundle's links, source comments) resolves.
#[test]
fn every_link_to_this_repository_on_github_resolves() {
    let mut anchors_of = BTreeMap::new();
    let mut broken = Vec::new();
    let mut runbook_urls = 0;
    for file in repo_files() {
        let Ok(text) = std::fs::read_to_string(root().join(&file)) else {
            continue; // not text
        };
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(i) = rest.find(REPO_BLOB) {
                let after = &rest[i + REPO_BLOB.len()..];
                let end = after
                    .find(|c: char| c.is_whitespace() || "\"'`)<>,]".contains(c))
                    .unwrap_or(after.len());
                let target = after[..end].trim_end_matches('.');
                if line.contains("runbook_url:") && file.starts_with("manifests") {
                    runbook_urls += 1;
                }
                if let Some(why) = check_target(Path::new(""), &file, target, &mut anchors_of) {
                    broken.push(format!(
                        "{}:{}: {REPO_BLOB}{target}: {why}",
                        file.display(),
                        n + 1
                    ));
                }
                rest = &after[end..];
            }
        }
    }
    assert!(
        runbook_urls >= 7,
        "the PrometheusRule under manifests/ has a runbook_url per alert (found {runbook_urls})"
    );
    assert_none_broken(&broken);
}

/// A `docs/<name>.md` named in plain text (a source comment, a manifest's description, a
/// test's message) names a file that exists.
#[test]
fn every_docs_file_named_in_plain_text_exists() {
    let mut broken = Vec::new();
    for file in repo_files() {
        // The test CRDs' comments name other repositories' docs (openshift/api's).
        if file.starts_with("tests/crds") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root().join(&file)) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(i) = rest.find("docs/") {
                let after = &rest[i + "docs/".len()..];
                let name_len = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                    .unwrap_or(after.len());
                let preceded_by_name = rest[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if name_len > 0 && after[name_len..].starts_with(".md") && !preceded_by_name {
                    let doc = format!("docs/{}.md", &after[..name_len]);
                    if !root().join(&doc).is_file() {
                        broken.push(format!("{}:{}: {doc}", file.display(), n + 1));
                    }
                }
                rest = after;
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} mention(s) of a docs file that does not exist:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug("Shutdown: the drain delay"),
        "shutdown-the-drain-delay"
    );
    assert_eq!(slug("`make demo`"), "make-demo");
    assert_eq!(slug("8. Releases"), "8-releases");
    assert_eq!(slug("MoscGuardUnavailable"), "moscguardunavailable");
    assert_eq!(
        slug("Checking from nothing: `hack/fresh-check.sh`"),
        "checking-from-nothing-hackfresh-checksh"
    );
    assert_eq!(
        slug("The image: one name, one tag"),
        "the-image-one-name-one-tag"
    );
    assert_eq!(slug("See [policy](policy.md) now"), "see-policy-now");
    let anchors = heading_anchors("# A\n## Same\n```\n# not a heading\n```\n### Same\n#hashtag\n");
    assert_eq!(
        anchors,
        ["a", "same", "same-1"]
            .map(String::from)
            .into_iter()
            .collect()
    );
}

#[test]
fn links_are_found_outside_code() {
    assert_eq!(
        link_targets("see [a](x.md#b), `[c](not.md)` and ![img](i.png \"t\") [d](<y z.md>)"),
        ["x.md#b", "i.png", "y z.md"].map(String::from)
    );
    assert_eq!(
        link_targets("[f](https://e.com/a_(b)) end"),
        ["https://e.com/a_(b)"].map(String::from)
    );
    let lines = prose_lines("a\n```sh\n[x](gone.md)\n```\nb\n");
    assert_eq!(lines, vec![(1, "a"), (5, "b")]);
}

/// A repository path a Markdown file shows as code (`` `tests/serve/https/` ``, `` `src/core/release.rs` ``)
/// exists, or is an output the repository ignores (`certs/generated/`). Globs, placeholders and
/// elisions (`*`, `<name>`, `{..}`, `$VAR`, `...`) are not paths; `path:detail` is read as `path`.
#[test]
fn every_repository_path_shown_in_the_docs_exists() {
    const TOP: [&str; 11] = [
        "src/",
        "tests/",
        "testkit/",
        "hack/",
        "manifests/",
        "examples/",
        "benches/",
        "bundle/",
        "docs/",
        "plugins/",
        "certs/",
    ];
    let mut broken = Vec::new();
    for doc in repo_files()
        .into_iter()
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("md"))
    {
        let text = std::fs::read_to_string(root().join(&doc))
            .unwrap_or_else(|e| panic!("read {}: {e}", doc.display()));
        for (n, line) in prose_lines(&text) {
            for (i, span) in line.split('`').enumerate() {
                // Odd pieces are inside code spans.
                if i % 2 == 0 || span.contains(char::is_whitespace) {
                    continue;
                }
                if !TOP.iter().any(|top| span.starts_with(top))
                    || span.contains(['*', '<', '{', '$'])
                    || span.contains("...")
                {
                    continue;
                }
                let path = span.split(':').next().unwrap_or(span);
                if root().join(path.trim_end_matches('/')).exists() {
                    continue;
                }
                // A folder's ignore pattern (`/certs/generated/`) matches only with its `/`.
                let ignored = Command::new("git")
                    .current_dir(root())
                    .args(["check-ignore", "-q", "--no-index", path])
                    .status()
                    .is_ok_and(|s| s.success());
                if !ignored {
                    broken.push(format!("{}:{n}: `{span}`", doc.display()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} path(s) shown in the docs do not exist:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

/// Fails naming every broken link found.
fn assert_none_broken(broken: &[String]) {
    assert!(
        broken.is_empty(),
        "{} broken link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}
