//! Parsing of image pull specs like `127.0.0.1:5000/ns/repo:tag` and `host/ns/repo@sha256:hex`.

use crate::Result;

/// An image reference split into registry host, repository path, tag and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host (with port), e.g. `127.0.0.1:5000`.
    pub host: String,
    /// Repository path inside the registry, e.g. `openshift-machine-config-operator/ocb-image`.
    pub repo: String,
    pub tag: Option<String>,
    /// `sha256:<hex>`.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses `host/repo[:tag][@digest]`; the host part is required.
    pub fn parse(spec: &str) -> Result<Self> {
        let (rest, digest) = match spec.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest.to_owned())),
            None => (spec, None),
        };
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| format!("image reference {spec:?} has no registry host"))?;
        let (repo, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) => (repo, Some(tag.to_owned())),
            None => (path, None),
        };
        if host.is_empty() || repo.is_empty() {
            return Err(format!("image reference {spec:?} lacks a host or repository").into());
        }
        if let Some(d) = &digest
            && !d.starts_with("sha256:")
        {
            return Err(format!("image reference {spec:?} has a non-sha256 digest").into());
        }
        Ok(Self {
            host: host.to_owned(),
            repo: repo.to_owned(),
            tag,
            digest,
        })
    }

    /// `host/repo`, the pull spec without tag or digest.
    pub fn repository(&self) -> String {
        format!("{}/{}", self.host, self.repo)
    }

    /// `host/repo:tag`.
    pub fn with_tag(&self, tag: &str) -> String {
        format!("{}:{tag}", self.repository())
    }

    /// `host/repo@digest`.
    pub fn with_digest(&self, digest: &str) -> String {
        format!("{}@{digest}", self.repository())
    }

    /// The digest if present, else the tag (what a registry calls the manifest "reference").
    pub fn reference(&self) -> Option<&str> {
        self.digest.as_deref().or(self.tag.as_deref())
    }
}
