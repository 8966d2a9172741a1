//! Registry truth, the pure half: is every image a node needs still served, asked where and as
//! the node pulls it (docs/design.md, "Registry truth").
//!
//! - [`answer`]: what one registry's replies come to (available, missing, unknown), and what the
//!   replies of every place a node would pull from come to together. Unknown is never missing.
//! - [`sources`]: where a node pulls a digest from: ImageDigestMirrorSet and
//!   ImageContentSourcePolicy mirrors as containers-registries.conf applies them, then the source.
//! - [`auth`]: the node's credentials (a dockerconfigjson `auths` map) and which entry a host and
//!   repository use; secrets never printed.
//! - [`node_config`]: what the ControllerConfig gives the node: credentials, per-host CAs, the
//!   proxy (and which hosts it skips, as Go's `NO_PROXY` does).
//! - [`needed`]: which images nodes, MachineOSConfigs and builds need, and who needs each.
//! - [`report`]: `mosc-guard images`' text and JSON, and the per-pool counts the gauges export.
//! - [`tags`]: a repository's tags as distribution's API lists them, a page at a time (`prune`);
//!   [`listing`]: a repository listed, each tag resolved to what it holds.
//! - [`deletion`]: what a registry's answer to a manifest delete means (`prune --apply
//!   --images`).
//! - [`internal`]: which hosts are OpenShift's internal registry, as MCO tells them apart.
//!
//! The HTTP is `access::registry`'s; nothing here performs I/O.

pub mod answer;
pub mod auth;
pub mod deletion;
pub mod internal;
pub mod listing;
pub mod needed;
pub mod node_config;
pub mod report;
pub mod sources;
pub mod tags;

pub use answer::{Exchange, Ping, Reply, Status, Verdict, combine, judge};
pub use needed::{Holder, NeededImage, needed_images, needed_images_of_all};
