//! What an admission request came to: the webhook's answer ([`Outcome`]) and the mutating
//! webhook's ([`Mutation`]). Named here, with the rest of the domain; the audit log and the
//! metrics print their labels.

/// What a validating admission request came to.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Denied,
    Overridden,
    /// Denied because a would-be allow could not be confirmed with a fresh read.
    Unconfirmed,
    /// Not a deletion the guard decides on (other resource or operation).
    Ignored,
    /// Allowed in defer mode while nodes still need its images: the finalizer holds it.
    Deferred,
    /// `--enforcement warn`: would have been refused (or could not be verified), admitted with
    /// the refusal as warnings.
    WouldDeny,
    /// MCO's own request (`--mco-user`) that would have been refused: admitted, because refusing
    /// it protects no image and stops MCO's build pipeline.
    McoWouldDeny,
}

impl Outcome {
    /// The label value (`would-deny`, as Gatekeeper and Kyverno spell their dry runs).
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::Overridden => "overridden",
            Outcome::Unconfirmed => "unverified",
            Outcome::Ignored => "ignored",
            Outcome::Deferred => "deferred",
            Outcome::WouldDeny => "would-deny",
            Outcome::McoWouldDeny => "mco-would-deny",
        }
    }

    /// Whether it refuses, before warn mode or MCO's exemption turn a refusal into an allow.
    pub fn refuses(self) -> bool {
        matches!(self, Outcome::Denied | Outcome::Unconfirmed)
    }
}

/// What a mutating admission request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The finalizer was added.
    Added,
    /// It was there already (re-invocation, or a plain update).
    Present,
    /// The object is being deleted: finalizers cannot be added.
    Terminating,
    /// `--no-new-finalizers`: draining before an uninstall.
    Disabled,
    /// Not a create/update of a MachineOSConfig.
    Ignored,
}

impl Mutation {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Mutation::Added => "added",
            Mutation::Present => "present",
            Mutation::Terminating => "terminating",
            Mutation::Disabled => "disabled",
            Mutation::Ignored => "ignored",
        }
    }
}
