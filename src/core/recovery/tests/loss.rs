//! Rule 3b: what the registry says of the image, asked as the node pulls it. One row per answer
//! and per way an answer the registry could not give is taken (a person decides, the admin says
//! the loss is verified, a dump's preview); then which images the CLI is to ask, and what the
//! plan's words and JSON say of the registry.

use super::*;

type Edit = fn(&mut Cluster);

fn unverified(c: &mut Cluster, how: WhenUnverified) {
    c.registry.unverified = how;
}

fn not_asked(c: &mut Cluster) {
    c.registry.answers.clear();
    c.registry.not_asked = "planned from a dump without --authfile".to_string();
}

#[test]
fn only_a_missing_image_is_cancelled() {
    let rows: &[(&str, Edit, &[&str])] = &[
        ("missing: the loss is verified", |_| {}, &["recoverable"]),
        (
            "available: the daemon's retry can still succeed",
            |c| c.registry_says(&img(LOST), Status::Available),
            &["imageStillServed"],
        ),
        (
            "available, with the admin's flag: served is never cancelled",
            |c| {
                c.registry_says(&img(LOST), Status::Available);
                unverified(c, WhenUnverified::AdminVerified);
            },
            &["imageStillServed"],
        ),
        (
            "available, in a dump's preview: served is never cancelled",
            |c| {
                c.registry_says(&img(LOST), Status::Available);
                unverified(c, WhenUnverified::Preview);
            },
            &["imageStillServed"],
        ),
        (
            "available, with other problems: the image is not lost, so only that is said",
            |c| {
                c.registry_says(&img(LOST), Status::Available);
                c.moscs.push(mosc("worker"));
                node0(c)["spec"]["unschedulable"] = json!(false);
            },
            &["imageStillServed"],
        ),
        (
            "unknown: a person decides",
            |c| c.registry_says(&img(LOST), Status::Unknown),
            &["imageLossUnverified"],
        ),
        (
            "unknown, with other problems: every one is listed",
            |c| {
                c.registry_says(&img(LOST), Status::Unknown);
                node0(c)["spec"]["unschedulable"] = json!(false);
            },
            &["imageLossUnverified", "uncordonedByHand"],
        ),
        (
            "unknown, the admin verified the loss",
            |c| {
                c.registry_says(&img(LOST), Status::Unknown);
                unverified(c, WhenUnverified::AdminVerified);
            },
            &["recoverable"],
        ),
        (
            "unknown, the admin verified the loss, another problem remains",
            |c| {
                c.registry_says(&img(LOST), Status::Unknown);
                unverified(c, WhenUnverified::AdminVerified);
                c.machine_configs = Some(vec![NEW_CONFIG.to_string()]);
            },
            &["machineConfigGone"],
        ),
        (
            "unknown, in a dump's preview",
            |c| {
                c.registry_says(&img(LOST), Status::Unknown);
                unverified(c, WhenUnverified::Preview);
            },
            &["recoverable"],
        ),
        (
            "not asked: a person decides",
            not_asked,
            &["imageLossUnverified"],
        ),
        (
            "not asked, in a dump's preview: planned as before the registry was asked",
            |c| {
                not_asked(c);
                unverified(c, WhenUnverified::Preview);
            },
            &["recoverable"],
        ),
        (
            "an answer about another image says nothing of this one",
            |c| {
                c.registry.answers.clear();
                c.registry_says(&img(RAN), Status::Missing);
            },
            &["imageLossUnverified"],
        ),
        (
            "a build carries the image: MCO's to retry, whatever the registry says",
            |c| {
                c.mosbs.push(mosb("worker-a7c04d3f", "worker", &img(LOST)));
                c.registry_says(&img(LOST), Status::Missing);
            },
            &["imageStillCarried"],
        ),
    ];
    for (what, edit, want) in rows {
        let mut c = Cluster::report();
        edit(&mut c);
        assert_eq!(summary(&c.diagnosis_of(NODE)), *want, "{what}");
    }
}

fn node0(c: &mut Cluster) -> &mut Value {
    &mut c.nodes[0]
}

#[test]
fn the_plan_carries_what_the_registry_said_of_each_node_it_asked_about() {
    let c = Cluster::report();
    let plan = c.plan(None);
    let said = plan.nodes[0].registry.clone().expect("asked");
    assert_eq!(said.status, Some(Status::Missing));
    assert_eq!(
        recovery(&plan.nodes[0].diagnosis).loss,
        Loss::Verified(said)
    );

    // Needs attention for another reason: what the registry said is still reported.
    let mut drained = Cluster::report();
    node0(&mut drained)["spec"]["unschedulable"] = json!(false);
    let plan = drained.plan(None);
    assert_eq!(
        plan.nodes[0].registry.as_ref().and_then(|s| s.status),
        Some(Status::Missing)
    );

    // A carried image was no question for the registry; nor is a node not yet Degraded.
    let mut carried = Cluster::report();
    carried
        .mosbs
        .push(mosb("worker-a7c04d3f", "worker", &img(LOST)));
    assert_eq!(carried.plan(None).nodes[0].registry, None);
    let mut trying = Cluster::report();
    annotate(&mut trying.nodes[0], STATE, Some("Working"));
    assert_eq!(trying.plan(None).nodes[0].registry, None);

    // Not asked: no status, and why.
    let mut dump = Cluster::report();
    not_asked(&mut dump);
    unverified(&mut dump, WhenUnverified::Preview);
    let plan = dump.plan(None);
    let said = plan.nodes[0]
        .registry
        .clone()
        .expect("a question, not asked");
    assert_eq!(said.status, None);
    assert_eq!(said.label(), "not asked");
    assert!(said.why.contains("without --authfile"), "{said:?}");
}

