//! mosc-guard: keeps an OpenShift Image Mode pool from degrading when its
//! MachineOSConfig (or a MachineOSBuild) is deleted while a node still needs the image.
//!
//! Functional core: [`policy::evaluate`] decides from a [`snapshot::Snapshot`] and
//! [`message`] puts the verdict into words. Imperative shell: the webhook ([`server`],
//! [`admission`], [`review`], [`tls`]), the reflector [`cache`], direct [`live`] reads,
//! the [`dump`] directory reader and the [`cli`] only gather inputs and act on verdicts.

pub mod admission;
pub mod cache;
pub mod cert_expiry;
pub mod certs;
pub mod cli;
pub mod coalesce;
pub mod controller;
pub mod dump;
pub mod event_limiter;
pub mod events;
pub mod finalizer;
pub mod image;
pub mod leader;
pub mod live;
pub mod memory;
pub mod message;
pub mod metrics;
pub mod model;
pub mod mutation;
pub mod node;
pub mod node_cache;
pub mod node_index;
pub mod policy;
pub mod report;
pub mod review;
pub mod selector;
pub mod server;
pub mod snapshot;
pub mod tls;
pub mod uninstall;
pub mod view;
