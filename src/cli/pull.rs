//! What a node pulls with, taken from a dump for `images --from-dir` and `recover --from-dir`:
//! the CAs, proxy and mirrors from the dump's ControllerConfig and mirror sets, the credentials
//! only from `--authfile` (a dump holds no secrets, and its pull secret is never read from it).

use std::path::Path;

use crate::access::dump::Loaded;
use crate::access::registry;
use crate::cli::error::CliError;
use crate::core::registry::auth::AuthFile;
use crate::core::registry::node_config::{ControllerConfigSpec, PullConfig};

/// The dump's ControllerConfig spec, without its pull secret; `None` when the dump holds none.
pub(super) fn dump_controller_config(
    loaded: &Loaded,
    dir: &Path,
) -> Result<Option<ControllerConfigSpec>, CliError> {
    let Some((_, object)) = loaded
        .pull
        .iter()
        .find(|(kind, _)| kind == "ControllerConfig")
    else {
        return Ok(None);
    };
    let spec: ControllerConfigSpec =
        serde_json::from_value(object.get("spec").cloned().unwrap_or_default()).map_err(|e| {
            CliError::Usage(format!(
                "{}: the ControllerConfig does not decode: {e}",
                dir.display()
            ))
        })?;
    Ok(Some(ControllerConfigSpec {
        internal_registry_pull_secret: None,
        ..spec
    }))
}

/// What a node pulls with: `spec`'s CAs and proxy, the dump's mirror sets, `auths`.
pub(super) fn dump_pull_config(
    loaded: &Loaded,
    dir: &Path,
    spec: &ControllerConfigSpec,
    auths: AuthFile,
) -> Result<PullConfig, CliError> {
    let mut pull =
        registry::cluster::from_objects(spec, loaded.pull.iter().map(|(k, v)| (k.as_str(), v)))
            .map_err(|e| CliError::Usage(format!("{}: {e}", dir.display())))?;
    pull.auths = auths;
    Ok(pull)
}

/// The credentials of `--authfile FILE` (the containers/docker `auths` format).
pub(super) fn read_authfile(path: &Path) -> Result<AuthFile, CliError> {
    let raw = std::fs::read(path)
        .map_err(|e| CliError::Usage(format!("reading --authfile {}: {e}", path.display())))?;
    AuthFile::parse(&raw)
        .map_err(|e| CliError::Usage(format!("--authfile {}: {e}", path.display())))
}
