//! The image identity laws: spellings of one image are the same image, different ones are not.

use super::*;

// ---------------------------------------------------------------------------------------------
// Image identity.

/// A valid reference's repository: optional registry (with port), 1-3 path components.
fn repository() -> impl Strategy<Value = String> {
    (
        prop::option::of(prop::sample::select(
            &[
                "quay.io",
                "registry.example.com:5000",
                "localhost:5000",
                "Quay.IO",
            ][..],
        )),
        prop::collection::vec("[a-z0-9]{1,6}([._-][a-z0-9]{1,4})?", 1..4),
    )
        .prop_map(|(registry, path)| {
            let path = path.join("/");
            match registry {
                Some(r) => format!("{r}/{path}"),
                None => path,
            }
        })
}

fn tag() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}"
}

fn hex() -> impl Strategy<Value = String> {
    "[0-9a-f]{64}"
}

/// `hex` with the letters chosen by `mask` in upper case.
fn mixed_case(hex: &str, mask: u64) -> String {
    hex.chars()
        .enumerate()
        .map(|(i, c)| {
            if mask >> (i % 64) & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

#[derive(Clone, Debug)]
struct Laws {
    repo: String,
    other_repo: String,
    tag: String,
    other_tag: String,
    hex: String,
    other_hex: String,
    mask: u64,
    a: String,
    b: String,
}

fn laws() -> impl Strategy<Value = Laws> {
    let any_spec = prop_oneof![
        "\\PC{0,40}",
        (repository(), hex()).prop_map(|(r, h)| format!("{r}@sha256:{h}")),
        image().prop_map(|i| i.render()),
    ];
    (
        (repository(), repository(), tag(), tag()),
        (hex(), hex(), any::<u64>()),
        (any_spec.clone(), any_spec),
    )
        .prop_map(
            |((repo, other_repo, tag, other_tag), (hex, other_hex, mask), (a, b))| Laws {
                repo,
                other_repo,
                tag,
                other_tag,
                hex,
                other_hex,
                mask,
                a,
                b,
            },
        )
}

#[test]
fn image_identity_laws() {
    let n = cases("MOSC_GUARD_CASES_IMAGE", 1000);
    check("image_identity_laws", n, laws(), |l| {
        // Reflexive and symmetric on any text.
        prop_assert!(same_image(&l.a, &l.a));
        prop_assert_eq!(ImageKey::parse(&l.a), ImageKey::parse(&l.a));
        prop_assert_eq!(same_image(&l.a, &l.b), same_image(&l.b, &l.a));
        // The same image has the same digest, which is what the node index files it under.
        if same_image(&l.a, &l.b) {
            let (a, b) = (ImageKey::parse(&l.a), ImageKey::parse(&l.b));
            prop_assert_eq!(a.digest_hex(), b.digest_hex());
        }
        let digested = format!("{}@sha256:{}", l.repo, l.hex);
        let key = ImageKey::parse(&digested);
        prop_assert_eq!(
            key.digest_hex(),
            Some(l.hex.as_str()),
            "{} parses",
            digested
        );
        // Tag-insensitive once a digest is present.
        let tagged = format!("{}:{}@sha256:{}", l.repo, l.tag, l.hex);
        let retagged = format!("{}:{}@sha256:{}", l.repo, l.other_tag, l.hex);
        prop_assert!(same_image(&digested, &tagged), "{} vs {}", digested, tagged);
        prop_assert!(same_image(&tagged, &retagged));
        // Case of the hex and surrounding whitespace do not matter.
        let upper = format!("{}@sha256:{}", l.repo, mixed_case(&l.hex, l.mask));
        prop_assert!(same_image(&digested, &upper), "{} vs {}", digested, upper);
        let upper_key = ImageKey::parse(&upper);
        prop_assert_eq!(upper_key.digest_hex(), Some(l.hex.as_str()));
        let padded = format!(" \t{digested}\n");
        prop_assert!(same_image(&digested, &padded));
        // Different digests, or different repositories, are different images.
        let redigested = format!("{}@sha256:{}", l.repo, l.other_hex);
        prop_assert_eq!(same_image(&digested, &redigested), l.other_hex == l.hex);
        let other = format!("{}@sha256:{}", l.other_repo, l.hex);
        let same_repo =
            mosc_guard::core::image::repo_of(&digested) == mosc_guard::core::image::repo_of(&other);
        prop_assert_eq!(same_image(&digested, &other), same_repo);
        // A tag alone is not a digest: never the same as the digested image.
        let tag_only = format!("{}:{}", l.repo, l.tag);
        prop_assert!(!same_image(&tag_only, &digested));
        Ok(())
    });
}
