//! Conformance with kube-rs: typed and dynamic APIs, object semantics, list/watch, watcher and
//! reflector, garbage collection, namespaces and finalizers, against a real server process.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use flotilla_api::lean::Lean;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::{Value, json};

use common::{eventually, namespace, shared};

const WAIT: Duration = Duration::from_secs(20);

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})).unwrap()
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}
        }
    }))
    .unwrap()
}

fn api_error(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn typed_crud_with_uid_resource_version_and_conflicts() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "crud").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    let created = api.create(&PostParams::default(), &cm("a", &[])).await.unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.uid.as_ref().unwrap().len(), 36);
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_ref().unwrap().parse().unwrap();

    let (code, reason, message) = api_error(
        api.create(&PostParams::default(), &cm("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(message, "configmaps \"a\" already exists");

    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "v2".to_string())].into());
    let updated = api.replace("a", &PostParams::default(), &changed).await.unwrap();
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_ref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1, "resourceVersion must increase");
    assert_eq!(updated.metadata.uid, created.metadata.uid);

    // Stale resourceVersion: 409 Conflict.
    let (code, reason, message) = api_error(
        api.replace("a", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(message.contains("the object has been modified"), "{message}");

    // A no-op update does not bump the resourceVersion.
    let same = api.replace("a", &PostParams::default(), &updated).await.unwrap();
    assert_eq!(same.metadata.resource_version, updated.metadata.resource_version);

    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"extra": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.as_ref().unwrap()["extra"], "1");

    api.delete("a", &DeleteParams::default()).await.unwrap();
    let (code, reason, message) = api_error(api.get("a").await.unwrap_err());
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    assert_eq!(message, "configmaps \"a\" not found");
}

#[tokio::test]
async fn generate_name_and_dry_run() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "gen").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mut obj = cm("", &[]);
    obj.metadata.name = None;
    obj.metadata.generate_name = Some("cfg-".into());
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("cfg-") && name.len() == 9, "{name}");

    let dry = api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &cm("dry", &[]),
        )
        .await
        .unwrap();
    assert_eq!(dry.metadata.name.as_deref(), Some("dry"));
    assert!(
        api.get_opt("dry").await.unwrap().is_none(),
        "dry run must not persist"
    );
    let before = api.get(&name).await.unwrap();
    api.delete(
        &name,
        &DeleteParams {
            dry_run: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        api.get(&name).await.unwrap().metadata.resource_version,
        before.metadata.resource_version
    );
}

/// A status write of a built-in kind decodes only the status (and metadata) of the object: the
/// rest is the stored object's. What a client sees is what a check of the whole object gave.
#[tokio::test]
async fn a_status_write_is_checked_as_the_whole_object_was_and_leaves_the_rest_alone() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "status-check").await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let created = api
        .create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();
    let created_rv = created.metadata.resource_version.clone();

    // A malformed status field: 400, named, nothing written.
    let err = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": "three"}})),
        )
        .await
        .unwrap_err();
    let (code, reason, message) = api_error(err);
    assert_eq!((code, reason.as_str()), (400, "BadRequest"), "{message}");
    assert!(
        message.contains("Deployment in version \"v1\" cannot be handled as a Deployment: status.replicas: "),
        "{message}"
    );
    // An unknown status field under strict validation: 400 naming it, nothing written.
    let strict = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..PatchParams::default()
    };
    let err = api
        .patch_status(
            "web",
            &strict,
            &Patch::Merge(json!({"status": {"replicas": 1, "conditions": [{"type": "Available", "status": "True", "bogus": 1}]}})),
        )
        .await
        .unwrap_err();
    let (code, _, message) = api_error(err);
    assert_eq!(code, 400, "{message}");
    assert_eq!(
        message,
        "strict decoding error: unknown field \"status.conditions[0].bogus\""
    );
    let unchanged = api.get("web").await.unwrap();
    assert_eq!(unchanged.metadata.resource_version, created_rv);
    assert!(unchanged.status.is_none());

    // Without strict validation the unknown field is dropped and the status written; the spec
    // and the labels are the stored ones, whatever the body said.
    let written = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"labels": {"changed": "through-status"}},
                "spec": {"replicas": 5},
                "status": {"replicas": 1, "readyReplicas": 1, "bogus": true},
            })),
        )
        .await
        .unwrap();
    let status = written.status.clone().unwrap();
    assert_eq!((status.replicas, status.ready_replicas), (Some(1), Some(1)));
    assert_eq!(written.spec, created.spec);
    assert_eq!(written.metadata.labels, created.metadata.labels);
    let read = api.get("web").await.unwrap();
    assert_eq!(read.spec, created.spec);
    assert_eq!(read.status, written.status);
    let raw: Value = serde_json::to_value(&read).unwrap();
    assert!(raw["status"].get("bogus").is_none(), "{raw}");
}

#[tokio::test]
async fn generation_and_status_subresource_isolation() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "gen-status").await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let d = api
        .create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    assert!(d.status.is_none(), "status is cleared on create");

    // Metadata change: no generation bump.
    let d = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    // Spec change: bump.
    let d = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(2));

    // Status through the main resource is ignored.
    let d = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert!(d.status.is_none());
    // Status through /status is kept, spec changes there are ignored, generation unchanged.
    let d = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 7}, "spec": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(d.status.as_ref().unwrap().replicas, Some(7));
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(3));
    assert_eq!(d.metadata.generation, Some(2));

    // Scale subresource.
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    assert_eq!(api.get("web").await.unwrap().spec.unwrap().replicas, Some(4));
}

