use super::*;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn bundle_file_names() {
    assert_eq!(
        bundle_host("image-registry.openshift-image-registry.svc..5000"),
        "image-registry.openshift-image-registry.svc:5000"
    );
    assert_eq!(bundle_host("quay.example"), "quay.example");
}

#[test]
fn reads_what_the_node_gets() {
    let json = serde_json::json!({
        "internalRegistryPullSecret": b64(r#"{"auths":{"quay.example":{"auth":"dTpw"}}}"#),
        "imageRegistryBundleData": [{"file": "internal..5000", "data": b64("SERVICE CA")}],
        "imageRegistryBundleUserData": [
            {"file": "quay.example", "data": b64("USER CA")},
            {"file": "internal..5000", "data": b64("USER CA FOR INTERNAL")}
        ],
        "additionalTrustBundle": b64("CLUSTER CA"),
        "proxy": {"httpsProxy": "http://proxy.example:3128", "noProxy": ".svc,10.0.0.0/8"},
        "unrelated": {"field": 1}
    });
    let spec: ControllerConfigSpec = serde_json::from_value(json).expect("decodes");
    let trust = spec.trust().expect("trust");
    assert_eq!(
        trust.for_host("internal:5000"),
        Some("USER CA FOR INTERNAL")
    );
    assert_eq!(trust.for_host("QUAY.example"), Some("USER CA"));
    assert_eq!(trust.for_host("quay.example:443"), None);
    assert_eq!(trust.everywhere.as_deref(), Some("CLUSTER CA"));
    let auths = spec.pull_secret().expect("auths");
    assert_eq!(
        auths
            .lookup("quay.example", "x")
            .map(|c| c.username.as_str()),
        Some("u")
    );
    let bad = ControllerConfigSpec {
        internal_registry_pull_secret: Some("%%".into()),
        ..Default::default()
    };
    assert!(bad.pull_secret().is_err());
    assert!(
        ControllerConfigSpec::default()
            .pull_secret()
            .expect("empty")
            .is_empty()
    );
}

#[test]
fn no_proxy_as_go_reads_it() {
    let proxy = |no_proxy: &str| ProxySettings {
        http_proxy: Some("http://plain.example:3128".into()),
        https_proxy: Some("http://proxy.example:3128".into()),
        no_proxy: Some(no_proxy.into()),
    };
    let cases: [(&str, &str, bool); 18] = [
        ("quay.example", "", true),
        ("localhost:5000", "", false),
        ("127.0.0.1:5000", "", false),
        ("[::1]:5000", "", false),
        ("quay.example", "*", false),
        ("quay.example", "quay.example", false),
        ("a.quay.example", "quay.example", false),
        ("xquay.example", "quay.example", true),
        ("quay.example", ".quay.example", true),
        ("a.quay.example", ".quay.example", false),
        ("a.quay.example", "*.quay.example", false),
        ("internal.svc:5000", ".svc, .cluster.local", false),
        ("quay.example:8443", "quay.example:443", true),
        ("quay.example", "quay.example:443", false),
        ("10.1.2.3:5000", "10.0.0.0/8", false),
        ("11.1.2.3:5000", "10.0.0.0/8", true),
        ("10.1.2.3:5000", "10.1.2.3", false),
        ("QUAY.EXAMPLE", "quay.example", false),
    ];
    for (host, no_proxy, proxied) in cases {
        assert_eq!(
            proxy(no_proxy).proxy_for(host).is_some(),
            proxied,
            "{host} with NO_PROXY={no_proxy:?}"
        );
    }
    assert_eq!(ProxySettings::default().proxy_for("quay.example"), None);
}
