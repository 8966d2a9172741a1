use super::*;
use crate::core::registry::answer::RegistryError;

fn answered(status: u16, code: &str, message: &str) -> Reply {
    Reply::Answered {
        status,
        errors: if code.is_empty() {
            vec![]
        } else {
            vec![RegistryError {
                code: code.into(),
                message: message.into(),
            }]
        },
        digest_matches: None,
    }
}

#[test]
fn the_table() {
    let deleted = |d: &DeleteAnswer| matches!(d, DeleteAnswer::Deleted);
    let gone = |d: &DeleteAnswer| matches!(d, DeleteAnswer::Missing(_));
    let unsupported = |d: &DeleteAnswer| matches!(d, DeleteAnswer::Unsupported(_));
    let refused = |d: &DeleteAnswer| matches!(d, DeleteAnswer::Refused(_));
    let failed = |d: &DeleteAnswer| matches!(d, DeleteAnswer::Failed(_));
    type Is = fn(&DeleteAnswer) -> bool;
    let cases: Vec<(&str, Reply, Is)> = vec![
        ("accepted", answered(202, "", ""), deleted),
        ("Quay's 204", answered(204, "", ""), deleted),
        (
            "distribution, deletes disabled",
            answered(405, "UNSUPPORTED", "The operation is unsupported."),
            unsupported,
        ),
        ("a bare 405", answered(405, "", ""), unsupported),
        (
            "already gone",
            answered(404, "MANIFEST_UNKNOWN", "manifest unknown"),
            gone,
        ),
        (
            "no such repository",
            answered(404, "NAME_UNKNOWN", "repository name not known"),
            gone,
        ),
        (
            "Harbor",
            answered(404, "UNKNOWN", "artifact not found"),
            gone,
        ),
        ("a 404 page", answered(404, "", ""), failed),
        (
            "pull-only credentials",
            answered(401, "UNAUTHORIZED", "authentication required"),
            refused,
        ),
        ("Quay, no delete right", answered(403, "", ""), refused),
        (
            "Docker Hub's DENIED",
            answered(404, "DENIED", "requested access to the resource is denied"),
            refused,
        ),
        (
            "token refused",
            Reply::TokenRefused("token service answered HTTP 401".into()),
            refused,
        ),
        ("server error", answered(500, "UNKNOWN", "boom"), failed),
        ("rate limited", answered(429, "", ""), failed),
        (
            "connection lost",
            Reply::Failed("connection reset".into()),
            failed,
        ),
    ];
    for (name, reply, is) in cases {
        let got = judge_delete(&reply);
        assert!(is(&got), "{name}: {got:?}");
    }
}
