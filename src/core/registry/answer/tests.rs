use super::*;

fn registry() -> Ping {
    Ping::Answered {
        status: 401,
        api_version: true,
        challenge: true,
    }
}

fn err(code: &str, message: &str) -> Vec<RegistryError> {
    vec![RegistryError {
        code: code.into(),
        message: message.into(),
    }]
}

fn answered(status: u16, errors: Vec<RegistryError>) -> Option<Reply> {
    Some(Reply::Answered {
        status,
        errors,
        digest_matches: if status == 200 { Some(true) } else { None },
    })
}

#[test]
fn the_table() {
    use Status::*;
    let web_server = Ping::Answered {
        status: 404,
        api_version: false,
        challenge: false,
    };
    let ok_no_header = Ping::Answered {
        status: 200,
        api_version: false,
        challenge: false,
    };
    let cases: Vec<(&str, Ping, Option<Reply>, Status)> = vec![
        ("served", registry(), answered(200, vec![]), Available),
        (
            "served by a registry answering /v2/ 200 without the header",
            ok_no_header.clone(),
            answered(200, vec![]),
            Available,
        ),
        (
            "another manifest",
            registry(),
            Some(Reply::Answered {
                status: 200,
                errors: vec![],
                digest_matches: Some(false),
            }),
            Unknown,
        ),
        (
            "digest not checkable",
            registry(),
            Some(Reply::Answered {
                status: 200,
                errors: vec![],
                digest_matches: None,
            }),
            Available,
        ),
        (
            "distribution: manifest unknown",
            registry(),
            answered(404, err("MANIFEST_UNKNOWN", "manifest unknown")),
            Missing,
        ),
        (
            "repository unknown",
            registry(),
            answered(
                404,
                err("NAME_UNKNOWN", "repository name not known to registry"),
            ),
            Missing,
        ),
        (
            "Harbor / Red Hat",
            registry(),
            answered(404, err("UNKNOWN", "artifact library/x@sha256:1 not found")),
            Missing,
        ),
        (
            "Quay deleted",
            registry(),
            answered(404, err("UNKNOWN", "Tag was deleted")),
            Missing,
        ),
        (
            "Quay expired",
            registry(),
            answered(404, err("UNKNOWN", "tag EXPIRED")),
            Missing,
        ),
        (
            "lower-case code",
            registry(),
            answered(404, err("manifest_unknown", "")),
            Missing,
        ),
        (
            "UNKNOWN with other words",
            registry(),
            answered(404, err("UNKNOWN", "something odd")),
            Unknown,
        ),
        (
            "manifest unknown from a host whose /v2/ is a web page",
            web_server.clone(),
            answered(404, err("MANIFEST_UNKNOWN", "manifest unknown")),
            Unknown,
        ),
        (
            "404 without a registry error",
            registry(),
            answered(404, vec![]),
            Unknown,
        ),
        (
            "a web server: /v2/ 404, nothing asked",
            web_server,
            None,
            Unknown,
        ),
        (
            "refused credentials",
            registry(),
            answered(401, err("UNAUTHORIZED", "authentication required")),
            Unknown,
        ),
        ("forbidden", registry(), answered(403, vec![]), Unknown),
        (
            "DENIED with 404 (a registry hiding a repository)",
            registry(),
            answered(
                404,
                err("DENIED", "requested access to the resource is denied"),
            ),
            Unknown,
        ),
        (
            "token service refused",
            registry(),
            Some(Reply::TokenRefused("HTTP 401".into())),
            Unknown,
        ),
        ("rate limited", registry(), answered(429, vec![]), Unknown),
        (
            "5xx with a not-found code",
            registry(),
            answered(503, err("MANIFEST_UNKNOWN", "")),
            Unknown,
        ),
        ("5xx", registry(), answered(500, vec![]), Unknown),
        (
            "too large",
            registry(),
            Some(Reply::TooLarge { limit: 4 << 20 }),
            Unknown,
        ),
        (
            "nothing listening",
            Ping::Failed("connection refused".into()),
            None,
            Unknown,
        ),
        (
            "connection lost during the manifest",
            registry(),
            Some(Reply::Failed("connection reset".into())),
            Unknown,
        ),
    ];
    for (name, ping, manifest, want) in cases {
        let got = judge(&Exchange {
            ping: Some(ping),
            manifest,
        });
        assert_eq!(got.status, want, "{name}: {}", got.why);
        assert!(!got.why.is_empty(), "{name}: a reason");
    }
}

#[test]
fn a_served_manifest_needs_no_ping_and_nothing_else_goes_without_one() {
    let served = judge(&Exchange {
        ping: None,
        manifest: answered(200, vec![]),
    });
    assert_eq!(served.status, Status::Available);
    let gone = judge(&Exchange {
        ping: None,
        manifest: answered(404, err("MANIFEST_UNKNOWN", "")),
    });
    assert_eq!(gone.status, Status::Unknown);
}

#[test]
fn what_answers_as_a_registry() {
    let p = |status, api_version, challenge| Ping::Answered {
        status,
        api_version,
        challenge,
    };
    assert!(p(200, false, false).is_registry());
    assert!(p(401, false, true).is_registry());
    assert!(p(401, true, false).is_registry());
    assert!(!p(401, false, false).is_registry());
    assert!(!p(404, true, false).is_registry());
    assert!(!p(302, false, false).is_registry());
    assert!(!Ping::Failed("x".into()).is_registry());
}

#[test]
fn places_together() {
    let v = |status| Answer::new(status, "w");
    let (a, m, u) = (v(Status::Available), v(Status::Missing), v(Status::Unknown));
    let cases: Vec<(Vec<(&str, &Answer)>, Status)> = vec![
        (vec![("mirror", &m), ("source", &a)], Status::Available),
        (vec![("mirror", &a), ("source", &u)], Status::Available),
        (vec![("mirror", &m), ("source", &m)], Status::Missing),
        (vec![("source", &m)], Status::Missing),
        // The source cannot be reached: the node fails too, but nobody said the image is
        // gone from it.
        (vec![("mirror", &m), ("source", &u)], Status::Unknown),
        (vec![("mirror", &u), ("source", &m)], Status::Unknown),
        (vec![], Status::Unknown),
    ];
    for (places, want) in cases {
        let got = combine(places.clone());
        assert_eq!(got.status, want, "{places:?}");
    }
    let got = combine(vec![("m.example:5000", &m), ("s.example", &u)]);
    assert!(
        got.why.contains("m.example:5000: w") && got.why.contains("s.example: w"),
        "{}",
        got.why
    );
}
