//! Reading a must-gather directory never panics, whatever its files hold.

use super::*;

// ---------------------------------------------------------------------------------------------
// Directory files.

/// A file's documents before mutation: objects, lists of them, or anything at all.
fn documents() -> impl Strategy<Value = Value> {
    let object = prop_oneof![
        4 => k8s_object(),
        1 => k8s_object().prop_map(|mut o| {
            o["apiVersion"] = json!(format!("{GROUP}/v1alpha1"));
            o
        }),
        1 => json_value(),
    ];
    let document = prop_oneof![
        3 => object.clone(),
        1 => (prop::sample::select(&["List", "NodeList", "MachineOSConfigList", "List "][..]),
              prop::collection::vec(object.clone(), 0..4))
            .prop_map(|(kind, items)| json!({"apiVersion": "v1", "kind": kind, "items": items})),
    ];
    prop::collection::vec(document, 0..4).prop_map(Value::Array)
}

#[derive(Clone, Debug)]
struct File {
    input: Input,
    extension: &'static str,
    /// YAML documents separated by `---` (else one JSON value per line, for JSON files).
    stream: bool,
}

fn file() -> impl Strategy<Value = File> {
    (
        prop_oneof![
            1 => prop::collection::vec(any::<u8>(), 0..256).prop_map(Input::Noise),
            6 => mutated(documents()),
        ],
        prop::sample::select(&["yaml", "yml", "json", "JSON", "txt"][..]),
        any::<bool>(),
    )
        .prop_map(|(input, extension, stream)| File {
            input,
            extension,
            stream,
        })
}

impl File {
    fn bytes(&self) -> Vec<u8> {
        let json = self.extension.eq_ignore_ascii_case("json");
        let stream = self.stream;
        self.input.bytes_of(|v| {
            let docs: Vec<Value> = match v {
                Value::Array(docs) if stream => docs.clone(),
                Value::Array(docs) => docs.first().cloned().into_iter().collect(),
                other => vec![other.clone()],
            };
            let text = if json {
                docs.iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                docs.iter()
                    .map(|d| serde_yaml_ng::to_string(d).expect("serializes"))
                    .collect::<Vec<_>>()
                    .join("---\n")
            };
            text.into_bytes()
        })
    }
}

#[test]
fn directory_files_never_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (targets, blocked) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let n = cases("MOSC_GUARD_CASES_DECODE", 500);
    let files = prop::collection::vec(file(), 1..3);
    check("directory_files_never_panic", n, files, |files| {
        for entry in std::fs::read_dir(dir.path()).expect("read tempdir") {
            std::fs::remove_file(entry.expect("entry").path()).expect("remove");
        }
        for (i, f) in files.iter().enumerate() {
            let path = dir.path().join(format!("f{i}.{}", f.extension));
            std::fs::write(path, f.bytes()).expect("write");
        }
        let loaded = dump::load_dir(dir.path());
        prop_assert!(loaded.is_ok(), "{:?}", loaded.err());
        let Ok(loaded) = loaded else { return Ok(()) };
        let s = &loaded.snapshot;
        let configs = s
            .machine_os_configs
            .iter()
            .map(|c| Deletion::MachineOSConfig(c));
        let builds = s
            .machine_os_builds
            .iter()
            .map(|b| Deletion::MachineOSBuild(b));
        for target in configs.chain(builds) {
            targets.fetch_add(1, Ordering::Relaxed);
            for mode in [PolicyMode::InFlight, PolicyMode::InUse] {
                let verdict = evaluate(s, target, mode);
                if verdict.blocked() {
                    blocked.fetch_add(1, Ordering::Relaxed);
                    prop_assert!(!message::denial(&verdict).is_empty());
                }
            }
        }
        Ok(())
    });
    println!(
        "  {} targets decided, {} blocked",
        targets.into_inner(),
        blocked.into_inner()
    );
}
