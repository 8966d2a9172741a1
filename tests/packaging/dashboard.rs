//! The console dashboard of the openshift component (ConfigMap `mosc-guard-dashboard` in
//! `openshift-config-managed`, `manifests/components/openshift/dashboard/mosc-guard.json`):
//!
//! - both openshift overlays render it, with the label the console selects dashboards by, in
//!   the namespace the console reads them from, as one JSON document (rows format, as
//!   OpenShift's own dashboards), with the panels the issue asks for: decisions,
//!   confirmations, cache staleness, blocked MachineOSConfigs, deferred deletions, deletable
//!   MachineOSBuilds and deletable images side by side (issue 38), each panel with its own id;
//! - every PromQL expression of every panel reads only metrics the guard exports (from
//!   `Metrics::default()` rendered after each labelled family has a series, with the
//!   `_total` / `_bucket` / `_sum` / `_count` suffixes Prometheus sees), selects
//!   `job="mosc-guard"`, and reads at least one of them; and a misspelt metric is caught.
//!   What Prometheus and the console then draw is not checked (neither runs here).

use std::collections::BTreeSet;

use serde_json::Value;

use mosc_guard::core::outcome::{Mutation, Outcome};
use mosc_guard::core::policy::Blocked;
use mosc_guard::telemetry::metrics::Metrics;
use testkit::manifests::render;

/// The dashboard as each openshift overlay renders it (the same in all).
fn dashboard() -> Value {
    let mut seen: Vec<Value> = Vec::new();
    for dir in [
        "overlays/openshift",
        "overlays/openshift-defer",
        "overlays/openshift-warn",
    ] {
        let objects = render(dir).unwrap_or_else(|e| panic!("{e}"));
        let maps: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "mosc-guard-dashboard")
            .collect();
        assert_eq!(maps.len(), 1, "{dir}: one dashboard ConfigMap");
        let map = maps[0];
        assert_eq!(
            map["metadata"]["namespace"], "openshift-config-managed",
            "{dir}"
        );
        assert_eq!(
            map["metadata"]["labels"]["console.openshift.io/dashboard"], "true",
            "{dir}"
        );
        let data = map["data"].as_object().expect("data");
        assert_eq!(data.len(), 1, "{dir}: one dashboard per ConfigMap");
        let (key, json) = data.iter().next().expect("one key");
        assert!(key.ends_with(".json"), "{key}");
        let board: Value = serde_json::from_str(json.as_str().expect("text")).expect("JSON");
        seen.push(board);
    }
    assert!(
        seen.windows(2).all(|w| w[0] == w[1]),
        "the same dashboard everywhere"
    );
    // Only the openshift overlays have it.
    for dir in ["base", "overlays/cert-manager", "overlays/defer"] {
        let objects = render(dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(!objects.iter().any(|o| o["kind"] == "ConfigMap"), "{dir}");
    }
    seen.swap_remove(0)
}

/// Every panel of every row.
fn panels(board: &Value) -> Vec<&Value> {
    board["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .flat_map(|r| r["panels"].as_array().expect("panels"))
        .collect()
}

/// Sample names the guard's /metrics can carry (every family given a series first).
fn exported() -> BTreeSet<String> {
    let m = Metrics::default();
    m.decision("machineosconfigs", Outcome::WouldDeny, 0.001);
    m.confirmation("failed");
    m.confirmation_nodes("list");
    m.mutation(Mutation::Added);
    m.finalizer_removed(mosc_guard::core::finalizer::RemovalReason::Settled, 5.0);
    m.controller_error(mosc_guard::core::finalizer::Failure::Conflict);
    m.deletion_blocked([("worker".to_owned(), Blocked::Node)]);
    m.needed_images(&mosc_guard::core::registry::report::pool_counts(
        ["worker"],
        [],
    ));
    m.registry_check(mosc_guard::core::registry::Status::Available);
    m.deletable_builds([("worker".to_owned(), 2)]);
    m.deletable_images([("worker".to_owned(), Some(2)), ("infra".to_owned(), None)]);
    m.registry_tags_resolved(3);
    let text = m.render(&[("nodes", 1)], &[("nodes", false)], true);
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        }
    }
    // Every sample line's name is among them (the suffix rules above are the exposition's).
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        assert!(
            names.contains(&name) || name.ends_with("_created"),
            "{name} from {line}"
        );
    }
    names
}

const FUNCTIONS_AND_KEYWORDS: &[&str] = &[
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "rate",
    "increase",
    "irate",
    "delta",
    "time",
    "vector",
    "histogram_quantile",
    "by",
    "without",
    "or",
    "and",
    "unless",
    "on",
    "ignoring",
    "offset",
    "bool",
    "absent",
    "clamp_min",
    "topk",
    "label_replace",
    "group_left",
    "group_right",
];

