//! The admission webhook: HTTPS with reloading certificates, AdmissionReview decoding, one
//! review per request (decide from the cache, confirm an allow with a fresh read), and the
//! mutating endpoint that adds defer mode's finalizer.

pub mod admission;
pub mod cert_expiry;
pub mod coalesce;
pub mod event_limiter;
pub mod listener;
pub mod mutation;
pub mod review;
pub mod routes;
pub mod tls;
