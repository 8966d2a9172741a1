//! The files of a dump: which are read, their text, and which claim to hold the kinds the policy
//! reads (and, for a recovery plan, MachineConfigs). Real dumps' quirks are read as such (a UTF-8
//! BOM, YAML merge keys, symlinks followed, a loop reported). Flow collections nested deeper than
//! [`MAX_FLOW_DEPTH`] are refused by a linear scan first: the YAML parser spends time quadratic in
//! the nesting before its own limit rejects them.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::Want;
use super::skipped::Skipped;

/// Deeper `[`/`{` nesting than any Kubernetes object needs.
pub(super) const MAX_FLOW_DEPTH: usize = 64;

/// The kinds a dump must hold whole, by the names files and messages use.
const KINDS: [(&str, &str); 6] = [
    ("Node", "Nodes"),
    ("MachineConfigPool", "MachineConfigPools"),
    ("MachineOSConfig", "MachineOSConfigs"),
    ("MachineOSBuild", "MachineOSBuilds"),
    ("Machine", "Machines"),
    ("ClusterVersion", "ClusterVersions"),
];

/// Path components (directories or file stems) that say a file holds one of the kinds, besides
/// the kinds' own names, singular or plural, in any case.
const SHORT_NAMES: [(&str, &str); 6] = [
    ("mcp", "MachineConfigPools"),
    ("mcps", "MachineConfigPools"),
    ("mosc", "MachineOSConfigs"),
    ("moscs", "MachineOSConfigs"),
    ("mosb", "MachineOSBuilds"),
    ("mosbs", "MachineOSBuilds"),
];

/// What a recovery plan reads besides: the rendered MachineConfigs' names.
const RECOVERY_KINDS: [(&str, &str); 1] = [("MachineConfig", "MachineConfigs")];
const RECOVERY_SHORT_NAMES: [(&str, &str); 1] = [("mc", "MachineConfigs")];

