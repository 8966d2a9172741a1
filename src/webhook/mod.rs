//! The admission webhook: HTTPS with reloading certificates, AdmissionReview decoding, one
//! review per request (decided by [`crate::decision`], answered once), and the
//! mutating endpoint that adds defer mode's finalizer.

pub mod admission;
pub mod answer;
pub mod cert_expiry;
pub mod event_limiter;
pub mod listener;
pub mod mco_users;
pub mod mutation;
pub mod review;
pub mod routes;
pub mod tls;
