//! The node's credentials: a containers/docker auth file (`{"auths": {KEY: {"auth": base64
//! "user:password"}}}`, also the older bare map of `.dockercfg`), and which entry a pull uses.
//!
//! The ControllerConfig's `spec.internalRegistryPullSecret` is such a file (the internal
//! registry's puller token merged with the global pull secret); `mosc-guard images --authfile`
//! reads one. An entry is chosen as containers/image chooses it (`pkg/docker/config`): the key
//! for `host/namespace/repository`, then each shorter path, then the host alone; a key written
//! with a scheme (`https://host/v1/`) counts as its host. A password never appears in `Debug`,
//! in errors, or anywhere else this crate prints.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use serde::Deserialize;

/// A user name and its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    password: String,
}

impl Credential {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Credential {
            username: username.into(),
            password: password.into(),
        }
    }

    /// The secret, for the request that sends it (never for words).
    pub fn password(&self) -> &str {
        &self.password
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The entries of an auth file, by normalised key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AuthFile {
    entries: BTreeMap<String, Credential>,
}

impl fmt::Debug for AuthFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthFile")
            .field("keys", &self.entries.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// Why an auth file cannot be used (never quoting its content).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("not a JSON object of registry credentials (`{{\"auths\": {{...}}}}`): {0}")]
    Shape(String),
    #[error("the entry for {key} has an `auth` field that is not base64 of `user:password`")]
    Entry { key: String },
}

impl AuthFile {
    /// Parses `{"auths": {...}}` or the bare map. Entries without usable credentials (an
    /// identity token only, empty) are skipped: the node could not use them either.
    pub fn parse(json: &[u8]) -> Result<Self, AuthError> {
        let value: serde_json::Value = serde_json::from_slice(json)
            .map_err(|e| AuthError::Shape(format!("line {} column {}", e.line(), e.column())))?;
        let map = value.get("auths").cloned().unwrap_or(value);
        let map: BTreeMap<String, Entry> = serde_json::from_value(map)
            .map_err(|_| AuthError::Shape("an entry is not an object".into()))?;
        let mut entries = BTreeMap::new();
        for (key, entry) in map {
            let credential = match (entry.auth.as_deref(), entry.username, entry.password) {
                (Some(auth), _, _) if !auth.trim().is_empty() => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok())
                        .ok_or_else(|| AuthError::Entry { key: key.clone() })?;
                    let (user, password) = decoded
                        .split_once(':')
                        .ok_or_else(|| AuthError::Entry { key: key.clone() })?;
                    Credential::new(user, password)
                }
                (_, Some(user), Some(password)) if !user.is_empty() => {
                    Credential::new(user, password)
                }
                _ => continue,
            };
            entries.insert(normalise_key(&key), credential);
        }
        Ok(AuthFile { entries })
    }

    /// Builds one from `(key, credential)` pairs.
    pub fn from_entries(entries: impl IntoIterator<Item = (String, Credential)>) -> Self {
        AuthFile {
            entries: entries
                .into_iter()
                .map(|(k, c)| (normalise_key(&k), c))
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The hosts (and paths) it has credentials for, for words.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The credential a pull of `host/repository` uses, if any.
    pub fn lookup(&self, host: &str, repository: &str) -> Option<&Credential> {
        let host = host.to_ascii_lowercase();
        let path = format!("{host}/{repository}");
        // Docker Hub, as `docker login` keys it (`https://index.docker.io/v1/`).
        let docker_hub = (host == "docker.io").then_some("index.docker.io");
        std::iter::successors(Some(path.as_str()), |p| p.rsplit_once('/').map(|(s, _)| s))
            .chain(docker_hub)
            .find_map(|p| self.entries.get(p))
    }
}

/// `https://host/v1/` is `host`; a key without a scheme is kept as written (it may carry a
/// path); host names are compared without case.
fn normalise_key(key: &str) -> String {
    let key = key.trim();
    let key = match key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
    {
        Some(rest) => rest.split('/').next().unwrap_or_default(),
        None => key.trim_end_matches('/'),
    };
    match key.split_once('/') {
        Some((host, path)) => format!("{}/{path}", host.to_ascii_lowercase()),
        None => key.to_ascii_lowercase(),
    }
}

#[cfg(test)]
mod tests;
