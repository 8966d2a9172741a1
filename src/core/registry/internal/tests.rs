use super::*;

#[test]
fn internal_hosts() {
    let known = vec![
        "image-registry.openshift-image-registry.svc:5000".to_string(),
        "default-route-openshift-image-registry.apps.example.com".to_string(),
    ];
    let cases = [
        ("image-registry.openshift-image-registry.svc:5000", true),
        ("IMAGE-registry.openshift-image-registry.svc:5000", true),
        (
            "default-route-openshift-image-registry.apps.example.com",
            true,
        ),
        (
            "other.openshift-image-registry.svc.cluster.local:5000",
            true,
        ),
        ("image-registry.openshift-image-registry.svc", true),
        ("quay.example.com", false),
        ("registry.openshift-image-registry.example.com", false),
        ("127.0.0.1:5000", false),
    ];
    for (host, want) in cases {
        assert_eq!(is_internal(host, &known), want, "{host}");
    }
    // A Route's generated host, without the lists.
    assert!(is_internal(
        "default-route-openshift-image-registry.apps.example.com",
        &[]
    ));
    assert!(is_internal(
        "Registry-openshift-image-registry.apps.example.com:443",
        &[]
    ));
    for host in [
        "default-route.apps.example.com",
        "openshift-image-registry.example.com",
        "quay-openshift-image-registry-mirror.example.com",
        "default-route-openshift-image-registry",
    ] {
        assert!(!is_internal(host, &[]), "{host}");
    }
    let unread: Result<&[String], &str> = Err("forbidden");
    assert_eq!(
        Internal::of("default-route-openshift-image-registry.apps.x", unread),
        Internal::Yes
    );
    assert_eq!(
        Internal::of("registry.apps.x", unread),
        Internal::Unknown("forbidden".into())
    );
    assert_eq!(Internal::of("registry.apps.x", Ok(&known)), Internal::No);
    assert_eq!(
        service_host("image-registry", Some(5000)),
        "image-registry.openshift-image-registry.svc:5000"
    );
}
