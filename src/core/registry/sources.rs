//! Where a node pulls an image from: the ImageDigestMirrorSets' and ImageContentSourcePolicies'
//! mirrors, as MCO renders them into the node's `registries.conf` and containers/image applies
//! them to a pull by digest. Entries with the same source merge (mirrors in order, no repeats;
//! `mirrorSourcePolicy: NeverContactSource` blocks the source). The entry whose prefix matches the
//! repository most specifically applies (`host/ns` matches `host/ns/repo`, not `host/nsx`;
//! `*.example.com` any host below it); the pull tries each mirror with the rest of the repository
//! appended, then the source unless blocked. A pull by tag uses the source only, so
//! ImageTagMirrorSets (tags, which nodes never pull for a layered image) are not read.

use oci_spec::distribution::Reference;
use serde::Serialize;

/// One source and its mirrors, from an ImageDigestMirrorSet's `spec.imageDigestMirrors[]` or an
/// ImageContentSourcePolicy's `spec.repositoryDigestMirrors[]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorRule {
    /// `host[/path]`, or `*.domain` (ImageDigestMirrorSet only).
    pub source: String,
    pub mirrors: Vec<String>,
    /// `mirrorSourcePolicy: NeverContactSource`.
    pub never_contact_source: bool,
}

/// One place a node pulls the image from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PullSource {
    /// The registry host (`host[:port]`).
    pub host: String,
    /// The repository on that host.
    pub repository: String,
    /// `digest` (`sha256:...`) or tag.
    pub reference: String,
    /// Whether this is a mirror (else the image's own registry).
    pub mirror: bool,
}

impl PullSource {
    /// The pull spec: `host/repository@digest` (or `:tag`).
    pub fn spec(&self) -> String {
        let sep = if self.reference.contains(':') {
            '@'
        } else {
            ':'
        };
        format!("{}/{}{sep}{}", self.host, self.repository, self.reference)
    }
}

/// Merges rules with the same source, as MCO does when it renders several sets into one
/// registries.conf.
pub fn merge(rules: impl IntoIterator<Item = MirrorRule>) -> Vec<MirrorRule> {
    let mut merged: Vec<MirrorRule> = Vec::new();
    for rule in rules {
        let source = rule.source.trim().to_string();
        if source.is_empty() {
            continue;
        }
        let entry = match merged.iter_mut().position(|m| m.source == source) {
            Some(i) => &mut merged[i],
            None => {
                merged.push(MirrorRule {
                    source,
                    mirrors: Vec::new(),
                    never_contact_source: false,
                });
                merged.last_mut().expect("just pushed")
            }
        };
        entry.never_contact_source |= rule.never_contact_source;
        for mirror in rule.mirrors {
            let mirror = mirror.trim().to_string();
            if !mirror.is_empty() && !entry.mirrors.contains(&mirror) {
                entry.mirrors.push(mirror);
            }
        }
    }
    merged
}

/// How specifically `prefix` matches `name` (`host/repository`): `None` when it does not.
fn matches(prefix: &str, name: &str) -> Option<usize> {
    if let Some(domain) = prefix.strip_prefix("*.") {
        let host = name.split('/').next().unwrap_or_default();
        let bare = host.split(':').next().unwrap_or_default();
        return bare
            .strip_suffix(domain)
            .filter(|rest| rest.ends_with('.') && rest.len() > 1)
            .map(|_| prefix.len());
    }
    let rest = name.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(prefix.len())
}

/// Where a node pulls `image` from, in order. An image that does not parse has no place.
pub fn pull_sources(image: &str, rules: &[MirrorRule]) -> Result<Vec<PullSource>, String> {
    let reference: Reference = image
        .trim()
        .parse()
        .map_err(|e| format!("not an image reference: {e}"))?;
    let host = reference.registry().to_string();
    let repository = reference.repository().to_string();
    let own = PullSource {
        host: host.clone(),
        repository: repository.clone(),
        reference: (reference.digest().or(reference.tag()))
            .unwrap_or("latest")
            .to_string(),
        mirror: false,
    };
    let Some(digest) = reference.digest() else {
        return Ok(vec![own]);
    };
    let name = format!("{host}/{repository}");
    let best = rules
        .iter()
        .filter_map(|r| matches(&r.source, &name).map(|n| (n, r)))
        .max_by_key(|(n, _)| *n)
        .map(|(_, r)| r);
    let Some(rule) = best else {
        return Ok(vec![own]);
    };
    let rest = if rule.source.starts_with("*.") {
        name.split_once('/').map(|(_, r)| r).unwrap_or_default()
    } else {
        name[rule.source.len()..].trim_start_matches('/')
    };
    let mut places = Vec::new();
    for mirror in &rule.mirrors {
        let full = if rest.is_empty() {
            mirror.clone()
        } else {
            format!("{}/{rest}", mirror.trim_end_matches('/'))
        };
        // A mirror that is only a host cannot hold a repository path of its own; the image's
        // repository is used, as containers/image does for a host-only location.
        let (mirror_host, mirror_repo) = full.split_once('/').unwrap_or((&full, &repository));
        places.push(PullSource {
            host: mirror_host.to_string(),
            repository: mirror_repo.to_string(),
            reference: digest.to_string(),
            mirror: true,
        });
    }
    if !rule.never_contact_source {
        places.push(own);
    }
    Ok(places)
}

#[cfg(test)]
mod tests;
