//! What the admin sees on stdout: each kubectl and mosc-guard command and its output, the pool's
//! line as `kubectl get mcp` shows it, headings and notes.

use kube::api::DynamicObject;
use mosc_guard::core::recovery::patch::shell_word;
use serde_json::Value;
use testkit::controlplane::{ControlPlane, KubectlOutput};
use testkit::guard::GuardBin;
use testkit::mco;
use testkit::scenario::OCB_REPO;

use crate::POOL;

/// `kubectl get machineosconfig -o` columns: name, deletion timestamp and finalizers.
pub(crate) const MOSC_COLUMNS: &str = "custom-columns=NAME:.metadata.name,DELETING-SINCE:.metadata.deletionTimestamp,FINALIZERS:.metadata.finalizers";

/// `kubectl get events -o` columns: reason, object and message.
pub(crate) const EVENT_COLUMNS: &str =
    "custom-columns=REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message";

/// `kubectl get nodes -o` columns: name and MCO state.
pub(crate) const NODE_COLUMNS: &str = r"custom-columns=NAME:.metadata.name,STATE:.metadata.annotations.machineconfiguration\.openshift\.io/state";

/// Runs kubectl as the admin and prints the command and what it printed (indented).
pub(crate) async fn kubectl(
    cp: &ControlPlane,
    args: &[&str],
    stdin: Option<&str>,
) -> testkit::Result<KubectlOutput> {
    let shown: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    match stdin {
        Some(input) => println!("$ kubectl {} <<EOF\n{}EOF", shown.join(" "), input),
        None => println!("$ kubectl {}", shown.join(" ")),
    }
    let out = cp.kubectl_with_stdin(args, stdin).await?;
    for line in out.stdout.lines().chain(out.stderr.lines()) {
        println!("    {line}");
    }
    if !out.success() {
        match out.status.code() {
            Some(code) => println!("    (kubectl exited with status {code})"),
            None => println!("    (kubectl {})", out.status),
        }
    }
    Ok(out)
}

/// Runs `mosc-guard ARGS` as the admin (the cluster's admin kubeconfig) and prints the command
/// and what it printed, stdout and stderr in the order written (indented); returns its exit
/// code and that text.
pub(crate) async fn mosc_guard(
    bin: &GuardBin,
    cp: &ControlPlane,
    args: &[&str],
) -> testkit::Result<(Option<i32>, String)> {
    let shown: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    println!("$ mosc-guard {}", shown.join(" "));
    let cli = bin.cli().args(args).kubeconfig(cp.kubeconfig());
    let (code, output) = tokio::task::spawn_blocking(move || cli.run_merged()).await?;
    for line in output.lines() {
        println!("    {line}");
    }
    match code {
        Some(0) => {}
        Some(code) => println!("    (mosc-guard exited with status {code})"),
        None => println!("    (mosc-guard was killed by a signal)"),
    }
    Ok((code, output))
}

/// Prints pool worker's state the way `kubectl get mcp worker` shows it.
pub(crate) async fn pool_line(client: &kube::Client) -> testkit::Result<()> {
    let pool = mco::mcps(client).get(POOL).await?;
    println!(
        "  pool worker: UPDATED={} UPDATING={} DEGRADED={}  machines {}, ready {}, updated {}, degraded {}",
        condition_status(&pool, "Updated"),
        condition_status(&pool, "Updating"),
        condition_status(&pool, "Degraded"),
        pool_count(&pool, "machineCount"),
        pool_count(&pool, "readyMachineCount"),
        pool_count(&pool, "updatedMachineCount"),
        pool_count(&pool, "degradedMachineCount"),
    );
    Ok(())
}

pub(crate) fn condition_status<'a>(obj: &'a DynamicObject, type_: &str) -> &'a str {
    mco::condition(obj, type_)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("-")
}

pub(crate) fn pool_count(pool: &DynamicObject, key: &str) -> String {
    pool.data
        .get("status")
        .and_then(|s| s.get(key))
        .map_or_else(|| "-".to_owned(), Value::to_string)
}

pub(crate) fn heading(text: &str) {
    println!("\n== {text}");
}

pub(crate) fn note(text: &str) {
    println!("  # {text}");
}

/// `<host>/<OCB_REPO>@sha256:<hex>` as `.../ocb-image@sha256:<12 hex>`.
pub(crate) fn short_image(image: &str) -> String {
    let name = OCB_REPO.rsplit('/').next().unwrap_or(OCB_REPO);
    match image.split_once("@sha256:") {
        Some((_, hex)) => format!(".../{name}@sha256:{}", &hex[..hex.len().min(12)]),
        None => image.to_owned(),
    }
}

/// An annotation key in a kubectl JSONPath (dots escaped).
pub(crate) fn escape_key(key: &str) -> String {
    key.replace('.', r"\.")
}