#[tokio::test]
async fn dynamic_api_selectors_and_pagination() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "dyn").await;
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    for i in 0..10 {
        let env = if i % 2 == 0 { "prod" } else { "dev" };
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("c{i}"), "labels": {"env": env, "idx": i.to_string()}},
        }))
        .unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap();
    }
    let names = |list: kube::core::ObjectList<DynamicObject>| -> Vec<String> {
        list.items.into_iter().map(|o| o.metadata.name.unwrap()).collect()
    };
    assert_eq!(
        names(api.list(&ListParams::default().labels("env=prod")).await.unwrap()).len(),
        5
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("env!=prod"))
                .await
                .unwrap()
        )
        .len(),
        5
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("idx in (1,2,3)"))
                .await
                .unwrap()
        ),
        vec!["c1", "c2", "c3"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("idx notin (0,1),env=prod"))
                .await
                .unwrap()
        )
        .len(),
        4
    );
    assert_eq!(
        names(api.list(&ListParams::default().labels("idx>7")).await.unwrap()),
        vec!["c8", "c9"]
    );
    assert_eq!(
        names(api.list(&ListParams::default().labels("!env")).await.unwrap()).len(),
        0
    );
    assert_eq!(
        names(api.list(&ListParams::default().labels("env")).await.unwrap()).len(),
        10
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=c3"))
                .await
                .unwrap()
        ),
        vec!["c3"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name!=c3"))
                .await
                .unwrap()
        )
        .len(),
        9
    );

    // Pagination: a consistent snapshot even when objects change between pages.
    let first = api.list(&ListParams::default().limit(4)).await.unwrap();
    assert_eq!(first.items.len(), 4);
    assert_eq!(first.metadata.remaining_item_count, Some(6));
    let token = first.metadata.continue_.clone().unwrap();
    let page_rv = first.metadata.resource_version.clone().unwrap();
    api.delete("c9", &DeleteParams::default()).await.unwrap();
    let mut all = names(first);
    let mut token = Some(token);
    while let Some(t) = token {
        let page = api
            .list(&ListParams::default().limit(4).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some(page_rv.as_str()));
        token = page.metadata.continue_.clone().filter(|t| !t.is_empty());
        all.extend(names(page));
    }
    assert_eq!(
        all.len(),
        10,
        "the deleted object is still in the paginated snapshot: {all:?}"
    );

    // Exact resourceVersion read of the past.
    let past = api
        .list(
            &ListParams::default()
                .at(&page_rv)
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert_eq!(past.items.len(), 10);
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 9);
}

#[tokio::test]
async fn watch_from_resource_version_delivers_each_event_once_in_order() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "watch").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let start = common::list_revision(&api).await;
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("w{i}"), &[]))
            .await
            .unwrap();
    }
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "changed"}})),
    )
    .await
    .unwrap();
    api.delete("w2", &DeleteParams::default()).await.unwrap();
    let stream = api
        .watch(&WatchParams::default().timeout(5), &start)
        .await
        .unwrap();
    let events: Vec<String> = stream
        .take(7)
        .map(|e| match e.unwrap() {
            WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.unwrap()),
            WatchEvent::Modified(o) => format!("MODIFIED {}", o.metadata.name.unwrap()),
            WatchEvent::Deleted(o) => format!("DELETED {}", o.metadata.name.unwrap()),
            other => format!("{other:?}"),
        })
        .collect()
        .await;
    assert_eq!(
        events,
        vec![
            "ADDED w0",
            "ADDED w1",
            "ADDED w2",
            "ADDED w3",
            "ADDED w4",
            "MODIFIED w1",
            "DELETED w2"
        ]
    );
}

#[tokio::test]
async fn watch_with_label_selector_sees_transitions_and_bookmarks() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "watchsel").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let start = common::list_revision(&api).await;
    api.create(&PostParams::default(), &cm("x", &[("team", "a")]))
        .await
        .unwrap();
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("team=a").timeout(5), &start)
        .await
        .unwrap()
        .boxed();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(_) => kinds.push("ADDED"),
            WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            WatchEvent::Deleted(_) => kinds.push("DELETED"),
            _ => {}
        }
    }
    assert_eq!(kinds, vec!["ADDED", "DELETED", "ADDED"]);

    // Bookmarks carry the latest resourceVersion.
    let rv = common::list_revision(&api).await;
    let mut stream = api
        .watch(
            &WatchParams {
                bookmarks: true,
                ..WatchParams::default()
            }
            .timeout(2),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    // Another namespace changes: this watch has nothing to deliver but a bookmark.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let probe = format!("bookmark-probe-{}", common::rand_suffix());
    other
        .create(&PostParams::default(), &cm(&probe, &[]))
        .await
        .unwrap();
    let mut bookmark = None;
    while let Some(e) = stream.try_next().await.unwrap() {
        if let WatchEvent::Bookmark(b) = e {
            bookmark = Some(b.metadata.resource_version);
        }
    }
    let bookmark: u64 = bookmark.expect("a bookmark before the timeout").parse().unwrap();
    assert!(bookmark > rv.parse::<u64>().unwrap());
    other.delete(&probe, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn watcher_and_reflector_follow_changes() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "reflector").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &cm("pre", &[])).await.unwrap();
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .applied_objects()
        .boxed();
    let handle = tokio::spawn(async move {
        let mut s = stream;
        while s.try_next().await.unwrap().is_some() {}
    });
    api.create(&PostParams::default(), &cm("post", &[]))
        .await
        .unwrap();
    eventually("reflector sees both objects", WAIT, || {
        let reader = reader.clone();
        async move { (reader.state().len() == 2).then_some(()) }
    })
    .await;
    api.delete("pre", &DeleteParams::default()).await.unwrap();
    eventually("reflector drops the deleted object", WAIT, || {
        let reader = reader.clone();
        async move {
            let names: Vec<String> = reader
                .state()
                .iter()
                .map(|o| o.metadata.name.clone().unwrap())
                .collect();
            (names == vec!["post".to_string()]).then_some(())
        }
    })
    .await;
    handle.abort();

    // The streaming-list flavour (sendInitialEvents) too.
    let initial: Vec<ConfigMap> = watcher(api.clone(), watcher::Config::default().streaming_lists())
        .applied_objects()
        .take(1)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(initial[0].metadata.name.as_deref(), Some("post"));
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "fin").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mut obj = cm("held", &[]);
    obj.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &obj).await.unwrap();
    let res = api.delete("held", &DeleteParams::default()).await.unwrap();
    let pending = res.left().expect("deletion waits for the finalizer");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let still = api.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    // New finalizers cannot be added while deleting.
    let err = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err).1, "Invalid");
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("held").await.unwrap().is_none());
}

