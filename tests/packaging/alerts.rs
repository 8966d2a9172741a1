//! The alerts of the openshift component (`manifests/components/openshift/prometheusrule.yaml`)
//! against `promtool` (Debian package `prometheus`, installed by `hack/install-deps.sh`):
//!
//! - the rule groups, taken from the PrometheusRule as `kubectl kustomize` renders the openshift
//!   overlays (identical in both), pass `promtool check rules`;
//! - `promtool test rules` runs every file in `tests/alerts/` against them, and every alert has
//!   a case where it fires and one where it must not;
//! - every metric a rule reads is one the guard exports (`Metrics::default()` rendered, plus
//!   the scrape's own `up`), so a renamed metric cannot leave an alert silently reading nothing;
//! - the tests can fail: with every alert's expression replaced by one that never fires,
//!   `promtool test rules` fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use mosc_guard::core::outcome::Outcome;
use mosc_guard::telemetry::metrics::Metrics;
use testkit::manifests::render;
use testkit::markdown::heading_anchors;

const PROMTOOL: &str = "promtool";

/// The rendered PrometheusRule's `spec` (its rule groups); the same in every openshift overlay.
fn rule_spec() -> Value {
    let mut specs = Vec::new();
    for dir in ["overlays/openshift", "overlays/openshift-defer"] {
        let objects = render(dir).unwrap_or_else(|e| panic!("{e}"));
        let rules: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "PrometheusRule")
            .collect();
        assert_eq!(rules.len(), 1, "{dir}: one PrometheusRule");
        assert_eq!(rules[0]["metadata"]["namespace"], "mosc-guard", "{dir}");
        specs.push(rules[0]["spec"].clone());
    }
    assert_eq!(
        specs[0], specs[1],
        "both openshift overlays ship the same rules"
    );
    specs.swap_remove(0)
}

fn alerts(spec: &Value) -> Vec<&Value> {
    spec["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules"))
        .filter(|r| r.get("alert").is_some())
        .collect()
}

fn test_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/alerts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".test.yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no rule tests in {}", dir.display());
    files
}

/// Writes `spec` as `rules.yaml` and copies the tests beside it (their `rule_files` name it).
fn workdir(spec: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = serde_yaml_ng::to_string(&serde_json::json!({"groups": spec["groups"]}))
        .expect("rules as YAML");
    std::fs::write(dir.path().join("rules.yaml"), rules).expect("write rules");
    for f in test_files() {
        std::fs::copy(&f, dir.path().join(f.file_name().expect("name"))).expect("copy test");
    }
    dir
}

/// Runs promtool in `dir`; (success, stdout + stderr).
fn promtool(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(PROMTOOL)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("running {PROMTOOL} (Debian package prometheus; `make deps` installs it): {e}")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn test_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read workdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".test.yaml"))
        .collect();
    names.sort();
    names
}

