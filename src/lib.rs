//! mosc-guard: keeps an OpenShift Image Mode pool from degrading when its MachineOSConfig (or a
//! MachineOSBuild) is deleted while a node still needs the image. One functional core, imperative
//! shells around it (docs/design.md, "Architecture", draws the tree):
//! - [`core`]: the pure decision ([`core::policy::evaluate`] on a [`core::snapshot::Snapshot`])
//!   and its words; no I/O, no shell types.
//! - [`access`]: where snapshots come from (watch caches, direct reads, a dump).
//! - [`decision`]: the cached verdict, confirmed by a fresh read; [`telemetry`]: metrics, Events.
//! - [`server`]: the TLS transport; [`webhook`]: the admission review over it; [`defer`]: the
//!   finalizer controller and its Lease; [`audit`]: serve's registry audit, off the admission path.
//! - [`apply`]: the one apply engine that `recover --apply` and `prune --apply` carry plans out with.
//! - [`cli`]: the command line, which wires the shells together.

pub mod access;
pub mod apply;
pub mod audit;
pub mod cli;
pub mod core;
pub mod decision;
pub mod defer;
pub mod server;
pub mod telemetry;
pub mod webhook;
