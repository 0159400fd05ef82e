"""Authentication and authorization with the official Kubernetes Python client.

Usage: python3 rbac.py ADMIN_KUBECONFIG NAMESPACE FOREIGN_CERT FOREIGN_KEY
(the namespace exists; the certificate is signed by a CA the server does not trust)
Exits non-zero (with the failing check) on any mismatch.
"""
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException


# The class was renamed in client 29.
SUBJECT = getattr(client, "RbacV1Subject", None) or getattr(client, "V1Subject")


def expect_status(fn, code, message=None):
    try:
        fn()
    except ApiException as e:
        assert e.status == code, f"expected {code}, got {e.status}: {e.body}"
        if message is not None:
            assert message in e.body, f"expected {message!r} in {e.body}"
        return
    raise AssertionError(f"expected an ApiException {code}")


def client_with(base, token=None, cert=None, key=None):
    c = client.Configuration()
    c.host = base.host
    c.ssl_ca_cert = base.ssl_ca_cert
    if token is not None:
        c.api_key = {"authorization": "Bearer " + token}
    if cert is not None:
        c.cert_file = cert
        c.key_file = key
    return client.ApiClient(c)


def access_review(api, namespace, verb, resource):
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(namespace=namespace, verb=verb, resource=resource)
        )
    )
    return client.AuthorizationV1Api(api).create_self_subject_access_review(review).status


def main(kubeconfig, ns, foreign_cert, foreign_key):
    config.load_kube_config(config_file=kubeconfig)
    base = client.Configuration.get_default_copy()
    core = client.CoreV1Api()
    rbac = client.RbacAuthorizationV1Api()
    authz = client.AuthorizationV1Api()

    # A ServiceAccount and a token from the TokenRequest API.
    core.create_namespaced_service_account(ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="py")))
    request = core.create_namespaced_service_account_token(
        "py", ns, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
    )
    token = request.status.token
    assert token.count(".") == 2, "a JWT"
    assert request.spec.expiration_seconds == 3600
    expect_status(
        lambda: core.create_namespaced_service_account_token(
            "py", ns, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=60))
        ),
        422,
        "may not specify a duration less than 10 minutes",
    )
    sa = client_with(base, token=token)
    sa_core = client.CoreV1Api(sa)
    user = f"system:serviceaccount:{ns}:py"

    # Forbidden, with kube-apiserver's message; SelfSubjectAccessReview says no.
    expect_status(
        lambda: sa_core.list_namespaced_config_map(ns),
        403,
        f'configmaps is forbidden: User \\"{user}\\" cannot list resource \\"configmaps\\" in API group \\"\\" in the namespace \\"{ns}\\"',
    )
    assert access_review(sa, ns, "list", "configmaps").allowed is False

    # Bind view: the same client may list at once, and the review agrees.
    rbac.create_namespaced_role_binding(
        ns,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="py-view"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="view"),
            subjects=[SUBJECT(kind="ServiceAccount", name="py", namespace=ns)],
        ),
    )
    sa_core.list_namespaced_config_map(ns)
    status = access_review(sa, ns, "list", "configmaps")
    assert status.allowed is True and "py-view" in status.reason, status
    assert access_review(sa, ns, "delete", "configmaps").allowed is False
    expect_status(lambda: sa_core.delete_namespaced_config_map("x", ns), 403, "cannot delete resource")

    # SubjectAccessReview and LocalSubjectAccessReview (asked by the admin about the SA).
    sar = authz.create_subject_access_review(
        client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user=user,
                groups=["system:serviceaccounts"],
                resource_attributes=client.V1ResourceAttributes(namespace=ns, verb="get", resource="pods"),
            )
        )
    )
    assert sar.status.allowed is True, sar.status
    lsar = authz.create_namespaced_local_subject_access_review(
        ns,
        client.V1LocalSubjectAccessReview(
            metadata=client.V1ObjectMeta(namespace=ns),
            spec=client.V1SubjectAccessReviewSpec(
                user=user, resource_attributes=client.V1ResourceAttributes(namespace=ns, verb="create", resource="pods")
            ),
        ),
    )
    assert lsar.status.allowed is False, lsar.status
    # The SA may not ask about others.
    expect_status(
        lambda: client.AuthorizationV1Api(sa).create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user="admin", resource_attributes=client.V1ResourceAttributes(verb="get", resource="pods")
                )
            )
        ),
        403,
        "cannot create resource \\\"subjectaccessreviews\\\" in API group \\\"authorization.k8s.io\\\" at the cluster scope",
    )
    rules = client.AuthorizationV1Api(sa).create_self_subject_rules_review(
        client.V1SelfSubjectRulesReview(spec=client.V1SelfSubjectRulesReviewSpec(namespace=ns))
    ).status
    assert any("configmaps" in r.resources and "list" in r.verbs for r in rules.resource_rules), rules

    # Wrong token, and a certificate of another CA (OpenSSL presents it): 401.
    expect_status(lambda: client.CoreV1Api(client_with(base, token="wrong")).list_namespaced_config_map(ns), 401, "Unauthorized")
    foreign = client_with(base, cert=foreign_cert, key=foreign_key)
    expect_status(lambda: client.CoreV1Api(foreign).list_namespaced_config_map(ns), 401, "Unauthorized")

    # Deleting the ServiceAccount revokes the token.
    core.delete_namespaced_service_account("py", ns)
    expect_status(lambda: sa_core.list_namespaced_config_map(ns), 401, "Unauthorized")
    print("python rbac: ok")


if __name__ == "__main__":
    main(*sys.argv[1:5])
