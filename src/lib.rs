//! mosc-guard: keeps an OpenShift Image Mode pool from degrading when its
//! MachineOSConfig (or a MachineOSBuild) is deleted while a node still needs the image.
//!
//! Functional core: [`policy::evaluate`] decides from a [`snapshot::Snapshot`].
//! Imperative shell: the webhook [`server`], the reflector [`cache`], the [`cli`]
//! `check` command and the [`dump`] reader only gather inputs and act on verdicts.

pub mod image;
pub mod message;
pub mod model;
pub mod policy;
pub mod selector;
pub mod snapshot;
