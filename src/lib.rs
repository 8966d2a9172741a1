//! mosc-guard: keeps an OpenShift Image Mode pool from degrading when its
//! MachineOSConfig (or a MachineOSBuild) is deleted while a node still needs the image.
//!
//! One functional core, several imperative shells around it (docs/design.md draws the same
//! tree):
//! - [`core`]: the pure decision. [`core::policy::evaluate`] decides from a
//!   [`core::snapshot::Snapshot`]; [`core::message`] and [`core::report`] put the verdict into
//!   words; [`core::finalizer`] plans defer mode's finalizer patches. No I/O, no shell types.
//! - [`access`]: where snapshots come from: the watch caches, direct reads of the API
//!   server, a directory dump, behind [`access::view::ClusterView`].
//! - [`decision`]: the decision engine: the cached verdict, confirmed by a fresh read (reads
//!   of concurrent requests shared); the webhook and the finalizer controller decide through it.
//! - [`server`]: the transport: the TLS listener and its connection limits, the serving
//!   certificate's reload, the probes and the drain at shutdown.
//! - [`webhook`]: the admission review over that server: decoding, one review per request,
//!   mutation.
//! - [`defer`]: defer mode's finalizer controller, its leader election, and removing
//!   finalizers on uninstall.
//! - [`audit`]: `serve`'s registry audit: is every image a node needs still served, asked as
//!   the node pulls it, beside admission and never on its path.
//! - [`apply`]: the one apply engine: `recover --apply` and `prune --apply` carry out their
//!   plans through it, one item at a time.
//! - [`telemetry`]: Prometheus metrics (every label set bounded) and Kubernetes Events.
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
