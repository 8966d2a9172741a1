//! Reading a must-gather-sized dump (`check --from-dir`): a NodeList of realistic OpenShift
//! nodes as `oc get nodes -o yaml` writes it, against a hostile file of the same size whose
//! flow collections are nested far past the depth limit (`[[[[...`). Before the linear depth
//! scan the parser spent about 17 µs a byte on such input before rejecting it (55 s for 3 MB);
//! the scan must make the hostile file cost no more than the real one.
//!
//! Run: `cargo bench --bench dump` (figures are recorded in BENCHMARKS.md).

use std::hint::black_box;
use std::path::Path;

use criterion::{BenchmarkId, Criterion, Throughput};
use mosc_guard::access::dump::load_dir;
use serde_json::{Value, json};

/// Target size of each file (3 MB, the size the slow case was measured at).
const SIZE: usize = 3 * 1024 * 1024;

/// A NodeList of realistic worker nodes (~20 labels, ~30 annotations) as YAML, about SIZE.
fn real_nodes() -> String {
    let mut items: Vec<Value> = Vec::new();
    let mut yaml = String::new();
    let mut i = 0;
    while yaml.len() < SIZE {
        let node = testkit::realistic::node(i, "worker", "", "", "Done");
        items.push(serde_json::to_value(node).unwrap_or(Value::Null));
        i += 1;
        if i % 100 == 0 {
            yaml = list_yaml(&items);
        }
    }
    list_yaml(&items)
}

fn list_yaml(items: &[Value]) -> String {
    serde_yaml_ng::to_string(&json!({"apiVersion": "v1", "kind": "NodeList", "items": items}))
        .unwrap_or_default()
}

/// A file that says it holds Nodes, its body one flow collection nested SIZE/2 deep.
fn hostile() -> String {
    let depth = SIZE / 2 - 64;
    format!(
        "apiVersion: v1\nkind: NodeList\nitems: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

fn write_dump(root: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let dir = root.join(name);
    let nodes = dir.join("cluster-scoped-resources/core/nodes");
    std::fs::create_dir_all(&nodes).unwrap_or_else(|e| panic!("{}: {e}", nodes.display()));
    std::fs::write(nodes.join("nodes.yaml"), text).unwrap_or_else(|e| panic!("write: {e}"));
    dir
}

fn main() {
    let root = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let real = real_nodes();
    let hostile = hostile();
    let cases = [
        (
            "real-nodes",
            write_dump(root.path(), "real", &real),
            real.len(),
        ),
        (
            "hostile-nested",
            write_dump(root.path(), "hostile", &hostile),
            hostile.len(),
        ),
    ];
    for (name, dir, bytes) in &cases {
        let started = std::time::Instant::now();
        let loaded = load_dir(dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        let took = started.elapsed();
        println!(
            "{name}: {bytes} bytes read in {took:.2?} ({:.3} µs/byte), {} node(s), {} incomplete",
            took.as_secs_f64() * 1e6 / *bytes as f64,
            loaded.snapshot.nodes.len(),
            loaded.incomplete.len()
        );
    }

    let mut c = Criterion::default().configure_from_args().sample_size(10);
    let mut group = c.benchmark_group("load_dir");
    for (name, dir, bytes) in &cases {
        group.throughput(Throughput::Bytes(*bytes as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), dir, |b, dir| {
            b.iter(|| black_box(load_dir(dir)))
        });
    }
    group.finish();
    c.final_summary();
}
