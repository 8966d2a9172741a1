//! The finalizer controller (releases deferred deletions; in deny mode, leftovers of defer
//! mode), the Lease that lets one replica write, and `release-finalizers` for uninstalling.

pub mod controller;
pub mod leader;
mod memos;
pub mod release;