fn owned_by(name: &str, owner: &ConfigMap, block: bool) -> ConfigMap {
    let mut dep = cm(name, &[]);
    dep.metadata.owner_references =
        Some(vec![serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid,
        "blockOwnerDeletion": block,
    }))
    .unwrap()]);
    dep
}

#[tokio::test]
async fn garbage_collection_background_foreground_orphan() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "gc").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    // Background: the owner goes at once, the dependent follows.
    let owner = api
        .create(&PostParams::default(), &cm("owner-bg", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned_by("dep-bg", &owner, false))
        .await
        .unwrap();
    api.delete("owner-bg", &DeleteParams::background()).await.unwrap();
    eventually("background dependent collected", WAIT, || {
        let api = api.clone();
        async move { api.get_opt("dep-bg").await.unwrap().is_none().then_some(()) }
    })
    .await;

    // Foreground: the owner waits (finalizer) until the blocking dependent is gone.
    let owner = api
        .create(&PostParams::default(), &cm("owner-fg", &[]))
        .await
        .unwrap();
    let mut dep = owned_by("dep-fg", &owner, true);
    dep.metadata.finalizers = Some(vec!["example.com/slow".into()]);
    api.create(&PostParams::default(), &dep).await.unwrap();
    api.delete("owner-fg", &DeleteParams::foreground()).await.unwrap();
    let waiting = eventually("dependent marked for deletion", WAIT, || {
        let api = api.clone();
        async move {
            api.get("dep-fg")
                .await
                .ok()
                .filter(|d| d.metadata.deletion_timestamp.is_some())
        }
    })
    .await;
    assert!(waiting.metadata.deletion_timestamp.is_some());
    let owner_now = api.get("owner-fg").await.unwrap();
    assert!(
        owner_now
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    api.patch(
        "dep-fg",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("foreground owner deleted", WAIT, || {
        let api = api.clone();
        async move { api.get_opt("owner-fg").await.unwrap().is_none().then_some(()) }
    })
    .await;

    // Orphan: the dependent stays and loses its owner reference.
    let owner = api
        .create(&PostParams::default(), &cm("owner-or", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned_by("dep-or", &owner, false))
        .await
        .unwrap();
    api.delete("owner-or", &DeleteParams::orphan()).await.unwrap();
    eventually("orphan owner deleted", WAIT, || {
        let api = api.clone();
        async move { api.get_opt("owner-or").await.unwrap().is_none().then_some(()) }
    })
    .await;
    let dep = api.get("dep-or").await.unwrap();
    assert!(dep.metadata.owner_references.unwrap_or_default().is_empty());

    // A dependent whose owner never existed is collected.
    let ghost: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "ghost-owner", "uid": "00000000-0000-4000-8000-000000000000"}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &owned_by("dangling", &ghost, false))
        .await
        .unwrap();
    eventually("dangling dependent collected", WAIT, || {
        let api = api.clone();
        async move { api.get_opt("dangling").await.unwrap().is_none().then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn namespace_deletion_removes_contents_then_the_namespace() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "doomed").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    cms.create(&PostParams::default(), &cm("a", &[])).await.unwrap();
    deps.create(&PostParams::default(), &deployment("d"))
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let deleted = namespaces.delete(&ns, &DeleteParams::default()).await.unwrap();
    let terminating = deleted.left().expect("the namespace is deleted asynchronously");
    assert_eq!(terminating.status.unwrap().phase.as_deref(), Some("Terminating"));
    eventually("namespace gone", WAIT, || {
        let namespaces = namespaces.clone();
        let ns = ns.clone();
        async move { namespaces.get_opt(&ns).await.unwrap().is_none().then_some(()) }
    })
    .await;
    assert!(cms.list(&ListParams::default()).await.unwrap().items.is_empty());
    // Creating in a missing namespace is NotFound.
    let (code, reason, _) = api_error(
        cms.create(&PostParams::default(), &cm("late", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    // System namespaces exist.
    for sys in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        namespaces.get(sys).await.unwrap();
    }
}

#[tokio::test]
async fn events_are_shared_between_core_and_events_k8s_io() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "events").await;
    let v1: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let ev: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "e1"},
        "eventTime": "2025-01-01T00:00:00.000000Z",
        "reportingController": "flotilla.io/test", "reportingInstance": "t-1",
        "action": "Testing", "reason": "Tested", "type": "Normal", "note": "hello",
        "regarding": {"kind": "ConfigMap", "name": "x", "namespace": ns},
    }))
    .unwrap();
    v1.create(&PostParams::default(), &ev).await.unwrap();
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &ns);
    let got = core.get("e1").await.unwrap();
    assert_eq!(got.message.as_deref(), Some("hello"));
    assert_eq!(got.involved_object.name.as_deref(), Some("x"));
    let back = v1.get("e1").await.unwrap();
    assert_eq!(back.note.as_deref(), Some("hello"));
}