/// The metric names an expression reads: identifiers outside label matchers, strings, ranges
/// and `by (...)`/`without (...)` lists, that are neither functions nor keywords nor numbers.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut label_list = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' | '[' | '"' => {
                let close = match c {
                    '{' => '}',
                    '[' => ']',
                    _ => '"',
                };
                i += 1;
                while i < chars.len() && chars[i] != close {
                    i += 1;
                }
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = chars[i..].iter().find(|c| !c.is_whitespace()).copied();
                if word == "by" || word == "without" {
                    label_list = true;
                } else if label_list {
                    // inside by (...): label names
                } else if next == Some('(') || FUNCTIONS_AND_KEYWORDS.contains(&word.as_str()) {
                    // a function or keyword
                } else if !(word.starts_with('e') && start > 0 && chars[start - 1].is_ascii_digit())
                {
                    names.push(word);
                }
            }
            ')' => {
                label_list = false;
                i += 1;
            }
            _ => i += 1,
        }
    }
    names
}

#[test]
fn the_dashboard_has_the_panels_operators_need() {
    let board = dashboard();
    assert_eq!(board["title"], "mosc-guard");
    let titles: BTreeSet<String> = panels(&board)
        .iter()
        .map(|p| p["title"].as_str().expect("title").to_owned())
        .collect();
    for want in [
        "Decisions",
        "Confirmations",
        "Cache staleness",
        "Blocked MachineOSConfigs",
        "Deferred deletions",
        "Needed images not served, per pool",
        "Deletable MachineOSBuilds",
        "Deletable images",
    ] {
        assert!(titles.contains(want), "no panel {want:?}: {titles:?}");
    }
    let ids: Vec<u64> = panels(&board)
        .iter()
        .map(|p| p["id"].as_u64().expect("a numeric id"))
        .collect();
    let unique: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "panel ids are unique: {ids:?}");
    // The images beside the builds, in one row.
    let cleanup: Vec<&str> = board["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["title"] == "Cleanup")
        .expect("a Cleanup row")["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .map(|p| p["title"].as_str().expect("title"))
        .collect();
    assert_eq!(cleanup, ["Deletable MachineOSBuilds", "Deletable images"]);
    for panel in panels(&board) {
        let kind = panel["type"].as_str().expect("type");
        assert!(
            ["graph", "singlestat", "table"].contains(&kind),
            "{}: a panel type the console draws, not {kind}",
            panel["title"]
        );
        assert!(
            panel["span"]
                .as_u64()
                .is_some_and(|s| (1..=12).contains(&s)),
            "{panel}"
        );
        assert!(
            !panel["targets"].as_array().expect("targets").is_empty(),
            "{panel}"
        );
    }
}

#[test]
fn every_dashboard_query_reads_only_metrics_the_guard_exports() {
    let exported = exported();
    assert!(
        exported.contains("mosc_guard_admission_decisions_total"),
        "{exported:?}"
    );
    assert!(
        exported.contains("mosc_guard_deletion_blocked"),
        "{exported:?}"
    );
    let board = dashboard();
    let mut read = BTreeSet::new();
    let mut exprs = 0;
    for panel in panels(&board) {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            exprs += 1;
            let names = metric_names(expr);
            assert!(
                names.iter().any(|n| n.starts_with("mosc_guard_")),
                "{}: {expr} reads none of the guard's metrics",
                panel["title"]
            );
            for name in &names {
                assert!(
                    exported.contains(name),
                    "{}: {expr} reads {name}, which the guard does not export",
                    panel["title"]
                );
                read.insert(name.clone());
            }
            // Each selector of a guard metric is the scrape job's.
            let mut rest = expr;
            while let Some(at) = rest.find("mosc_guard_") {
                let after = &rest[at..];
                let name_len = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                assert!(
                    after[name_len..].starts_with("{job=\"mosc-guard\""),
                    "{}: {expr}: select job=\"mosc-guard\"",
                    panel["title"]
                );
                rest = &after[name_len..];
            }
        }
    }
    assert!(exprs >= 10, "{exprs} queries");
    for want in [
        "mosc_guard_admission_decisions_total",
        "mosc_guard_confirmations_total",
        "mosc_guard_cache_stale",
        "mosc_guard_deletion_blocked",
        "mosc_guard_deferred_deletions",
        "mosc_guard_deletable_builds",
        "mosc_guard_deletable_images",
        "mosc_guard_deletable_images_unknown",
        "mosc_guard_registry_tags_resolved_total",
    ] {
        assert!(read.contains(want), "no panel reads {want}: {read:?}");
    }
    println!("metrics the dashboard reads: {read:?}");
}

#[test]
fn the_query_check_catches_a_misspelt_metric() {
    let exported = exported();
    let names = metric_names(
        r#"sum by (result) (rate(mosc_guard_admission_decision_total{job="mosc-guard"}[5m])) or vector(0) * 1e3"#,
    );
    assert_eq!(
        names,
        vec!["mosc_guard_admission_decision_total".to_owned()]
    );
    assert!(!exported.contains(&names[0]));
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (le) (rate(mosc_guard_admission_decision_duration_seconds_bucket{job="mosc-guard"}[5m])))"#
        ),
        vec!["mosc_guard_admission_decision_duration_seconds_bucket".to_owned()]
    );
    assert_eq!(
        metric_names(
            r#"time() - min(mosc_guard_oldest_deferred_deletion_timestamp_seconds{job="mosc-guard"} > 0)"#
        ),
        vec!["mosc_guard_oldest_deferred_deletion_timestamp_seconds".to_owned()]
    );
}
