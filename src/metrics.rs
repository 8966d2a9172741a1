//! Prometheus metrics. Every label takes values from a fixed set, so series stay bounded
//! however many objects the cluster has.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// What an admission request came to.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Outcome {
    allowed,
    denied,
    overridden,
    /// Denied because a would-be allow could not be confirmed with a fresh read.
    unverified,
    /// Not a deletion the guard decides on (other resource or operation).
    ignored,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    resource: &'static str,
    result: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    cache: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConfirmLabels {
    result: &'static str,
}

pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    latency: Histogram,
    confirmations: Family<ConfirmLabels, Counter>,
    cache_objects: Family<CacheLabels, Gauge>,
    ready: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("mosc_guard");
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "admission_decisions",
            "Admission decisions by resource and result",
            decisions.clone(),
        );
        // 100 µs .. ~5.9 s: cache decisions are sub-millisecond, confirmations a list call
        // bounded by --confirm-timeout (5 s by default).
        let latency = Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
            0.0001, 3.0, 11,
        ));
        registry.register(
            "admission_decision_duration_seconds",
            "Time to decide one admission request, including any confirming read",
            latency.clone(),
        );
        let confirmations = Family::<ConfirmLabels, Counter>::default();
        registry.register(
            "confirmations",
            "Fresh reads that confirmed a cache allow (confirmed, overturned, failed)",
            confirmations.clone(),
        );
        let cache_objects = Family::<CacheLabels, Gauge>::default();
        registry.register(
            "cache_objects",
            "Objects held by each cache",
            cache_objects.clone(),
        );
        let ready = Gauge::default();
        registry.register(
            "ready",
            "1 once every cache finished its first full list",
            ready.clone(),
        );
        Self {
            registry,
            decisions,
            latency,
            confirmations,
            cache_objects,
            ready,
        }
    }
}

impl Metrics {
    pub fn decision(&self, resource: &'static str, result: Outcome, seconds: f64) {
        self.decisions
            .get_or_create(&DecisionLabels { resource, result })
            .inc();
        self.latency.observe(seconds);
    }

    /// `result` is one of "confirmed", "overturned", "failed".
    pub fn confirmation(&self, result: &'static str) {
        self.confirmations
            .get_or_create(&ConfirmLabels { result })
            .inc();
    }

    /// Renders the text exposition after refreshing the cache gauges.
    pub fn render(&self, sizes: &[(&'static str, usize)], ready: bool) -> String {
        for (cache, n) in sizes {
            self.cache_objects
                .get_or_create(&CacheLabels { cache })
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        self.ready.set(i64::from(ready));
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "encoding metrics");
        }
        out
    }
}