#[tokio::test]
async fn table_and_metadata_views() {
    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "table").await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &deployment("t"))
        .await
        .unwrap();
    let req = http::Request::get(format!(
        "/apis/apps/v1/namespaces/{ns}/deployments?includeObject=None"
    ))
    .header(
        "Accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )
    .body(Vec::new())
    .unwrap();
    let table: Value = client.request(req).await.unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, vec!["Name", "Ready", "Up-to-date", "Available", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "t");
    assert_eq!(table["rows"][0]["cells"][1], "0/1");
    assert!(table["rows"][0].get("object").is_none());

    let metas = kube::Api::<Deployment>::namespaced(client.clone(), &ns)
        .list_metadata(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(metas.items[0].metadata.name.as_deref(), Some("t"));
}

/// Metadata-only lists and watches (`Accept: application/json;as=PartialObjectMetadata[List]`,
/// what kube-rs sends for `Api<PartialObjectMeta<K>>` and kube-runtime's metadata watcher, and
/// client-go's metadata informers): the server sends `PartialObjectMetadata` objects, never
/// the objects' content, for the initial list, every watch event and selector transitions.
#[tokio::test]
async fn metadata_only_list_and_watch() {
    use kube::api::PartialObjectMeta;

    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "metaonly").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &cm("before", &[("managed", "true")]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("other", &[("managed", "false")]))
        .await
        .unwrap();

    // The raw exchange, with kube-rs's and client-go's exact Accept headers.
    let list_req = http::Request::get(format!(
        "/api/v1/namespaces/{ns}/configmaps?labelSelector=managed%3Dtrue"
    ))
    .header(
        "Accept",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    )
    .body(Vec::new())
    .unwrap();
    let list: Value = client.request(list_req).await.unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["kind"], "PartialObjectMetadata");
    assert_eq!(items[0]["metadata"]["name"], "before");
    assert!(items[0].get("data").is_none(), "content sent: {}", items[0]);
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_owned();

    let watch_req = http::Request::get(format!(
        "/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=3"
    ))
    .header(
        "Accept",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .body(Vec::new())
    .unwrap();
    let events = client.request_events::<Value>(watch_req).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("after", &[("managed", "true")]))
        .await
        .unwrap();
    api.delete("before", &DeleteParams::default()).await.unwrap();
    let events: Vec<WatchEvent<Value>> = events.try_collect().await.unwrap();
    let seen: Vec<(&str, String)> = events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Added(o) => Some(("ADDED", o)),
            WatchEvent::Modified(o) => Some(("MODIFIED", o)),
            WatchEvent::Deleted(o) => Some(("DELETED", o)),
            _ => None,
        })
        .map(|(ty, o)| {
            assert_eq!(o["kind"], "PartialObjectMetadata", "{ty} {o}");
            assert!(o.get("data").is_none(), "content sent: {ty} {o}");
            (ty, o["metadata"]["name"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(
        seen,
        vec![("ADDED", "after".to_owned()), ("DELETED", "before".to_owned())]
    );

    // Writes answered with metadata only (what flotilla_runtime::lean asks for): a status
    // write's answer is the object's PartialObjectMetadata with the new resourceVersion.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let before = deployments
        .create(&PostParams::default(), &deployment("lean"))
        .await
        .unwrap();
    let status_req = http::Request::patch(format!("/apis/apps/v1/namespaces/{ns}/deployments/lean/status"))
        .header(
            "Accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .header("Content-Type", "application/merge-patch+json")
        .body(serde_json::to_vec(&json!({"status": {"observedGeneration": 1}})).unwrap())
        .unwrap();
    let answer: Value = client.request(status_req).await.unwrap();
    assert_eq!(answer["kind"], "PartialObjectMetadata", "{answer}");
    assert!(
        answer.get("spec").is_none() && answer.get("status").is_none(),
        "{answer}"
    );
    assert_ne!(
        answer["metadata"]["resourceVersion"].as_str(),
        before.metadata.resource_version.as_deref()
    );
    let written = deployments.get("lean").await.unwrap();
    assert_eq!(written.status.and_then(|s| s.observed_generation), Some(1));
    assert_eq!(
        answer["metadata"]["resourceVersion"].as_str(),
        written.metadata.resource_version.as_deref()
    );

    // kube-runtime's watcher over `Api<PartialObjectMeta<K>>` (and the deprecated
    // `metadata_watcher`, the same requests): the objects it yields are the server's
    // PartialObjectMetadata, as their type tells, and follow a selector. The same over
    // `Api<Lean<PartialObjectMeta<K>>>` (execution's member watches), whose objects come
    // without their managedFields.
    let meta_api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), &ns);
    let lean_api: Api<Lean<PartialObjectMeta<ConfigMap>>> = Api::namespaced(client.clone(), &ns);
    let selected = watcher::Config::default().labels("managed=true");
    let unwrapped = |event: watcher::Event<Lean<PartialObjectMeta<ConfigMap>>>| match event {
        watcher::Event::Apply(Lean(object)) => watcher::Event::Apply(object),
        watcher::Event::Delete(Lean(object)) => watcher::Event::Delete(object),
        watcher::Event::InitApply(Lean(object)) => watcher::Event::InitApply(object),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    };
    #[allow(deprecated)]
    let streams = [
        (watcher(meta_api, selected.clone()).boxed(), false),
        (
            watcher::metadata_watcher(api.clone(), selected.clone()).boxed(),
            false,
        ),
        (watcher(lean_api, selected).map_ok(unwrapped).boxed(), true),
    ];
    for (mut stream, lean) in streams {
        let mut names = Vec::new();
        loop {
            match tokio::time::timeout(WAIT, stream.try_next()).await {
                Ok(Ok(Some(watcher::Event::InitApply(object)))) => {
                    let types = object.types.clone().unwrap();
                    assert_eq!(
                        (types.api_version.as_str(), types.kind.as_str()),
                        ("meta.k8s.io/v1", "PartialObjectMetadata")
                    );
                    // The client's create recorded its fields; a lean watch leaves them out.
                    assert_eq!(object.metadata.managed_fields.is_none(), lean, "{object:?}");
                    names.push(object.metadata.name.clone().unwrap());
                }
                Ok(Ok(Some(watcher::Event::InitDone))) => break,
                Ok(Ok(Some(_))) => {}
                other => panic!("the metadata watcher ended: {other:?}"),
            }
        }
        assert_eq!(names, vec!["after".to_owned()]);
        // A label change that leaves the selection is a deletion, reported as metadata.
        api.patch(
            "after",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"managed": "false"}}})),
        )
        .await
        .unwrap();
        let left = loop {
            match tokio::time::timeout(WAIT, stream.try_next()).await {
                Ok(Ok(Some(watcher::Event::Delete(object)))) => break object,
                Ok(Ok(Some(_))) => {}
                other => panic!("the metadata watcher ended: {other:?}"),
            }
        };
        assert_eq!(left.metadata.name.as_deref(), Some("after"));
        assert_eq!(left.types.unwrap().kind, "PartialObjectMetadata");
        api.patch(
            "after",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"managed": "true"}}})),
        )
        .await
        .unwrap();
    }
}

