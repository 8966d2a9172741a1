//! The guard's ServiceAccount: least privilege, and enough for the real guard in deny and defer mode.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_rbac_is_least_privilege_and_enough_for_the_guard() {
    use testkit::mco::{self, CURRENT_IMAGE, DESIRED_IMAGE, STATE, STATE_DONE, STATE_WORKING};
    use testkit::scenario::{WORKER_ROLE_LABEL, create_pool};

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();

    // The base for real, except its webhook configuration: that one calls the in-cluster
    // Service, which has no endpoints here (no pods run); the guard started below is
    // registered in its place.
    apply_base_without_webhook(&cp).await;

    let dir = testkit::temp_dir("mosc-guard-sa-").expect("temp dir");
    let kubeconfig = service_account_kubeconfig(&cp, dir.path()).await;
    let cache = dir.path().join("kubectl-cache");
    let as_guard = |args: Vec<String>| {
        let (kubeconfig, cache) = (kubeconfig.clone(), cache.clone());
        async move {
            testkit::kubectl::run(&kubeconfig, &cache, &args, None)
                .await
                .unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")))
        }
    };

    // These are the ServiceAccount's own credentials.
    let out = as_guard(vec![
        "auth".into(),
        "whoami".into(),
        "-o".into(),
        "jsonpath={.status.userInfo.username}".into(),
    ])
    .await;
    assert_eq!(
        out.stdout.trim(),
        "system:serviceaccount:mosc-guard:mosc-guard",
        "{out:?}"
    );

    let mosc = "machineosconfigs.machineconfiguration.openshift.io";
    let mosb = "machineosbuilds.machineconfiguration.openshift.io";
    let mcp = "machineconfigpools.machineconfiguration.openshift.io";
    let events = "events.events.k8s.io";
    let leases = "leases.coordination.k8s.io";
    let allowed: &[&[&str]] = &[
        &["get", "nodes"],
        &["list", "nodes"],
        &["watch", "nodes"],
        &["list", mosc],
        &["watch", mosc],
        &["patch", mosc],
        &["list", mosb],
        &["watch", mosb],
        &["list", mcp],
        &["watch", mcp],
        &["create", events, "-n", "default"],
        &["patch", events, "-n", "default"],
        &["get", leases, "-n", NAMESPACE],
        &["create", leases, "-n", NAMESPACE],
        &["update", leases, "-n", NAMESPACE],
        &[
            "get",
            "controllerconfigs.machineconfiguration.openshift.io/machine-config-controller",
        ],
        &["list", "imagedigestmirrorsets.config.openshift.io"],
        &["list", "imagecontentsourcepolicies.operator.openshift.io"],
    ];
    let denied: &[&[&str]] = &[
        &["get", "secrets", "--all-namespaces"],
        &["get", "secrets", "-n", NAMESPACE],
        &["list", "secrets", "-n", "default"],
        &["patch", "nodes"],
        &["update", "nodes"],
        &["delete", "nodes"],
        &["delete", mosc],
        &["update", mosc],
        &["patch", mosc, "--subresource=status"],
        &["delete", mosb],
        &["patch", mosb],
        &["patch", mcp],
        &["create", leases, "-n", "kube-system"],
        &["update", leases, "-n", "kube-node-lease"],
        &["create", events, "-n", "kube-system"],
        &["create", "events", "-n", "default"],
        &["create", "pods", "-n", NAMESPACE],
        // The ControllerConfig holds the nodes' pull secret: only the one MCO keeps, read only.
        &[
            "list",
            "controllerconfigs.machineconfiguration.openshift.io",
        ],
        &[
            "get",
            "controllerconfigs.machineconfiguration.openshift.io/other",
        ],
        &[
            "patch",
            "controllerconfigs.machineconfiguration.openshift.io/machine-config-controller",
        ],
        &["watch", "imagedigestmirrorsets.config.openshift.io"],
        &["create", "imagedigestmirrorsets.config.openshift.io"],
        &[
            "create",
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
        ],
    ];
    for (cases, want) in [(allowed, "yes"), (denied, "no")] {
        for case in cases {
            let mut args = vec!["auth".to_owned(), "can-i".to_owned()];
            args.extend(case.iter().map(|a| (*a).to_owned()));
            let out = as_guard(args).await;
            assert_eq!(
                out.stdout.trim(),
                want,
                "can-i {} as the ServiceAccount: {out:?}",
                case.join(" ")
            );
        }
    }

    // A minimal situation, written as the admin: pool worker has a node rolling to the image
    // of MOSC worker's build; pool infra's MOSC has a build whose image no node uses. (Both
    // MOSCs push to one repository, as pools often do: the builds, not the repository, say
    // which image is whose.)
    let (worker_image, infra_image) = (image("1f"), image("2e"));
    create_pool(&client, "worker", WORKER_ROLE_LABEL, 1)
        .await
        .expect("pool worker");
    create_pool(&client, "infra", "node-role.kubernetes.io/infra", 1)
        .await
        .expect("pool infra");
    let nodes = create_worker_nodes(&client, 2).await;
    for (pool, image) in [("worker", &worker_image), ("infra", &infra_image)] {
        create_built_mosc(&client, pool, image).await;
    }
    mco::nodes(&client)
        .patch(
            &nodes[0],
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                DESIRED_IMAGE: worker_image,
                STATE: STATE_WORKING,
            }}})),
        )
        .await
        .expect("node rolling");

    // The real guard with the ServiceAccount's token: ready means every watch lists.
    let guard = BIN
        .serve(&cp)
        .kubeconfig(&kubeconfig)
        .start()
        .await
        .expect("mosc-guard starts with the ServiceAccount's credentials");
    // Registered from manifests/base through testkit::manifests, pointed at this guard.
    testkit::webhooks::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");

    // docs/install.md, "Verify": a server-side dry run shows the same denial.
    let out = kubectl(
        &cp,
        &["delete", "machineosconfig", "worker", "--dry-run=server"],
        None,
    )
    .await;
    assert!(
        !out.success()
            && out
                .stderr
                .contains("admission webhook \"deletions.mosc-guard.dev\" denied the request"),
        "{out:?}"
    );
    let out = kubectl(&cp, &["delete", "machineosconfig", "worker"], None).await;
    assert!(
        !out.success(),
        "deleting worker's MOSC must be refused: {out:?}"
    );
    assert!(
        out.stderr
            .contains("admission webhook \"deletions.mosc-guard.dev\" denied the request")
            && out.stderr.contains(&nodes[0]),
        "{}",
        out.stderr
    );
    let out = kubectl(&cp, &["delete", "machineosconfig", "infra"], None).await;
    assert!(
        out.success(),
        "deleting infra's MOSC must be allowed: {out:?}"
    );

    // The refusal was recorded as an Event in `default` with the ServiceAccount's grant there.
    testkit::scenario::wait_for(
        || async {
            let out = kubectl(
                &cp,
                &[
                    "get",
                    "events.events.k8s.io",
                    "-n",
                    "default",
                    "-o",
                    "jsonpath={range .items[*]}{.reason} {.regarding.name}{\"\\n\"}{end}",
                ],
                None,
            )
            .await;
            Ok(out
                .stdout
                .lines()
                .any(|l| l == "DeletionBlocked worker")
                .then_some(()))
        },
        Duration::from_secs(10),
        "a DeletionBlocked Event about MOSC worker in namespace default",
    )
    .await
    .expect("Event recorded");

    // The garbage collector then deletes infra's build (the MOSC controls it), which the guard
    // allows too: wait for it, so both allows are counted.
    let infra_build = format!("infra-{}", &infra_image[infra_image.len() - 12..]);
    testkit::poll::wait_gone(&mco::mosbs(&client), &infra_build, Duration::from_secs(30))
        .await
        .expect("infra's build garbage-collected");

    // Each allow was confirmed by a fresh read (node list, MOSB list) with these credentials.
    let metrics = guard.metrics().await.expect("GET /metrics");
    // Sum of a counter over the series whose labels include `label`.
    let count = |name: &str, label: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let decisions = "mosc_guard_admission_decisions_total";
    assert_eq!(
        (
            count(decisions, "result=\"denied\""),
            count(decisions, "result=\"allowed\""),
            count("mosc_guard_confirmations_total", "result=\"confirmed\""),
        ),
        (2.0, 2.0, 2.0),
        "two denials (dry run and real), two allows (infra's MOSC, then its build deleted by the \
         garbage collector), each confirmed by a fresh read:\n{metrics}"
    );

    guard.stop();
    assert_nothing_forbidden(&guard);

    // docs/runbooks.md, "When mosc-guard is down": with no guard answering, the deletion is
    // refused by the API server itself (failurePolicy Fail).
    let out = kubectl(&cp, &["delete", "machineosconfig", "worker"], None).await;
    assert!(
        !out.success()
            && out
                .stderr
                .contains("failed calling webhook \"deletions.mosc-guard.dev\""),
        "{out:?}"
    );

    // Defer mode with the same credentials exercises the grants only it uses: the Lease
    // (leader election in mosc-guard) and patching MOSC finalizers. Its admission policy lets
    // the ServiceAccount add the finalizer too (the base's only lets it remove it).
    let defer = rendered("overlays/defer");
    let policy = get(&defer, "ValidatingAdmissionPolicy", VAP).to_string();
    kubectl_ok(&cp, &["apply", "-f", "-"], Some(&policy)).await;
    // The API server applies a changed policy after a moment: wait until a server-side dry run
    // of the guard's own finalizer patch passes, so the guard's first patch is not refused.
    testkit::scenario::wait_for(
        || async {
            let out = as_guard(vec![
                "patch".into(),
                "machineosconfig".into(),
                "worker".into(),
                "--type=merge".into(),
                "--dry-run=server".into(),
                "-p".into(),
                format!(r#"{{"metadata":{{"finalizers":["{FINALIZER}"]}}}}"#),
            ])
            .await;
            Ok(out.success().then_some(()))
        },
        Duration::from_secs(30),
        "the defer-mode admission policy to be in force",
    )
    .await
    .expect("policy in force");
    let guard = BIN
        .serve(&cp)
        .kubeconfig(&kubeconfig)
        .args(&["--deletion-mode=defer"])
        .start()
        .await
        .expect("mosc-guard starts in defer mode with the ServiceAccount's credentials");
    testkit::webhooks::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");
    let finalizers = |name: &'static str| {
        let client = client.clone();
        async move {
            let mosc = mco::moscs(&client).get_opt(name).await?;
            Ok::<_, testkit::Error>(mosc.map(|m| {
                let deleting = m.metadata.deletion_timestamp.is_some();
                (m.metadata.finalizers.unwrap_or_default(), deleting)
            }))
        }
    };
    // The Lease holder's finalizer controller adopts the existing MOSC (a patch).
    testkit::scenario::wait_for(
        || async {
            Ok(finalizers("worker")
                .await?
                .filter(|(f, _)| f.iter().any(|f| f == FINALIZER))
                .map(|_| ()))
        },
        Duration::from_secs(30),
        "the guard to add its finalizer to MOSC worker",
    )
    .await
    .expect("finalizer added");
    let out = kubectl_ok(
        &cp,
        &[
            "get",
            "lease",
            "mosc-guard",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
        None,
    )
    .await;
    assert!(!out.stdout.trim().is_empty(), "the Lease has a holder");
    // The deletion is accepted and held while the node still needs the image ...
    kubectl_ok(
        &cp,
        &["delete", "machineosconfig", "worker", "--wait=false"],
        None,
    )
    .await;
    let (_, deleting) = finalizers("worker")
        .await
        .expect("read MOSC")
        .expect("MOSC worker still exists");
    assert!(deleting, "MOSC worker is held by the finalizer");
    // ... and released (a patch removing the finalizer) once every node of the pool runs it.
    for node in &nodes {
        mco::nodes(&client)
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    DESIRED_IMAGE: worker_image, CURRENT_IMAGE: worker_image, STATE: STATE_DONE,
                }}})),
            )
            .await
            .expect("node reached the image");
    }
    testkit::scenario::wait_for(
        || async { Ok(finalizers("worker").await?.is_none().then_some(())) },
        Duration::from_secs(30),
        "the guard to release MOSC worker",
    )
    .await
    .expect("deferred deletion completed");
    guard.stop();
    assert_nothing_forbidden(&guard);
}

/// Fails if the guard's log mentions anything "forbidden" (an RBAC refusal).
fn assert_nothing_forbidden(guard: &Guard) {
    let log = guard.log();
    let forbidden: Vec<&str> = log
        .lines()
        .filter(|l| l.to_ascii_lowercase().contains("forbidden"))
        .collect();
    assert!(
        forbidden.is_empty(),
        "the guard was refused something:\n{}",
        forbidden.join("\n")
    );
}