#[test]
fn rules_pass_promtool_and_their_unit_tests() {
    let spec = rule_spec();
    let dir = workdir(&spec);
    let (ok, out) = promtool(dir.path(), &["check", "rules", "rules.yaml"]);
    assert!(ok, "promtool check rules:\n{out}");
    let mut args = vec!["test".to_string(), "rules".to_string()];
    args.extend(test_names(dir.path()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out) = promtool(dir.path(), &args);
    println!("{out}");
    assert!(ok, "promtool test rules:\n{out}");
}

#[test]
fn every_alert_is_tested_firing_and_quiet() {
    let spec = rule_spec();
    let names: BTreeSet<String> = alerts(&spec)
        .iter()
        .map(|r| r["alert"].as_str().expect("alert name").to_string())
        .collect();
    assert!(names.len() >= 6, "{names:?}");
    // alert -> (cases where it fires, cases where it must not)
    let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for f in test_files() {
        let text = std::fs::read_to_string(&f).expect("read test");
        let doc: Value = serde_yaml_ng::from_str(&text).expect("test file is YAML");
        for test in doc["tests"].as_array().expect("tests") {
            for case in test["alert_rule_test"].as_array().into_iter().flatten() {
                let name = case["alertname"].as_str().expect("alertname").to_string();
                let fires = case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
                let entry = seen.entry(name).or_default();
                if fires {
                    entry.0 += 1;
                } else {
                    entry.1 += 1;
                }
            }
        }
    }
    for name in &names {
        let (fires, quiet) = seen.get(name).copied().unwrap_or_default();
        assert!(
            fires > 0 && quiet > 0,
            "{name}: {fires} firing and {quiet} quiet cases"
        );
    }
    let unknown: Vec<&String> = seen.keys().filter(|n| !names.contains(*n)).collect();
    assert!(
        unknown.is_empty(),
        "tests of alerts that do not exist: {unknown:?}"
    );
}

/// Sample names the guard's /metrics can carry, from the `# TYPE` lines of its exposition
/// (a labelled family shows only once it has a series, so the calls the guard makes create
/// them first).
fn exported_metrics() -> BTreeSet<String> {
    let metrics = Metrics::default();
    metrics.decision("machineosconfigs", Outcome::Unconfirmed, 0.001);
    for result in ["confirmed", "overturned", "failed"] {
        metrics.confirmation(result);
    }
    metrics.nodes_stuck([("worker".to_string(), 1)]);
    metrics.needed_images(&mosc_guard::core::registry::report::pool_counts(
        ["worker"],
        [],
    ));
    let text = metrics.render(&[("nodes", 1)], &[("nodes", false)], true);
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
        let suffixes: &[&str] = match kind {
            "counter" => &["_total", "_created"],
            "histogram" => &["_bucket", "_sum", "_count", "_created"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    names
}

#[test]
fn rules_read_only_metrics_the_guard_exports() {
    let exported = exported_metrics();
    assert!(
        exported.contains("mosc_guard_serving_certificate_expiry_timestamp_seconds"),
        "{exported:?}"
    );
    let spec = rule_spec();
    let mut read = BTreeSet::new();
    for rule in alerts(&spec) {
        let expr = rule["expr"].as_str().expect("expr");
        let mut rest = expr;
        while let Some(at) = rest.find("mosc_guard_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            assert!(
                exported.contains(&name),
                "{}: reads {name}, which the guard does not export ({exported:?})",
                rule["alert"]
            );
            read.insert(name);
        }
        let up = expr.contains("up{");
        assert!(
            up || expr.contains("mosc_guard_"),
            "{}: reads none of the guard's metrics",
            rule["alert"]
        );
    }
    println!("metrics read by the alerts: {read:?}");
}

#[test]
fn the_rule_tests_can_fail() {
    let mut spec = rule_spec();
    for group in spec["groups"].as_array_mut().expect("groups") {
        for rule in group["rules"].as_array_mut().expect("rules") {
            if rule.get("alert").is_some() {
                rule["expr"] = Value::from("vector(1) == 0");
            }
        }
    }
    let dir = workdir(&spec);
    let mut args = vec!["test".to_string(), "rules".to_string()];
    args.extend(test_names(dir.path()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out) = promtool(dir.path(), &args);
    assert!(!ok, "promtool passed rules that never fire:\n{out}");
    assert!(out.contains("FAILED"), "{out}");
}

/// Where every alert's `runbook_url` points: its section of docs/runbooks.md as GitHub
/// renders it.
const RUNBOOK_BASE: &str = "https://github.com/mosc-guard/mosc-guard/blob/main/docs/runbooks.md#";

#[test]
fn every_alert_links_its_runbook_section_in_runbooks_md() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/runbooks.md"))
            .expect("read docs/runbooks.md");
    let anchors = heading_anchors(&docs);
    assert!(
        anchors.contains("alerts"),
        "docs/runbooks.md has an Alerts section"
    );
    let spec = rule_spec();
    for rule in alerts(&spec) {
        let name = rule["alert"].as_str().expect("alert name");
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no runbook_url annotation"));
        let anchor = url
            .strip_prefix(RUNBOOK_BASE)
            .unwrap_or_else(|| panic!("{name}: runbook_url {url} is not under {RUNBOOK_BASE}"));
        assert_eq!(
            anchor,
            name.to_lowercase(),
            "{name}: the section is named after the alert"
        );
        assert!(
            anchors.contains(anchor),
            "{name}: docs/runbooks.md has no heading with anchor #{anchor} ({anchors:?})"
        );
        // The section is a runbook: it says what the alert means and what to do.
        let heading = format!("### {name}\n");
        let start = docs
            .find(&heading)
            .unwrap_or_else(|| panic!("no `{heading}`"));
        let section = &docs[start + heading.len()..];
        let section = &section[..section.find("\n#").unwrap_or(section.len())];
        for part in [
            "**Meaning**",
            "**Impact**",
            "**Diagnosis**",
            "**Mitigation**",
        ] {
            assert!(
                section.contains(part),
                "{name}: its runbook has no {part}:\n{section}"
            );
        }
    }
}

#[test]
fn heading_anchors_are_githubs() {
    let anchors = heading_anchors(
        "# Operating mosc-guard\n## Shutdown: the drain delay\n```\n# not a heading\n```\n### MoscGuardUnavailable\n## Install\n## Install\n",
    );
    let want: BTreeSet<String> = [
        "operating-mosc-guard",
        "shutdown-the-drain-delay",
        "moscguardunavailable",
        "install",
        "install-1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(anchors, want);
}