/// Which of the kinds `rel` (a path inside the dump) or the file's bytes say it holds.
pub(super) fn claim(rel: &Path, raw: &[u8], want: Want) -> Option<&'static str> {
    let content = |kinds: &[(&str, &'static str)]| by_content(&lossy(raw), kinds);
    match want {
        Want::Policy => by_path(rel, &KINDS, &SHORT_NAMES).or_else(|| content(&KINDS)),
        Want::Recovery => by_path(rel, &KINDS, &SHORT_NAMES)
            .or_else(|| by_path(rel, &RECOVERY_KINDS, &RECOVERY_SHORT_NAMES))
            .or_else(|| content(&KINDS))
            .or_else(|| content(&RECOVERY_KINDS)),
    }
}

/// The kind (as its plural) named by the first component of `rel` that names one of `kinds`:
/// by the kind's own name, singular or plural, or by one of the `short` names.
fn by_path(
    rel: &Path,
    kinds: &[(&str, &'static str)],
    short: &[(&str, &'static str)],
) -> Option<&'static str> {
    let stem = rel.file_stem().and_then(|s| s.to_str());
    let dirs = rel
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .filter_map(|c| c.as_os_str().to_str());
    let names = kinds
        .iter()
        .flat_map(|&(kind, plural)| [(kind, plural), (plural, plural)])
        .chain(short.iter().copied());
    dirs.chain(stem).find_map(|part| {
        names
            .clone()
            .find(|(name, _)| part.eq_ignore_ascii_case(name))
            .map(|(_, plural)| plural)
    })
}

/// A `kind:` line of one of the kinds (or their lists) at the top of a YAML document or of a
/// list item, or a JSON `"kind": "..."` member that is not deep inside another object (an
/// Event's `involvedObject` names kinds too).
fn by_content(text: &str, kinds: &[(&str, &'static str)]) -> Option<&'static str> {
    let compact_json = !text.trim_end().contains('\n');
    text.lines().find_map(|line| {
        let indent = line.len() - line.trim_start().len();
        let rest = line.trim_start();
        let rest = rest.strip_prefix("- ").unwrap_or(rest);
        let value = if let Some(v) = rest.strip_prefix("kind:") {
            (indent <= 2)
                .then_some(v)?
                .trim()
                .trim_matches(|c| c == '"' || c == '\'')
        } else {
            let at = line.find("\"kind\"")?;
            let v = line[at + 6..].trim_start().strip_prefix(':')?.trim_start();
            let v = v.strip_prefix('"')?;
            (compact_json || indent <= 12).then(|| v.split('"').next())??
        };
        let value = value.strip_suffix("List").unwrap_or(value);
        kinds
            .iter()
            .find(|(kind, _)| *kind == value)
            .map(|(_, plural)| *plural)
    })
}

/// The bytes as text for [`by_content`], whatever their encoding.
fn lossy(raw: &[u8]) -> String {
    match utf16(raw) {
        Some(units) => String::from_utf16_lossy(&units),
        None => String::from_utf8_lossy(raw).into_owned(),
    }
}

/// UTF-16 code units of a file that starts with a UTF-16 byte-order mark.
fn utf16(raw: &[u8]) -> Option<Vec<u16>> {
    let (unit, body): (fn([u8; 2]) -> u16, _) = match raw {
        [0xFF, 0xFE, body @ ..] => (u16::from_le_bytes, body),
        [0xFE, 0xFF, body @ ..] => (u16::from_be_bytes, body),
        _ => return None,
    };
    Some(body.chunks_exact(2).map(|p| unit([p[0], p[1]])).collect())
}

/// The file's text: UTF-8, without a byte-order mark.
pub(super) fn text(raw: &[u8]) -> Result<&str, Skipped> {
    if utf16(raw).is_some() {
        return Err(Skipped::Utf16);
    }
    let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    std::str::from_utf8(raw).map_err(Skipped::NotUtf8)
}

/// Every YAML document or JSON value in `text`; an error if any of it does not parse.
pub(super) fn documents(text: &str, json: bool) -> Result<Vec<Value>, Skipped> {
    if json {
        return serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map_err(Skipped::Json);
    }
    if flow_depth(text) > MAX_FLOW_DEPTH {
        return Err(Skipped::TooDeep {
            limit: MAX_FLOW_DEPTH,
        });
    }
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|document| {
            let mut value = serde_yaml_ng::Value::deserialize(document)?;
            value.apply_merge()?;
            Ok(value)
        })
        .collect::<Result<Vec<_>, serde_yaml_ng::Error>>()
        .map_err(Skipped::Yaml)?
        .into_iter()
        .map(|v| serde_json::to_value(v).map_err(Skipped::NotJsonLike))
        .collect()
}

/// The deepest nesting of YAML flow collections (`[`, `{`), found in one pass. Quoted scalars
/// and comments are skipped; in block context a bracket opens a collection only where a value
/// starts (line start, after `:`, `-`, `?` or `,`), as in a plain scalar it is just text. Stops
/// counting once past [`MAX_FLOW_DEPTH`].
pub(super) fn flow_depth(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut depth, mut deepest) = (0usize, 0usize);
    // The last byte that is not a space or tab on this line, if any.
    let mut last: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let at_value = matches!(last, None | Some(b':' | b'-' | b'?' | b',' | b'[' | b'{'));
        match b {
            b'\n' => {
                last = None;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' if last.is_none()
                || matches!(bytes.get(i.wrapping_sub(1)), Some(b' ' | b'\t')) =>
            {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\'' | b'"' if at_value => {
                i = skip_quoted(bytes, i);
                last = Some(b);
                continue;
            }
            b'[' | b'{' if depth > 0 || at_value => {
                depth += 1;
                deepest = deepest.max(depth);
                if deepest > MAX_FLOW_DEPTH {
                    return deepest;
                }
            }
            b']' | b'}' if depth > 0 => depth -= 1,
            _ => {}
        }
        last = Some(b);
        i += 1;
    }
    deepest
}

/// The index just past the quoted scalar that starts at `start`.
fn skip_quoted(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote == b'"' => i += 2,
            b'\'' if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    i
}
