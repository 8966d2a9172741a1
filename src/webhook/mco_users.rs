//! Who MCO is: the users whose requests the guard admits whatever its verdict.

use crate::webhook::admission::Request;

/// The users MCO's machine-os-builder runs as (`--mco-user`). Every MachineOSBuild deletion it
/// makes itself (superseding a build that has not succeeded, rebuilding one whose image is
/// gone, the rebuild annotation, the cleanup after a MachineOSConfig's deletion) protects no
/// image when refused: by then MCO has deleted the image or it never existed, and a refusal
/// only stops its build pipeline (a refused `deleteOtherBuildsForMachineOSConfig` aborts every
/// new build, forever). So the guard admits all of its requests, whatever they are, and says
/// so when it would have refused one.
#[derive(Clone, Debug, Default)]
pub struct McoUsers(Vec<String>);

impl McoUsers {
    /// These users (blank names are dropped, so `--mco-user=` exempts nobody).
    pub fn new<I: IntoIterator<Item = String>>(users: I) -> Self {
        Self(
            users
                .into_iter()
                .map(|u| u.trim().to_string())
                .filter(|u| !u.is_empty())
                .collect(),
        )
    }

    /// MCO's machine-os-builder alone: the default, as `serve --mco-user` has it.
    pub fn machine_os_builder() -> Self {
        Self::new([crate::core::model::MACHINE_OS_BUILDER_USER.to_string()])
    }

    /// Whether `req` was sent by one of them.
    pub fn sent(&self, req: &Request) -> bool {
        req.user_info
            .username
            .as_deref()
            .is_some_and(|u| self.0.iter().any(|m| m == u))
    }
}
