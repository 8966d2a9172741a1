//! Decoding never panics: random and mutated AdmissionReviews and cluster lists.

use super::*;

/// One of `choices`, each as often as its weight says.
fn weighted(choices: &[(usize, &'static str)]) -> impl Strategy<Value = &'static str> + use<> {
    let all: Vec<&'static str> = choices
        .iter()
        .flat_map(|(n, c)| std::iter::repeat_n(*c, *n))
        .collect();
    prop::sample::select(all)
}

fn review() -> impl Strategy<Value = Value> {
    (
        weighted(&[
            (4, "DELETE"),
            (2, "UPDATE"),
            (1, "CREATE"),
            (1, "CONNECT"),
            (1, "delete"),
        ]),
        weighted(&[
            (3, "machineosconfigs"),
            (2, "machineosbuilds"),
            (1, "machineconfigpools"),
            (1, "nodes"),
        ]),
        weighted(&[
            (4, GROUP),
            (1, ""),
            (1, "machineconfiguration.openshift.io.evil"),
        ]),
        prop::option::weighted(0.4, weighted(&[(1, ""), (1, "status"), (1, "finalizers")])),
        prop_oneof![9 => any::<bool>().prop_map(Value::from), 1 => Just(Value::Null)],
        prop::option::weighted(0.9, k8s_object()),
        prop::option::weighted(0.5, k8s_object()),
    )
        .prop_map(|(op, resource, group, sub, dry_run, old, new)| {
            let target = ReviewTarget {
                group,
                version: "v1",
                kind: "MachineOSConfig",
                resource,
            };
            Review::new(op, target)
                .uid("705ab4f5-6393-11e8-b7cc-42010a800002")
                .name("worker")
                .set(
                    "userInfo",
                    json!({"username": "admin", "groups": ["system:masters"]}),
                )
                .set("subResource", json!(sub))
                .set("object", json!(new))
                .set("oldObject", json!(old))
                .set("dryRun", dry_run)
                .json()
        })
}

/// The cluster the decode property's admission decides against: pool worker rolling to one of
/// the images, so guarded deletions come out denied, allowed and overridden.
fn decode_cluster() -> Snapshot {
    let a = Image {
        repo: 1,
        hex: 1,
        tag: 0,
        spelling: 0,
    }
    .render();
    let b = Image {
        repo: 1,
        hex: 0,
        tag: 0,
        spelling: 0,
    }
    .render();
    Snapshot {
        machine_os_configs: vec![parse(&json!({
            "metadata": {"name": "worker"},
            "spec": {"machineConfigPool": {"name": "worker"}, "renderedImagePushSpec": "quay.io/x/ocb-image:latest"},
            "status": {"currentImagePullSpec": a}
        }))],
        machine_os_builds: vec![parse(&json!({
            "metadata": {"name": "worker-b1", "labels": {LABEL_MACHINE_OS_CONFIG: "worker"}},
            "status": {"digestedImagePushSpec": a}
        }))],
        pools: vec![parse(&json!({
            "metadata": {"name": "worker"},
            "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}},
            "status": {"conditions": [{"type": "Updating", "status": "True"}]}
        }))],
        nodes: vec![
            Arc::new(node(
                "rolling",
                &NodeSpec {
                    desired: Some(a.clone()),
                    current: Some(b.clone()),
                    state: Some("Working"),
                    role: "worker",
                    extra: "",
                },
            )),
            Arc::new(node(
                "settled",
                &NodeSpec {
                    desired: Some(b.clone()),
                    current: Some(b),
                    state: Some("Done"),
                    role: "worker",
                    extra: "",
                },
            )),
        ],
        ..Default::default()
    }
}

#[test]
fn admission_reviews_never_panic() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let admission = Admission::new(Engine::new(
        StaticView(Arc::new(decode_cluster())),
        PolicyMode::InFlight,
        Arc::new(Metrics::default()),
        Duration::from_secs(5),
    ));
    let (decoded, guarded) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let n = cases("MOSC_GUARD_CASES_DECODE", 2000);
    let inputs = prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..256).prop_map(Input::Noise),
        2 => review().prop_map(|value| Input::Mutated { value, edits: vec![], byte_edits: vec![] }),
        6 => mutated(review()),
        1 => mutated(json_value()),
    ];
    check("admission_reviews_never_panic", n, inputs, |input| {
        let body = input.bytes_of(|v| serde_json::to_vec(v).expect("serializes"));
        let Ok(req) = admission::decode(&body) else {
            return Ok(());
        };
        decoded.fetch_add(1, Ordering::Relaxed);
        let undecodable_deletion = match admission::classify(&req) {
            Classified::Ignore => false,
            Classified::Delete { subject, .. } => {
                guarded.fetch_add(1, Ordering::Relaxed);
                subject.is_err()
            }
        };
        let response = runtime.block_on(admission.review(&req));
        prop_assert_eq!(&response.uid, &req.uid);
        prop_assert!(
            !(undecodable_deletion && response.allowed),
            "a deletion whose object does not decode was allowed"
        );
        let out = serde_json::to_vec(&answer::into_review(response)).expect("serializes");
        prop_assert!(!out.is_empty());
        Ok(())
    });
    let (decoded, guarded) = (decoded.into_inner(), guarded.into_inner());
    println!("  decoded {decoded} reviews, {guarded} of them guarded deletions");
    assert!(
        guarded as f64 > 0.03 * f64::from(n),
        "too few inputs reach the policy"
    );
}