#[test]
fn the_words_say_how_the_loss_is_known() {
    let why_of = |c: &Cluster| {
        let plan = c.plan(None);
        words::why_recoverable(&plan.nodes[0], recovery(&plan.nodes[0].diagnosis)).join("\n")
    };
    let verified = why_of(&Cluster::report());
    assert!(
        verified.contains("its registry, asked as the node pulls it, says the image is gone"),
        "{verified}"
    );
    assert!(
        verified.contains("the registry answered missing"),
        "{verified}"
    );

    let mut admin = Cluster::report();
    admin.registry_says(&img(LOST), Status::Unknown);
    unverified(&mut admin, WhenUnverified::AdminVerified);
    let text = why_of(&admin);
    assert!(
        text.contains("the loss was not verified by the registry (the registry could not tell:")
            && text.contains("--image-loss-verified says the admin verified it"),
        "{text}"
    );
    let plan = admin.plan(None);
    let note = words::event_note(NODE, recovery(&plan.nodes[0].diagnosis));
    assert!(
        note.contains("the registry could not tell; the admin verified the loss"),
        "{note}"
    );

    let mut dump = Cluster::report();
    not_asked(&mut dump);
    unverified(&mut dump, WhenUnverified::Preview);
    let text = why_of(&dump);
    assert!(
        text.contains(
            "the loss was not verified by the registry (the registry was not asked: \
             planned from a dump without --authfile)"
        ) && text.contains("recover --apply asks the registry again right before each patch"),
        "{text}"
    );
}

#[test]
fn each_registry_problem_says_why_and_what_to_do() {
    let mut served = Cluster::report();
    served.registry_says(&img(LOST), Status::Available);
    let report = report::Report::new(&served.plan(None), None, Vec::new());
    let a = &report.needs_attention[0];
    assert_eq!(a.problems, ["imageStillServed"]);
    assert!(
        a.why.contains("its registry still serves its desiredImage")
            && a.why
                .contains("the daemon retries the rebase by itself and can still succeed")
            && a.why.contains("the registry answered available"),
        "{}",
        a.why
    );
    assert!(a.to_do[0].starts_with("do not cancel"), "{:?}", a.to_do);
    assert!(a.to_do[0].contains(NODE), "{:?}", a.to_do);
    let json = serde_json::to_value(&report).expect("JSON");
    assert_eq!(
        json["needsAttention"][0]["registry"]["status"], "available",
        "{json:#}"
    );

    let mut unknown = Cluster::report();
    unknown.registry_says(&img(LOST), Status::Unknown);
    let report = report::Report::new(&unknown.plan(None), None, Vec::new());
    let a = &report.needs_attention[0];
    assert_eq!(a.problems, ["imageLossUnverified"]);
    assert!(a.why.contains("is not verified"), "{}", a.why);
    assert!(
        a.to_do[0].contains("mosc-guard images") && a.to_do[0].contains("--image-loss-verified"),
        "{:?}",
        a.to_do
    );

    let recovered = report::Report::new(&Cluster::report().plan(None), None, Vec::new());
    let json = serde_json::to_value(&recovered).expect("JSON");
    let registry = &json["recoverable"][0]["registry"];
    assert_eq!(registry["status"], "missing", "{json:#}");
    assert!(registry["why"].as_str().is_some(), "{json:#}");
    let mut dump = Cluster::report();
    not_asked(&mut dump);
    unverified(&mut dump, WhenUnverified::Preview);
    let json = serde_json::to_value(report::Report::new(&dump.plan(None), None, Vec::new()))
        .expect("JSON");
    assert_eq!(
        json["recoverable"][0]["registry"]["status"],
        Value::Null,
        "{json:#}"
    );
}

#[test]
fn the_images_to_ask_are_those_stuck_nodes_wait_for() {
    let other = img("0ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc");
    let mut c = Cluster::report();
    // Still trying: not Degraded yet.
    let mut working = stuck("worker-b", "worker");
    annotate(&mut working, STATE, Some("Working"));
    annotate(&mut working, DESIRED_IMAGE, Some(&other));
    // Carried by a build: MCO's to retry.
    let carried_image = img("0ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
    let mut carried = stuck("infra-a", "infra");
    annotate(&mut carried, DESIRED_IMAGE, Some(&carried_image));
    c.mosbs.push(mosb("infra-1", "infra", &carried_image));
    // In no pool.
    let mut nowhere = stuck("gpu-0", "infra");
    nowhere["metadata"]["labels"]["node-role.kubernetes.io/gpu"] = json!("");
    annotate(&mut nowhere, DESIRED_IMAGE, Some(&other));
    c.pools.push(pool("gpu", false));
    // Stuck in infra on its own image.
    let infra_image = img("0eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee");
    let mut infra = stuck("infra-b", "infra");
    annotate(&mut infra, DESIRED_IMAGE, Some(&infra_image));
    c.nodes.extend([working, carried, nowhere, infra]);
    let snap = c.snapshot();
    assert_eq!(
        images_to_ask(&snap, None).into_iter().collect::<Vec<_>>(),
        [img(LOST), infra_image.clone()]
    );
    assert_eq!(
        images_to_ask(&snap, Some("infra"))
            .into_iter()
            .collect::<Vec<_>>(),
        [infra_image]
    );
    assert!(images_to_ask(&snap, Some("master")).is_empty());
}
