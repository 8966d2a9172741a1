//! Why a source cannot give a decision what it needs. These cross the seam between
//! cluster access and the webhook or controller, which turn them into "could not verify" (the guard
//! fails closed) or a 503 from `/readyz`.

use std::sync::Arc;
use std::time::Duration;

use crate::access::live::LiveError;

/// A confirming read that did not complete: the deletion cannot be verified.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FreshError {
    /// A read of the API server failed (shared: concurrent confirmations share one read).
    #[error("reading nodes, builds, pools and MachineOSConfigs from the API server failed: {0}")]
    Read(Arc<LiveError>),
    /// The read did not finish within the confirmation's deadline.
    #[error(
        "reading nodes, builds, pools and MachineOSConfigs from the API server took longer than {}s",
        .0.as_secs_f32()
    )]
    Timeout(Duration),
}

impl From<LiveError> for FreshError {
    fn from(e: LiveError) -> Self {
        FreshError::Read(Arc::new(e))
    }
}

/// Why the webhook should not receive requests now (`/readyz` answers 503 with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// These caches have not completed their first full list.
    #[error("caches have not finished their first full list: {}", .0.join(", "))]
    Unsynced(Vec<&'static str>),
    /// These caches' watches have been failing for longer than allowed (one description each).
    #[error("stale caches: {}", .0.join("; "))]
    Stale(Vec<String>),
    /// The server is shutting down.
    #[error("shutting down: draining connections before the server stops")]
    Draining,
}
