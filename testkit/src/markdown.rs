//! Reading Markdown as GitHub renders it, for the tests that check the docs: which lines are
//! prose (outside fenced code) and the anchors its headings get.

use std::collections::{BTreeMap, BTreeSet};

/// GitHub's anchor for a heading's text (github-slugger): inline links reduced to their text,
/// lower case, every character but letters, digits, `-`, `_` and spaces dropped, spaces to `-`.
pub fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](target)` renders as `text`.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](") {
            Some(close) if after[close + 2..].contains(')') => {
                text.push_str(&after[..close]);
                let target = &after[close + 2..];
                rest = &target[target.find(')').map_or(target.len(), |i| i + 1)..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Whether `line` opens or closes a fenced code block, and with which fence character.
fn fence(line: &str) -> Option<char> {
    let t = line.trim_start();
    ['`', '~']
        .into_iter()
        .find(|c| t.starts_with(&c.to_string().repeat(3)))
}

/// The lines of a Markdown file outside fenced code blocks, with their line numbers.
pub fn prose_lines(markdown: &str) -> Vec<(usize, &str)> {
    let mut open: Option<char> = None;
    let mut lines = Vec::new();
    for (i, line) in markdown.lines().enumerate() {
        match (open, fence(line)) {
            (None, Some(c)) => open = Some(c),
            (Some(o), Some(c)) if o == c => open = None,
            (None, None) => lines.push((i + 1, line)),
            _ => {}
        }
    }
    lines
}

/// The anchors GitHub gives a Markdown file's headings; a repeated one gets `-1`, `-2`, ...
pub fn heading_anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(markdown) {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with([' ', '\t']) {
            continue;
        }
        let text = line[hashes..].trim().trim_end_matches('#').trim();
        let base = slug(text);
        let n = seen.entry(base.clone()).or_default();
        anchors.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    anchors
}