const FULL: &str = "application/json";
const META: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const META_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// One raw request with an `Accept` header and an optional merge patch or JSON body.
async fn raw(
    client: &kube::Client,
    method: http::Method,
    path: &str,
    accept: &str,
    body: Option<(&str, Value)>,
) -> Value {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Accept", accept);
    let bytes = match body {
        Some((content_type, body)) => {
            req = req.header("Content-Type", content_type);
            serde_json::to_vec(&body).unwrap()
        }
        None => Vec::new(),
    };
    client.request(req.body(bytes).unwrap()).await.unwrap()
}

fn partial_of(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

/// Answers are rendered from the stored bytes with the resourceVersion spliced in, not
/// serialized again from a decoded object. Whatever the request (a GET, a list, a watch event,
/// a create, update, patch, status write or write that changes nothing), the answer, whole or
/// as PartialObjectMetadata, is exactly the object a GET then returns; a dry run answers with
/// the object it did not store. Metadata strings hold braces, quotes and escapes, and
/// events.k8s.io Events (served converted from their stored core form) answer the same way.
#[tokio::test]
async fn answers_from_stored_bytes_are_the_objects_as_stored() {
    use http::Method;

    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "stored").await;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let one = format!("{base}/tricky");
    let merge = "application/merge-patch+json";
    let tricky = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "tricky", "labels": {"app": "x"},
            "annotations": {"note": "a } { \" \\ \n é 𝄞", "metadata": "{\"resourceVersion\":\"1\"}"}},
        "data": {"k": "}{"}});

    // A create's answer, whole and as metadata, is what GET returns.
    let created = raw(
        &client,
        Method::POST,
        &base,
        FULL,
        Some(("application/json", tricky)),
    )
    .await;
    let got = raw(&client, Method::GET, &one, FULL, None).await;
    assert_eq!(created, got);
    assert_eq!(got["metadata"]["annotations"]["note"], "a } { \" \\ \n é 𝄞");
    assert_eq!(
        raw(&client, Method::GET, &one, META, None).await,
        partial_of(&got)
    );

    // A patch, a write that changes nothing, an update and a status write (ConfigMaps have
    // none: the whole object is written), each asked whole and as metadata.
    let steps: Vec<(Method, String, &str, Value)> = vec![
        (
            Method::PATCH,
            one.clone(),
            merge,
            json!({"metadata": {"labels": {"step": "1"}}}),
        ),
        (
            Method::PATCH,
            one.clone(),
            merge,
            json!({"metadata": {"labels": {"step": "1"}}}),
        ),
        (Method::PATCH, one.clone(), merge, json!({"data": {"k": "\"2\""}})),
    ];
    for accept in [FULL, META] {
        for (method, path, content_type, body) in &steps {
            let answer = raw(
                &client,
                method.clone(),
                path,
                accept,
                Some((content_type, body.clone())),
            )
            .await;
            let got = raw(&client, Method::GET, &one, FULL, None).await;
            let expected = if accept == FULL {
                got.clone()
            } else {
                partial_of(&got)
            };
            assert_eq!(answer, expected, "{method} {body} as {accept}");
        }
        let mut current = raw(&client, Method::GET, &one, FULL, None).await;
        current["data"]["k"] = json!(format!("put as {accept}"));
        let answer = raw(
            &client,
            Method::PUT,
            &one,
            accept,
            Some(("application/json", current)),
        )
        .await;
        let got = raw(&client, Method::GET, &one, FULL, None).await;
        assert_eq!(got["data"]["k"], json!(format!("put as {accept}")));
        assert_eq!(answer, if accept == FULL { got } else { partial_of(&got) });
    }
    // A dry run answers with the object it would have written, which is not stored.
    let before = raw(&client, Method::GET, &one, FULL, None).await;
    let dry = raw(
        &client,
        Method::PATCH,
        &format!("{one}?dryRun=All"),
        META,
        Some((merge, json!({"metadata": {"labels": {"dry": "run"}}}))),
    )
    .await;
    assert_eq!(dry["metadata"]["labels"]["dry"], "run");
    assert_eq!(raw(&client, Method::GET, &one, FULL, None).await, before);

    // Lists: every item whole or as metadata, with the list's continue and remaining count.
    raw(
        &client,
        Method::POST,
        &base,
        FULL,
        Some(("application/json", json!({"metadata": {"name": "zz"}}))),
    )
    .await;
    let whole = raw(&client, Method::GET, &base, FULL, None).await;
    let metas = raw(&client, Method::GET, &base, META_LIST, None).await;
    assert_eq!(metas["kind"], "PartialObjectMetadataList");
    let items = whole["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(
        metas["items"],
        json!(items.iter().map(partial_of).collect::<Vec<_>>())
    );
    let page = raw(&client, Method::GET, &format!("{base}?limit=1"), META_LIST, None).await;
    assert_eq!(page["items"], json!([partial_of(&items[0])]));
    assert_eq!(page["metadata"]["remainingItemCount"], 1, "{page}");
    assert!(page["metadata"]["continue"].is_string(), "{page}");

    // Watches with a label selector, whole and as metadata: the same events, the same objects.
    let rv = whole["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    let mut streams = Vec::new();
    for accept in [FULL, META] {
        let req = http::Request::get(format!(
            "{base}?watch=true&labelSelector=app%3Dx&resourceVersion={rv}&timeoutSeconds=3"
        ))
        .header("Accept", accept)
        .body(Vec::new())
        .unwrap();
        streams.push(client.request_events::<Value>(req).await.unwrap().boxed());
    }
    for labels in [json!({"app": "y"}), json!({"app": "x"}), json!({"other": "1"})] {
        raw(
            &client,
            Method::PATCH,
            &one,
            META,
            Some((merge, json!({"metadata": {"labels": labels}}))),
        )
        .await;
    }
    raw(&client, Method::DELETE, &one, FULL, None).await;
    let mut seen = Vec::new();
    for stream in streams {
        let events: Vec<WatchEvent<Value>> = stream.try_collect().await.unwrap();
        seen.push(
            events
                .into_iter()
                .filter_map(|e| match e {
                    WatchEvent::Added(o) => Some(("ADDED", o)),
                    WatchEvent::Modified(o) => Some(("MODIFIED", o)),
                    WatchEvent::Deleted(o) => Some(("DELETED", o)),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        );
    }
    let types: Vec<&str> = seen[0].iter().map(|(ty, _)| *ty).collect();
    // Left (app=y), came back (app=x), modified (a new label), deleted.
    assert_eq!(types, vec!["DELETED", "ADDED", "MODIFIED", "DELETED"]);
    let as_metadata: Vec<(&str, Value)> = seen[0].iter().map(|(ty, o)| (*ty, partial_of(o))).collect();
    assert_eq!(seen[1], as_metadata);

    // events.k8s.io Events are stored in their core form and converted when served.
    let events = format!("/apis/events.k8s.io/v1/namespaces/{ns}/events");
    raw(
        &client,
        Method::POST,
        &events,
        FULL,
        Some((
            "application/json",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "labels": {"a": "b"}},
            "eventTime": "2025-01-01T00:00:00.000000Z",
            "reportingController": "flotilla.io/test", "reportingInstance": "t-1",
            "action": "Testing", "reason": "Tested", "type": "Normal", "note": "hello",
            "regarding": {"kind": "ConfigMap", "name": "x", "namespace": ns}}),
        )),
    )
    .await;
    let event = raw(&client, Method::GET, &format!("{events}/e1"), FULL, None).await;
    assert_eq!(event["note"], "hello");
    assert_eq!(
        raw(&client, Method::GET, &format!("{events}/e1"), META, None).await,
        partial_of(&event)
    );
    assert_eq!(
        raw(&client, Method::GET, &events, META_LIST, None).await["items"],
        json!([partial_of(&event)])
    );
}

