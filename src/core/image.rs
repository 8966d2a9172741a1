//! Image identity (registry identity): when two pull specs name the same image, as in "is this one
//! of the images a deletion removes". Registry, repository and digest agree; the tag is ignored
//! once a digest is present, the host is compared without case and `:443` equals no port
//! (`oci_spec`'s parser). Whether a node has *reached* an image is MCO's exact string equality
//! instead (`policy::scan`).

use std::fmt;

use oci_spec::distribution::Reference;

/// What makes an image the same image: registry, repository and version.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageKey {
    repo: RepoKey,
    version: Version,
}

/// Registry host and repository path, without tag or digest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoKey {
    pub registry: String,
    pub repository: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Version {
    /// `algorithm:hex`, hex lower-cased.
    Digest(String),
    /// Only a tag: equal to the same tag only.
    Tag(String),
    /// Not a valid reference: compared as written (trimmed), so it can still match itself.
    Unparsed(String),
}

impl ImageKey {
    /// Parses a pull spec. Never fails: an invalid spec becomes an opaque key that
    /// equals only the same text, so bad data can still be reported and matched.
    pub fn parse(spec: &str) -> ImageKey {
        let spec = spec.trim();
        match spec.parse::<Reference>() {
            Ok(r) => {
                let version = match r.digest() {
                    Some(d) => Version::Digest(d.to_ascii_lowercase()),
                    None => Version::Tag(r.tag().unwrap_or("latest").to_string()),
                };
                ImageKey {
                    repo: RepoKey {
                        registry: registry_host(r.registry()),
                        repository: r.repository().to_string(),
                    },
                    version,
                }
            }
            Err(_) => ImageKey {
                repo: RepoKey::default(),
                version: Version::Unparsed(spec.to_string()),
            },
        }
    }

    /// The repository, for a parsed reference.
    pub fn repo(&self) -> Option<&RepoKey> {
        match self.version {
            Version::Unparsed(_) => None,
            _ => Some(&self.repo),
        }
    }

    /// The tag, for a parsed reference without a digest (`latest` when it names none).
    pub fn tag(&self) -> Option<&str> {
        match &self.version {
            Version::Tag(t) => Some(t),
            _ => None,
        }
    }

    /// Lower-case digest hex (without the algorithm), when the spec carries a digest.
    pub fn digest_hex(&self) -> Option<&str> {
        match &self.version {
            Version::Digest(d) => d.split_once(':').map(|(_, hex)| hex),
            _ => None,
        }
    }
}

/// A registry host as a registry serves it: host names are case-insensitive, and `:443` is
/// the port HTTPS uses when none is given.
fn registry_host(host: &str) -> String {
    let host = host.to_ascii_lowercase();
    match host.strip_suffix(":443") {
        Some(bare) if !bare.is_empty() => bare.to_string(),
        _ => host,
    }
}

/// True when two pull specs name the same image. Identical text (the common case: MCO
/// copies the build's spec onto nodes) is decided without parsing.
pub fn same_image(a: &str, b: &str) -> bool {
    a.trim() == b.trim() || ImageKey::parse(a) == ImageKey::parse(b)
}

/// The repository of a pull spec (tag and digest ignored), if it parses.
pub fn repo_of(spec: &str) -> Option<RepoKey> {
    ImageKey::parse(spec).repo().cloned()
}

impl fmt::Display for RepoKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)
    }
}

/// Every digest written in `text`, however spelled (`sha256:` or `sha512:` and its hex, any
/// case, inside a pull spec or not), as `algorithm:hex` in lower case, each once, in order.
///
/// "Which images does this object name" read this way cannot miss a spelling MCO or an admin
/// used: a tag with a digest, upper-case hex, another host's spelling of the same image.
pub fn digests_in(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut found: Vec<String> = Vec::new();
    for (algorithm, len) in [("sha256:", 64), ("sha512:", 128)] {
        let mut rest = lower.as_str();
        while let Some(at) = rest.find(algorithm) {
            let hex_start = at + algorithm.len();
            let hex: String = rest[hex_start..]
                .chars()
                .take_while(char::is_ascii_hexdigit)
                .collect();
            if hex.len() == len {
                let digest = format!("{algorithm}{hex}");
                if !found.contains(&digest) {
                    found.push(digest);
                }
            }
            rest = &rest[hex_start..];
        }
    }
    found
}

/// Short form for messages: `.../<last path element>@sha256:<12 hex>...`.
pub fn abbreviate(spec: &str) -> String {
    let key = ImageKey::parse(spec);
    match (key.repo(), &key.version) {
        (Some(repo), Version::Digest(d)) => {
            let last = repo.repository.rsplit('/').next().unwrap_or_default();
            let (algo, hex) = d.split_once(':').unwrap_or(("sha256", d));
            let short: String = hex.chars().take(12).collect();
            let dots = if hex.len() > 12 { "..." } else { "" };
            format!(".../{last}@{algo}:{short}{dots}")
        }
        _ => spec.trim().to_string(),
    }
}

#[cfg(test)]
mod tests;
