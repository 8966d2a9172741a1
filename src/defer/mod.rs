//! The finalizer controller (completes deferred deletions by removing the finalizer; in deny
//! mode, leftovers of defer mode), the Lease that lets one replica write, and
//! `remove-finalizers` for uninstalling.

pub mod controller;
mod deferrals;
pub mod leader;
pub mod uninstall;