// ----- Secret stringData --------------------------------------------------------------------

/// A Secret as the server serves it, raw (so a `stringData` it should not hold would show).
async fn served_secret(client: &kube::Client, ns: &str, name: &str) -> Value {
    let req = http::Request::get(format!("/api/v1/namespaces/{ns}/secrets/{name}"))
        .body(Vec::new())
        .unwrap();
    client.request(req).await.unwrap()
}

/// The fields `manager` owns on a served object.
fn owned_by_manager<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["manager"] == manager)
        .map(|m| &m["fieldsV1"])
        .unwrap_or_else(|| panic!("no managedFields entry for {manager}: {obj}"))
}

/// A protobuf length-delimited field (`field_number << 3 | 2`, length, bytes).
fn protobuf_field(out: &mut Vec<u8>, number: u8, bytes: &[u8]) {
    out.push(number << 3 | 2);
    let mut len = bytes.len();
    while len >= 0x80 {
        out.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend_from_slice(bytes);
}

/// kube-apiserver's protobuf envelope (`k8s\0` + runtime.Unknown) around a v1 Secret named
/// `name` whose stringData holds `entries`.
fn protobuf_secret(name: &str, entries: &[(&str, &str)]) -> Vec<u8> {
    let mut meta = Vec::new();
    protobuf_field(&mut meta, 1, name.as_bytes());
    let mut secret = Vec::new();
    protobuf_field(&mut secret, 1, &meta);
    for (key, value) in entries {
        let mut entry = Vec::new();
        protobuf_field(&mut entry, 1, key.as_bytes());
        protobuf_field(&mut entry, 2, value.as_bytes());
        protobuf_field(&mut secret, 4, &entry);
    }
    let mut type_meta = Vec::new();
    protobuf_field(&mut type_meta, 1, b"v1");
    protobuf_field(&mut type_meta, 2, b"Secret");
    let mut body = b"k8s\0".to_vec();
    protobuf_field(&mut body, 1, &type_meta);
    protobuf_field(&mut body, 2, &secret);
    body
}

/// kube-apiserver folds a Secret's write-only `stringData` into `data` (base64, a stringData
/// key winning over the same data key) on every write verb and never stores nor serves it.
#[tokio::test]
async fn secret_string_data_is_folded_into_data_on_every_write() {
    use k8s_openapi::api::core::v1::Secret;

    let server = shared();
    let client = server.client().await;
    let ns = namespace(&client, "stringdata").await;
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns);

    // POST: the answer and what is stored hold data only; the creator owns data.token, as
    // kube-apiserver records fields after conversion.
    let created = api
        .create(
            &PostParams {
                field_manager: Some("creator".into()),
                ..PostParams::default()
            },
            &serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"token": "s3cret"}}))
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(created.string_data.is_none());
    assert_eq!(created.data.unwrap()["token"].0, b"s3cret");
    let got = served_secret(&client, &ns, "s").await;
    assert_eq!(got["data"], json!({"token": "czNjcmV0"}));
    assert_eq!(got["type"], "Opaque");
    assert!(got.get("stringData").is_none(), "{got}");
    assert_eq!(
        owned_by_manager(&got, "creator")["f:data"],
        json!({".": {}, "f:token": {}})
    );

    // Server-side apply with stringData only creates the same Secret; applying it again is a
    // no-op that keeps the resourceVersion.
    let config = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "applied"},
                        "stringData": {"token": "s3cret"}});
    let ssa = PatchParams::apply("applier");
    let first = api.patch("applied", &ssa, &Patch::Apply(&config)).await.unwrap();
    assert!(first.string_data.is_none());
    let got = served_secret(&client, &ns, "applied").await;
    assert_eq!(got["data"], json!({"token": "czNjcmV0"}));
    assert!(got.get("stringData").is_none(), "{got}");
    let again = api.patch("applied", &ssa, &Patch::Apply(&config)).await.unwrap();
    assert_eq!(again.metadata.resource_version, first.metadata.resource_version);

    // Patches: merge adds a key, strategic overrides one, JSON patch adds the (absent)
    // stringData field; every other key of data is kept each time.
    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Merge(json!({"stringData": {"added": "ü"}})),
    )
    .await
    .unwrap();
    assert_eq!(
        served_secret(&client, &ns, "s").await["data"],
        json!({"token": "czNjcmV0", "added": "w7w="})
    );
    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Strategic(json!({"data": {"raw": "cmF3"}, "stringData": {"token": "new"}})),
    )
    .await
    .unwrap();
    assert_eq!(
        served_secret(&client, &ns, "s").await["data"],
        json!({"token": "bmV3", "added": "w7w=", "raw": "cmF3"})
    );
    let req = http::Request::patch(format!("/api/v1/namespaces/{ns}/secrets/s"))
        .header("Content-Type", "application/json-patch+json")
        .body(
            serde_json::to_vec(&json!([
                {"op": "add", "path": "/stringData", "value": {"json": "j"}}
            ]))
            .unwrap(),
        )
        .unwrap();
    let answer: Value = client.request(req).await.unwrap();
    assert!(answer.get("stringData").is_none(), "{answer}");
    let got = served_secret(&client, &ns, "s").await;
    assert_eq!(
        got["data"],
        json!({"token": "bmV3", "added": "w7w=", "raw": "cmF3", "json": "ag=="})
    );
    assert!(got.get("stringData").is_none(), "{got}");

    // PUT: data and stringData side by side, stringData winning on the shared key.
    let mut replaced: Secret = serde_json::from_value(got).unwrap();
    replaced.string_data = Some([("raw".to_owned(), "put".to_owned())].into());
    api.replace("s", &PostParams::default(), &replaced).await.unwrap();
    let got = served_secret(&client, &ns, "s").await;
    assert_eq!(
        got["data"],
        json!({"token": "bmV3", "added": "w7w=", "raw": "cHV0", "json": "ag=="})
    );
    assert!(got.get("stringData").is_none(), "{got}");

    // A protobuf body (what typed clients such as kubectl's send) takes the same path.
    let req = http::Request::post(format!("/api/v1/namespaces/{ns}/secrets"))
        .header("Content-Type", "application/vnd.kubernetes.protobuf")
        .body(protobuf_secret("proto", &[("token", "s3cret")]))
        .unwrap();
    let answer: Value = client.request(req).await.unwrap();
    assert_eq!(answer["data"], json!({"token": "czNjcmV0"}));
    let got = served_secret(&client, &ns, "proto").await;
    assert_eq!(got["data"], json!({"token": "czNjcmV0"}));
    assert!(got.get("stringData").is_none(), "{got}");

    // Bad input: a key that is not a config key is named in stringData (422), a non-string
    // value is a 400 naming the field, and neither changes anything.
    let before = served_secret(&client, &ns, "s").await;
    let (code, reason, message) = api_error(
        api.patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"bad key": "v"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(message.contains("stringData[bad key]"), "{message}");
    let req = http::Request::post(format!("/api/v1/namespaces/{ns}/secrets"))
        .header("Content-Type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "number"}, "stringData": {"token": 42}}))
            .unwrap(),
        )
        .unwrap();
    let (code, reason, message) = api_error(client.request::<Value>(req).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (400, "BadRequest"));
    assert!(
        message.starts_with("Secret in version \"v1\" cannot be handled as a Secret: stringData.token:"),
        "{message}"
    );
    assert_eq!(served_secret(&client, &ns, "s").await, before);
    assert!(api.get_opt("number").await.unwrap().is_none());
}

