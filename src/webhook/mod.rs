//! The admission webhook over [`crate::server`]: AdmissionReview decoding, one
//! review per request (decided by [`crate::decision`], answered once), and the
//! mutating endpoint that adds defer mode's finalizer.

pub mod admission;
pub mod answer;
pub mod event_limiter;
pub mod mco_users;
pub mod mutation;
pub mod review;
pub mod routes;
