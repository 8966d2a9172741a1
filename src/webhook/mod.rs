//! The admission webhook over [`crate::server`], read in three steps for one request:
//! [`admission`] decodes and classifies it and decides it through [`crate::decision`];
//! [`answer`] answers it (warn mode, MCO's requests, the audit line, the metrics, the Event).
//! [`mutation`] is defer mode's mutating endpoint; [`routes`] only routes.

pub mod admission;
pub mod answer;
pub mod mutation;
pub mod routes;

#[cfg(test)]
mod tests;