/// `--simulate-workloads` with many Deployments created at once (its status writes run
/// concurrently): each is reported available once per generation, a spec change after the
/// report is reported again, and no status is written twice.
#[tokio::test]
async fn simulated_workloads_are_reported_once_per_generation_when_many_arrive_at_once() {
    let server = common::Server::start(&["--simulate-workloads"]);
    let client = server.client().await;
    let ns = namespace(&client, "simulate").await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let start = common::list_revision(&api).await;
    let names: Vec<String> = (0..40).map(|i| format!("d{i}")).collect();
    // d30..d39 are scaled right after their creation, racing the simulator's first report.
    let rushed = |name: &str| name.trim_start_matches('d').parse::<usize>().unwrap() >= 30;
    futures::future::join_all(names.iter().map(|name| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &deployment(name)).await?;
            if rushed(name) {
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"replicas": 2}})),
                )
                .await?;
            }
            Ok::<_, kube::Error>(())
        }
    }))
    .await
    .into_iter()
    .for_each(|created| created.unwrap());
    let reported = |generation: i64, replicas: i32| {
        move |d: &Deployment| {
            let status = d.status.clone().unwrap_or_default();
            d.metadata.generation == Some(generation)
                && status.observed_generation == Some(generation)
                && status.available_replicas == Some(replicas)
        }
    };
    let all_reported = |names: Vec<String>, generation: i64, replicas: i32| {
        let api = api.clone();
        async move {
            eventually("every Deployment reported", WAIT, || {
                let api = api.clone();
                let names = names.clone();
                async move {
                    let list = api.list(&ListParams::default()).await.ok()?;
                    let done = list
                        .items
                        .iter()
                        .filter(|d| names.contains(d.metadata.name.as_ref().unwrap()))
                        .filter(|d| reported(generation, replicas)(d))
                        .count();
                    (done == names.len()).then_some(())
                }
            })
            .await;
        }
    };
    let (rushed_names, calm): (Vec<String>, Vec<String>) = names.iter().cloned().partition(|n| rushed(n));
    all_reported(calm, 1, 1).await;
    all_reported(rushed_names, 2, 2).await;
    // Scaled back to back, each right after the other.
    let scaled: Vec<String> = names.iter().take(10).cloned().collect();
    for name in &scaled {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    }
    all_reported(scaled.clone(), 2, 3).await;
    // A last Deployment: once it is reported, the simulator has handled every earlier event,
    // so any second write of an earlier status precedes this one in the watch.
    api.create(&PostParams::default(), &deployment("marker"))
        .await
        .unwrap();
    let mut versions: BTreeMap<String, usize> = BTreeMap::new();
    let mut stream = api
        .watch(&WatchParams::default().timeout(20), &start)
        .await
        .unwrap()
        .boxed();
    loop {
        let event = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("the marker's status within the deadline")
            .expect("the watch stays open until the marker is reported")
            .unwrap();
        let d = match event {
            WatchEvent::Added(d) | WatchEvent::Modified(d) => d,
            other => panic!("unexpected {other:?}"),
        };
        let name = d.metadata.name.clone().unwrap();
        if name == "marker" {
            if reported(1, 1)(&d) {
                break;
            }
            continue;
        }
        *versions.entry(name).or_default() += 1;
    }
    for name in &names {
        let versions = versions.get(name).copied().unwrap_or_default();
        if rushed(name) {
            // Created, scaled and reported; reported in between if the simulator was first.
            assert!(
                (3..=4).contains(&versions),
                "{versions} versions of Deployment {name}"
            );
        } else {
            // Created and reported; scaled and reported again.
            let expected = if scaled.contains(name) { 4 } else { 2 };
            assert_eq!(versions, expected, "versions of Deployment {name}");
        }
    }
}
