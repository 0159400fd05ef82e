"""Conformance checks with the official Kubernetes Python client against flotilla-apiserver.

Usage: python3 conformance.py KUBECONFIG
Exits non-zero (with the failing check) on any mismatch.
"""
import sys
import uuid

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def expect_status(fn, code, reason):
    try:
        fn()
    except ApiException as e:
        assert e.status == code, f"expected {code}, got {e.status}: {e.body}"
        assert reason in e.body, f"expected reason {reason} in {e.body}"
        return
    raise AssertionError(f"expected an ApiException {code} {reason}")


def main(kubeconfig):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    apps = client.AppsV1Api()
    ext = client.ApiextensionsV1Api()
    custom = client.CustomObjectsApi()
    version = client.VersionApi().get_code()
    assert version.major == "1" and version.minor == "33", version

    ns = "py-" + uuid.uuid4().hex[:8]
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))

    # ConfigMap CRUD, conflicts, not found.
    cm = core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg", labels={"app": "py"}), data={"a": "1"})
    )
    assert cm.metadata.uid and cm.metadata.resource_version
    expect_status(
        lambda: core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"))),
        409,
        "AlreadyExists",
    )
    cm.data["a"] = "2"
    updated = core.replace_namespaced_config_map("cfg", ns, cm)
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)
    expect_status(lambda: core.replace_namespaced_config_map("cfg", ns, cm), 409, "Conflict")
    patched = core.patch_namespaced_config_map("cfg", ns, {"data": {"b": "3"}})
    assert patched.data == {"a": "2", "b": "3"}, patched.data
    listed = core.list_namespaced_config_map(ns, label_selector="app=py")
    assert [i.metadata.name for i in listed.items] == ["cfg"]
    expect_status(lambda: core.read_namespaced_config_map("nope", ns), 404, "NotFound")

    # Deployments: strategic merge patch keyed by container name, scale, status.
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(
                    containers=[
                        client.V1Container(name="a", image="nginx:1"),
                        client.V1Container(name="b", image="busybox:1"),
                    ]
                ),
            ),
        ),
    )
    apps.create_namespaced_deployment(ns, dep)
    smp = {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "busybox:2"}]}}}}
    got = apps.patch_namespaced_deployment("web", ns, smp)
    images = {c.name: c.image for c in got.spec.template.spec.containers}
    assert images == {"a": "nginx:1", "b": "busybox:2"}, images
    assert got.metadata.generation == 2, got.metadata.generation
    apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 3}})
    assert apps.read_namespaced_deployment("web", ns).spec.replicas == 3
    status = apps.patch_namespaced_deployment_status("web", ns, {"status": {"observedGeneration": 2, "replicas": 3}})
    assert status.status.replicas == 3

    # Watch from a resourceVersion.
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="later")))
    core.delete_namespaced_config_map("later", ns)
    w = watch.Watch()
    seen = []
    for event in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "later"), ("DELETED", "later")], seen

    # Custom resources.
    group = "py" + uuid.uuid4().hex[:6] + ".example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}},
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }
    ext.create_custom_resource_definition(crd)
    body = {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {}}
    created = custom.create_namespaced_custom_object(group, "v1", ns, "gadgets", body)
    assert created["spec"]["n"] == 1, created
    custom.patch_namespaced_custom_object(group, "v1", ns, "gadgets", "g", {"spec": {"n": 5}})
    got = custom.get_namespaced_custom_object(group, "v1", ns, "gadgets", "g")
    assert got["spec"]["n"] == 5 and got["metadata"]["generation"] == 2, got
    custom.patch_namespaced_custom_object_status(group, "v1", ns, "gadgets", "g", {"status": {"ok": True}})
    items = custom.list_namespaced_custom_object(group, "v1", ns, "gadgets")["items"]
    assert items[0]["status"] == {"ok": True}, items
    expect_status(
        lambda: custom.create_namespaced_custom_object(
            group, "v1", ns, "gadgets", {**body, "spec": {"n": "many"}, "metadata": {"name": "bad"}}
        ),
        422,
        "Invalid",
    )

    core.delete_namespace(ns)
    print("python conformance: ok")


if __name__ == "__main__":
    main(sys.argv[1])
