//! How the guard acts on a refusal: the settings every front end shares (`serve`'s flags, the
//! admission review, the finalizer controller), so none of them imports them from another.

/// How a MachineOSConfig deletion that nodes still block is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DeletionMode {
    /// Refuse it, naming the nodes; the admin deletes again later.
    #[default]
    Deny,
    /// Accept it; the finalizer holds the object until the rollout settles.
    Defer,
}

/// Whether refusals are enforced: `warn` admits what would be refused, with the refusal as
/// warnings, a `would-deny` count and a Warning Event, so a site can try the guard first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Enforcement {
    #[default]
    Deny,
    Warn,
}
