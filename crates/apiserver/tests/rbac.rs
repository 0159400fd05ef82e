//! Authentication, authorization and audit against a real server, driven with kubectl, curl and
//! the official Python client: ServiceAccount tokens (`kubectl create token`), forbidden verbs
//! and kube-apiserver's 403 messages, wrong, expired and revoked tokens, client certificates of
//! this server's CA and of another, anonymous requests, escalation attempts, `kubectl auth
//! can-i` (and `--list`), access reviews, aggregated ClusterRoles, the audit log, and that no
//! log line holds a token or Secret data.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use common::{Output, Server, rand_suffix};
use flotilla_apiserver::serviceaccount::{self, Claims, Issuer, KubernetesClaims, ObjectClaim};
use serde_json::{Value, json};

/// One server for the file: audit log on, debug logging kept in `server.log`.
fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| Server::start(&["--audit-log-path", "{dir}/audit.log", "--log-level", "debug"]))
}

/// kubectl as the admin (system:masters); panics on failure.
#[track_caller]
fn admin(server: &Server, args: &[&str]) -> String {
    server.kubectl(args).success().to_owned()
}

#[track_caller]
fn admin_stdin(server: &Server, args: &[&str], stdin: &str) -> String {
    server.kubectl_stdin(args, stdin).success().to_owned()
}

/// How a kubeconfig authenticates.
enum Credential<'a> {
    Token(&'a str),
    Certificate { cert: &'a str, key: &'a str },
}

/// A kubeconfig for this server's address and CA with `credential`, written next to the data.
fn kubeconfig(server: &Server, credential: Credential<'_>) -> PathBuf {
    let name = format!("user-{}", rand_suffix());
    let mut user = json!({});
    match credential {
        Credential::Token(token) => user["token"] = json!(token),
        Credential::Certificate { cert, key } => {
            let cert_path = server.dir.join(format!("{name}.crt"));
            let key_path = server.dir.join(format!("{name}.key"));
            std::fs::write(&cert_path, cert).unwrap();
            std::fs::write(&key_path, key).unwrap();
            user["client-certificate"] = json!(cert_path);
            user["client-key"] = json!(key_path);
        }
    }
    let config = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server.url, "certificate-authority": server.ca}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    });
    let path = server.dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&path, serde_yaml::to_string(&config).unwrap()).unwrap();
    path
}

/// kubectl with another kubeconfig.
fn kubectl_as(server: &Server, kubeconfig: &Path, args: &[&str]) -> Output {
    let flag = format!("--kubeconfig={}", kubeconfig.display());
    let mut all = vec![flag.as_str()];
    all.extend_from_slice(args);
    server.kubectl(&all)
}

fn kubectl_as_stdin(server: &Server, kubeconfig: &Path, args: &[&str], stdin: &str) -> Output {
    let flag = format!("--kubeconfig={}", kubeconfig.display());
    let mut all = vec![flag.as_str()];
    all.extend_from_slice(args);
    server.kubectl_stdin(&all, stdin)
}

fn namespace(server: &Server, prefix: &str) -> String {
    let ns = format!("{prefix}-{}", rand_suffix());
    admin(server, &["create", "namespace", &ns]);
    ns
}

/// A ServiceAccount `sa` in `ns` and a token for it from `kubectl create token`.
fn service_account_token(server: &Server, ns: &str, sa: &str) -> String {
    admin(server, &["-n", ns, "create", "serviceaccount", sa]);
    admin(server, &["-n", ns, "create", "token", sa, "--duration=1h"])
        .trim()
        .to_owned()
}

fn can_i(server: &Server, kubeconfig: &Path, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = kubectl_as(server, kubeconfig, &all);
    // `can-i` exits 1 for "no"; anything else on stderr but a warning about an unknown
    // resource type is a failure.
    assert!(
        out.stderr
            .lines()
            .all(|l| l.is_empty() || l.starts_with("Warning:")),
        "kubectl auth can-i {args:?}: {}",
        out.stderr
    );
    out.stdout.trim().to_owned()
}

#[test]
fn service_account_tokens_authenticate_and_rbac_decides_with_kubes_messages() {
    let server = server();
    let ns = namespace(server, "sa");
    let token = service_account_token(server, &ns, "bot");
    let bot = kubeconfig(server, Credential::Token(&token));

    let whoami = kubectl_as(server, &bot, &["auth", "whoami", "-o", "json"]);
    let review: Value = serde_json::from_str(whoami.success()).unwrap();
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], format!("system:serviceaccount:{ns}:bot"));
    assert_eq!(
        user["groups"],
        json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated"
        ])
    );
    assert!(
        user["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .unwrap()
            .starts_with("JTI=")
    );

    // Nothing is granted yet: a forbidden list, with kube-apiserver's message.
    let denied = kubectl_as(server, &bot, &["-n", &ns, "get", "configmaps"]);
    assert_eq!(
        denied.failure().trim(),
        format!(
            "Error from server (Forbidden): configmaps is forbidden: User \"system:serviceaccount:{ns}:bot\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"{ns}\""
        )
    );
    let (code, body) = server.curl(
        "GET",
        &format!("/apis/apps/v1/namespaces/{ns}/deployments/web"),
        None,
        None,
        Some(&token),
    );
    assert_eq!(code, 403);
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": format!("deployments.apps \"web\" is forbidden: User \"system:serviceaccount:{ns}:bot\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"{ns}\""),
            "details": {"name": "web", "group": "apps", "kind": "deployments"}})
    );
    let cluster = kubectl_as(server, &bot, &["get", "namespaces"]);
    assert!(
        cluster.failure().contains(&format!(
            "User \"system:serviceaccount:{ns}:bot\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        )),
        "{}",
        cluster.stderr
    );
    assert_eq!(can_i(server, &bot, &["list", "configmaps", "-n", &ns]), "no");

    // A Role and RoleBinding grant what they say, on the next request, in that namespace only.
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "cm-reader",
            "--verb=get,list,watch",
            "--resource=configmaps",
        ],
    );
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "bot-reads",
            "--role=cm-reader",
            &format!("--serviceaccount={ns}:bot"),
        ],
    );
    kubectl_as(server, &bot, &["-n", &ns, "get", "configmaps"]).success();
    assert_eq!(can_i(server, &bot, &["list", "configmaps", "-n", &ns]), "yes");
    assert_eq!(can_i(server, &bot, &["watch", "configmaps", "-n", &ns]), "yes");
    assert_eq!(can_i(server, &bot, &["delete", "configmaps", "-n", &ns]), "no");
    assert_eq!(
        can_i(server, &bot, &["list", "configmaps", "-n", "default"]),
        "no"
    );
    assert_eq!(can_i(server, &bot, &["list", "secrets", "-n", &ns]), "no");
    let create = kubectl_as(server, &bot, &["-n", &ns, "create", "configmap", "x"]);
    assert!(
        create.failure().contains("cannot create resource \"configmaps\""),
        "{}",
        create.stderr
    );
    // resourceNames: one Secret by name, not the list.
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "secret",
            "generic",
            "one",
            "--from-literal=k=v",
        ],
    );
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "one-secret",
            "--verb=get",
            "--resource=secrets",
            "--resource-name=one",
        ],
    );
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "bot-one",
            "--role=one-secret",
            &format!("--serviceaccount={ns}:bot"),
        ],
    );
    kubectl_as(server, &bot, &["-n", &ns, "get", "secret", "one"]).success();
    assert_eq!(can_i(server, &bot, &["get", "secrets/one", "-n", &ns]), "yes");
    assert_eq!(can_i(server, &bot, &["get", "secrets/two", "-n", &ns]), "no");
    assert_eq!(can_i(server, &bot, &["list", "secrets", "-n", &ns]), "no");
    // Subresources are resources of their own: pods/log is not pods.
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "logs",
            "--verb=get",
            "--resource=pods/log",
        ],
    );
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "bot-logs",
            "--role=logs",
            &format!("--serviceaccount={ns}:bot"),
        ],
    );
    assert_eq!(
        can_i(server, &bot, &["get", "pods", "--subresource=log", "-n", &ns]),
        "yes"
    );
    assert_eq!(can_i(server, &bot, &["get", "pods", "-n", &ns]), "no");

    // `can-i --list` (SelfSubjectRulesReview) lists the rules that apply in the namespace.
    let list = kubectl_as(server, &bot, &["auth", "can-i", "--list", "-n", &ns]);
    let list = list.success();
    assert!(
        list.lines()
            .any(|l| l.starts_with("configmaps ") && l.contains("[get list watch]")),
        "{list}"
    );
    assert!(
        list.lines()
            .any(|l| l.starts_with("secrets ") && l.contains("[one]") && l.contains("[get]")),
        "{list}"
    );
    assert!(
        list.lines()
            .any(|l| l.starts_with("selfsubjectaccessreviews.authorization.k8s.io")),
        "{list}"
    );

    // Discovery and health are open to every authenticated user (system:discovery).
    kubectl_as(server, &bot, &["api-resources", "--api-group=apps"]).success();
    assert_eq!(server.curl("GET", "/version", None, None, Some(&token)).0, 200);
}

#[test]
fn wrong_expired_foreign_and_revoked_tokens_are_401() {
    let server = server();
    let ns = namespace(server, "bad");
    let token = service_account_token(server, &ns, "bot");
    let unauthorized = |token: &str| {
        let config = kubeconfig(server, Credential::Token(token));
        let out = kubectl_as(server, &config, &["get", "--raw", "/version"]);
        assert_eq!(
            out.failure().trim(),
            "error: You must be logged in to the server (Unauthorized)"
        );
        let (code, body) = server.curl("GET", "/version", None, None, Some(token));
        assert_eq!(code, 401);
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        );
    };
    unauthorized("not-a-token");
    unauthorized(&format!("{token}x"));

    // A token this server signed, for this ServiceAccount, but expired (past the leeway).
    let uid = admin(
        server,
        &[
            "-n",
            &ns,
            "get",
            "serviceaccount",
            "bot",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    let issuer = Issuer::load_or_create(
        &server.dir.join("pki/sa.key"),
        false,
        serviceaccount::DEFAULT_ISSUER,
        &[],
        None,
    )
    .unwrap();
    let now = jiff::Timestamp::now().as_second();
    let claims = |exp: i64| Claims {
        iss: serviceaccount::DEFAULT_ISSUER.into(),
        sub: serviceaccount::user_name(&ns, "bot"),
        aud: vec![serviceaccount::DEFAULT_ISSUER.into()],
        exp,
        iat: exp - 600,
        nbf: exp - 600,
        jti: "expired".into(),
        kubernetes: KubernetesClaims {
            namespace: ns.clone(),
            serviceaccount: ObjectClaim {
                name: "bot".into(),
                uid: uid.clone(),
            },
            pod: None,
            secret: None,
        },
    };
    let fresh = issuer.sign(&claims(now + 600)).unwrap();
    assert_eq!(
        server.curl("GET", "/version", None, None, Some(&fresh)).0,
        200,
        "the signing path works"
    );
    unauthorized(
        &issuer
            .sign(&claims(now - serviceaccount::LEEWAY_SECONDS - 60))
            .unwrap(),
    );
    // The same claims signed by another server's key.
    let other = tempfile::tempdir().unwrap();
    let stranger = Issuer::load_or_create(
        &other.path().join("k"),
        true,
        serviceaccount::DEFAULT_ISSUER,
        &[],
        None,
    )
    .unwrap();
    unauthorized(&stranger.sign(&claims(now + 600)).unwrap());

    // TokenRequest validation, as kube-apiserver words it.
    let short = server.kubectl(&["-n", &ns, "create", "token", "bot", "--duration=1m"]);
    assert!(
        short.failure().contains(
            "TokenRequest.authentication.k8s.io \"bot\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        ),
        "{}",
        short.stderr
    );
    let long = server.kubectl(&["-n", &ns, "create", "token", "bot", "--duration=1200000h"]);
    assert!(
        long.failure()
            .contains("may not specify a duration larger than 2^32 seconds"),
        "{}",
        long.stderr
    );
    let missing = server.kubectl(&["-n", &ns, "create", "token", "nobody"]);
    assert!(
        missing.failure().contains("serviceaccounts \"nobody\" not found"),
        "{}",
        missing.stderr
    );
    let created = admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "token",
            "bot",
            "--duration=10m",
            "-o",
            "json",
        ],
    );
    let request: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(request["spec"]["expirationSeconds"], 600);
    assert_eq!(
        request["spec"]["audiences"],
        json!([serviceaccount::DEFAULT_ISSUER])
    );
    assert!(
        request["status"]["expirationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );

    // Deleting and re-creating the ServiceAccount revokes every token issued before.
    assert_eq!(server.curl("GET", "/version", None, None, Some(&token)).0, 200);
    admin(server, &["-n", &ns, "delete", "serviceaccount", "bot"]);
    unauthorized(&token);
    admin(server, &["-n", &ns, "create", "serviceaccount", "bot"]);
    unauthorized(&token);
    unauthorized(&fresh);
    let renewed = admin(server, &["-n", &ns, "create", "token", "bot"]);
    assert_eq!(
        server.curl("GET", "/version", None, None, Some(renewed.trim())).0,
        200
    );
}

#[test]
fn client_certificates_of_this_ca_name_the_user_and_others_do_not_authenticate() {
    let server = server();
    let ns = namespace(server, "cert");
    let (cert, key) = flotilla_apiserver::pki::issue_client_certificate(
        &server.dir.join("pki"),
        "jane",
        Some("auditors"),
        1,
    )
    .unwrap();
    let jane = kubeconfig(
        server,
        Credential::Certificate {
            cert: &cert,
            key: &key,
        },
    );
    let whoami: Value =
        serde_json::from_str(kubectl_as(server, &jane, &["auth", "whoami", "-o", "json"]).success()).unwrap();
    assert_eq!(
        whoami["status"]["userInfo"],
        json!({"username": "jane", "groups": ["auditors", "system:authenticated"]})
    );
    assert!(
        kubectl_as(server, &jane, &["-n", &ns, "get", "pods"])
            .failure()
            .contains("User \"jane\" cannot list")
    );
    // Bound by group (the certificate's O).
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "auditors-view",
            "--clusterrole=view",
            "--group=auditors",
        ],
    );
    kubectl_as(server, &jane, &["-n", &ns, "get", "pods"]).success();

    // A certificate of another CA, even one claiming system:masters, never authenticates.
    let other = tempfile::tempdir().unwrap();
    flotilla_apiserver::pki::ensure_self_signed(other.path(), &[]).unwrap();
    let (foreign_cert, foreign_key) =
        flotilla_apiserver::pki::issue_client_certificate(other.path(), "mallory", Some("system:masters"), 1)
            .unwrap();
    let mallory = kubeconfig(
        server,
        Credential::Certificate {
            cert: &foreign_cert,
            key: &foreign_key,
        },
    );
    // Both CAs are named flotilla-apiserver-ca, so kubectl presents the certificate: 401.
    let out = kubectl_as(server, &mallory, &["-n", &ns, "get", "pods"]);
    assert_eq!(
        out.failure().trim(),
        "error: You must be logged in to the server (Unauthorized)"
    );
    // So does curl.
    let cert_path = server.dir.join("mallory.crt");
    let key_path = server.dir.join("mallory.key");
    std::fs::write(&cert_path, &foreign_cert).unwrap();
    std::fs::write(&key_path, &foreign_key).unwrap();
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(&server.ca)
        .arg("--cert")
        .arg(&cert_path)
        .arg("--key")
        .arg(&key_path)
        .arg(format!("{}/api/v1/namespaces/{ns}/pods", server.url))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "401");
}

#[test]
fn anonymous_requests_reach_health_and_version_only() {
    let server = server();
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        let (code, body) = server.curl("GET", path, None, None, Some(""));
        assert_eq!(code, 200, "{path}: {body}");
    }
    let (code, body) = server.curl("GET", "/api", None, None, Some(""));
    assert_eq!(code, 403);
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/api\""
    );
    assert_eq!(status["details"], json!({}));
    let (code, body) = server.curl("GET", "/api/v1/namespaces/default/secrets", None, None, Some(""));
    assert_eq!(code, 403);
    assert!(
        body.contains("User \\\"system:anonymous\\\" cannot list resource \\\"secrets\\\""),
        "{body}"
    );
    let (code, _) = server.curl("POST", "/healthz", None, None, Some(""));
    assert_eq!(code, 403, "system:public-info-viewer grants get only");
}

#[test]
fn escalation_attempts_are_refused_as_in_kubernetes() {
    let server = server();
    let ns = namespace(server, "esc");
    let token = service_account_token(server, &ns, "delegate");
    let delegate = kubeconfig(server, Credential::Token(&token));
    let sa = format!("--serviceaccount={ns}:delegate");
    // The delegate manages roles and bindings in its namespace and may read pods; nothing else.
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "rbac-manager",
            "--verb=get,list,create,update,patch,delete",
            "--resource=roles,rolebindings",
        ],
    );
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "pod-reader",
            "--verb=get,list",
            "--resource=pods",
        ],
    );
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "delegate-rbac",
            "--role=rbac-manager",
            &sa,
        ],
    );
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "delegate-pods",
            "--role=pod-reader",
            &sa,
        ],
    );
    let user = format!("system:serviceaccount:{ns}:delegate");
    let groups =
        format!("[\"system:serviceaccounts\" \"system:serviceaccounts:{ns}\" \"system:authenticated\"]");

    // A role with rights it holds: fine. With more: refused, naming what is missing.
    kubectl_as(
        server,
        &delegate,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "subset",
            "--verb=get",
            "--resource=pods",
        ],
    )
    .success();
    let more = kubectl_as(
        server,
        &delegate,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "superset",
            "--verb=get,delete",
            "--resource=pods,secrets",
        ],
    );
    assert!(
        more.failure().contains(&format!(
            "roles.rbac.authorization.k8s.io \"superset\" is forbidden: user \"{user}\" (groups={groups}) is attempting to grant RBAC permissions not currently held:\n\
             {{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}}\n\
             {{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}}"
        )),
        "{}",
        more.stderr
    );
    // Widening an existing role is refused the same way, and leaves it as it was.
    let widen = kubectl_as(
        server,
        &delegate,
        &[
            "-n",
            &ns,
            "patch",
            "role",
            "subset",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["secrets"],"verbs":["list"]}}]"#,
        ],
    );
    assert!(
        widen
            .failure()
            .contains("attempting to grant RBAC permissions not currently held"),
        "{}",
        widen.stderr
    );
    assert_eq!(
        admin(
            server,
            &[
                "-n",
                &ns,
                "get",
                "role",
                "subset",
                "-o",
                "jsonpath={.rules[*].resources}"
            ]
        ),
        "[\"pods\"]"
    );

    // Binding a role whose rights it holds: fine; binding `edit` (which it does not hold): refused.
    kubectl_as(
        server,
        &delegate,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "ok",
            "--role=subset",
            "--user=alice",
        ],
    )
    .success();
    let bind = kubectl_as(
        server,
        &delegate,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "too-much",
            "--clusterrole=edit",
            "--user=alice",
        ],
    );
    assert!(
        bind.failure().contains(&format!(
            "rolebindings.rbac.authorization.k8s.io \"too-much\" is forbidden: user \"{user}\" (groups={groups}) is attempting to grant RBAC permissions not currently held:"
        )),
        "{}",
        bind.stderr
    );
    assert!(
        bind.stderr
            .contains("{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:["),
        "{}",
        bind.stderr
    );
    // Binding a role that does not exist: refused (it cannot be shown to hold its rights).
    let dangling = kubectl_as(
        server,
        &delegate,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "dangling",
            "--role=nope",
            "--user=alice",
        ],
    );
    assert!(
        dangling
            .failure()
            .contains("role.rbac.authorization.k8s.io \"nope\" not found"),
        "{}",
        dangling.stderr
    );

    // `bind` on exactly the `edit` ClusterRole lets it bind that one (and not `admin`).
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "may-bind-edit",
            "--verb=bind",
            "--resource=clusterroles.rbac.authorization.k8s.io",
            "--resource-name=edit",
        ],
    );
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "delegate-binds",
            "--role=may-bind-edit",
            &sa,
        ],
    );
    kubectl_as(
        server,
        &delegate,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "edit-for-alice",
            "--clusterrole=edit",
            "--user=alice",
        ],
    )
    .success();
    assert!(
        kubectl_as(
            server,
            &delegate,
            &[
                "-n",
                &ns,
                "create",
                "rolebinding",
                "admin-for-alice",
                "--clusterrole=admin",
                "--user=alice"
            ]
        )
        .failure()
        .contains("not currently held")
    );
    // The roleRef of a binding never changes.
    let retarget = kubectl_as(
        server,
        &delegate,
        &[
            "-n",
            &ns,
            "patch",
            "rolebinding",
            "ok",
            "--type=merge",
            "-p",
            r#"{"roleRef":{"name":"pod-reader"}}"#,
        ],
    );
    assert!(
        retarget.failure().contains("cannot change roleRef"),
        "{}",
        retarget.stderr
    );

    // `escalate` on roles lifts the role check.
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "may-escalate",
            "--verb=escalate",
            "--resource=roles.rbac.authorization.k8s.io",
        ],
    );
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "delegate-escalates",
            "--role=may-escalate",
            &sa,
        ],
    );
    kubectl_as(
        server,
        &delegate,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "superset",
            "--verb=get,delete",
            "--resource=pods,secrets",
        ],
    )
    .success();
    // ...but creating it gave no rights to use it.
    assert_eq!(can_i(server, &delegate, &["get", "secrets", "-n", &ns]), "no");

    // An aggregationRule can gather anything: it needs cluster-admin's rights.
    admin(
        server,
        &[
            "create",
            "clusterrole",
            &format!("{ns}-cr-manager"),
            "--verb=create,get",
            "--resource=clusterroles.rbac.authorization.k8s.io",
        ],
    );
    admin(
        server,
        &[
            "create",
            "clusterrolebinding",
            &format!("{ns}-cr-manager"),
            &format!("--clusterrole={ns}-cr-manager"),
            &sa,
        ],
    );
    let aggregated = kubectl_as_stdin(
        server,
        &delegate,
        &["create", "-f", "-"],
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {ns}-gatherer}}\naggregationRule:\n  clusterRoleSelectors:\n  - matchLabels: {{anything: \"true\"}}\nrules: []\n"
        ),
    );
    assert!(
        aggregated.failure().contains(&format!(
            "clusterroles.rbac.authorization.k8s.io \"{ns}-gatherer\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
        )),
        "{}",
        aggregated.stderr
    );
    // Nothing the refused requests asked for exists.
    let roles = admin(server, &["-n", &ns, "get", "roles,rolebindings", "-o", "name"]);
    for absent in [
        "rolebinding.rbac.authorization.k8s.io/too-much",
        "rolebinding.rbac.authorization.k8s.io/admin-for-alice",
        "rolebinding.rbac.authorization.k8s.io/dangling",
    ] {
        assert!(!roles.lines().any(|l| l == absent), "{absent} exists:\n{roles}");
    }
    assert!(
        server
            .kubectl(&["get", "clusterrole", &format!("{ns}-gatherer")])
            .failure()
            .contains("NotFound")
    );
}

#[test]
fn aggregated_cluster_roles_follow_their_selectors() {
    let server = server();
    let ns = namespace(server, "agg");
    let token = service_account_token(server, &ns, "viewer");
    let viewer = kubeconfig(server, Credential::Token(&token));
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "viewer",
            "--clusterrole=view",
            &format!("--serviceaccount={ns}:viewer"),
        ],
    );
    assert_eq!(
        can_i(server, &viewer, &["list", "pods", "-n", &ns]),
        "yes",
        "the default view role is aggregated"
    );
    assert_eq!(can_i(server, &viewer, &["list", "secrets", "-n", &ns]), "no");
    let group = format!("{ns}.example.com");
    // kubectl maps `widgets.<group>` through discovery, which does not know it: ask with a
    // SelfSubjectAccessReview naming the group.
    let may_list_widgets = || {
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": ns, "verb": "list", "group": group, "resource": "widgets"}}});
        let out = kubectl_as_stdin(
            server,
            &viewer,
            &["create", "-f", "-", "-o", "jsonpath={.status.allowed}"],
            &review.to_string(),
        );
        out.success().trim() == "true"
    };
    assert!(!may_list_widgets());
    admin_stdin(
        server,
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {ns}-widgets-view\n  labels: {{rbac.authorization.k8s.io/aggregate-to-view: \"true\"}}\nrules:\n- apiGroups: [\"{group}\"]\n  resources: [widgets]\n  verbs: [get, list, watch]\n"
        ),
    );
    let eventually = |want: bool, what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if may_list_widgets() == want {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    eventually(true, "view did not gather the widgets rule");
    // view is itself labelled for edit, and edit for admin: the rule reaches both.
    for role in ["edit", "admin"] {
        let rules = admin(server, &["get", "clusterrole", role, "-o", "json"]);
        assert!(rules.contains(&group), "{role} lacks the widgets rule");
    }
    admin(
        server,
        &[
            "label",
            "clusterrole",
            &format!("{ns}-widgets-view"),
            "rbac.authorization.k8s.io/aggregate-to-view-",
        ],
    );
    eventually(false, "view kept the widgets rule after the label went");
}

#[test]
fn subject_access_reviews_answer_with_kubectl() {
    let server = server();
    let ns = namespace(server, "sar");
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "ann-edits",
            "--clusterrole=edit",
            "--user=ann",
        ],
    );
    let review = |user: &str, groups: &[&str], verb: &str, resource: &str| -> Value {
        let body = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": {"namespace": ns, "verb": verb, "resource": resource}},
        });
        serde_json::from_str(&admin_stdin(
            server,
            &["create", "-f", "-", "-o", "json"],
            &body.to_string(),
        ))
        .unwrap()
    };
    let yes = review("ann", &[], "create", "deployments");
    assert_eq!(yes["status"]["allowed"], false, "deployments are in apps: {yes}");
    let mut body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "ann", "resourceAttributes": {"namespace": ns, "verb": "create", "group": "apps", "resource": "deployments"}}});
    let answer: Value = serde_json::from_str(&admin_stdin(
        server,
        &["create", "-f", "-", "-o", "json"],
        &body.to_string(),
    ))
    .unwrap();
    assert_eq!(answer["status"]["allowed"], true);
    assert_eq!(
        answer["status"]["reason"],
        format!("RBAC: allowed by RoleBinding \"ann-edits/{ns}\" of ClusterRole \"edit\" to User \"ann\"")
    );
    body["spec"]["resourceAttributes"]["namespace"] = json!("default");
    let elsewhere: Value = serde_json::from_str(&admin_stdin(
        server,
        &["create", "-f", "-", "-o", "json"],
        &body.to_string(),
    ))
    .unwrap();
    assert_eq!(elsewhere["status"], json!({"allowed": false}));
    assert_eq!(
        review("bob", &["system:masters"], "delete", "nodes")["status"]["allowed"],
        true
    );
    // kubectl auth can-i --as asks the same question through impersonation-free SAR? No: it
    // impersonates, which the admin may do; the answer must agree with the review.
    assert_eq!(
        server
            .kubectl(&[
                "auth",
                "can-i",
                "create",
                "deployments.apps",
                "-n",
                &ns,
                "--as=ann"
            ])
            .stdout
            .trim(),
        "yes"
    );
    assert_eq!(
        server
            .kubectl(&[
                "auth",
                "can-i",
                "create",
                "deployments.apps",
                "-n",
                "default",
                "--as=ann"
            ])
            .stdout
            .trim(),
        "no"
    );
    // Impersonation itself needs `impersonate` rights.
    let token = service_account_token(server, &ns, "pretender");
    let pretender = kubeconfig(server, Credential::Token(&token));
    let out = kubectl_as(server, &pretender, &["get", "pods", "-n", &ns, "--as=ann"]);
    assert_eq!(
        out.failure().trim(),
        format!(
            "Error from server (Forbidden): users \"ann\" is forbidden: User \"system:serviceaccount:{ns}:pretender\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )
    );
    admin(
        server,
        &[
            "create",
            "clusterrole",
            &format!("{ns}-as-ann"),
            "--verb=impersonate",
            "--resource=users",
            "--resource-name=ann",
        ],
    );
    admin(
        server,
        &[
            "create",
            "clusterrolebinding",
            &format!("{ns}-as-ann"),
            &format!("--clusterrole={ns}-as-ann"),
            &format!("--serviceaccount={ns}:pretender"),
        ],
    );
    kubectl_as(server, &pretender, &["get", "pods", "-n", &ns, "--as=ann"]).success();
    let audit = std::fs::read_to_string(server.dir.join("audit.log")).unwrap();
    let acted = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| {
            e["impersonatedUser"]["username"] == "ann"
                && e["objectRef"]["namespace"] == ns.as_str()
                && e["responseStatus"]["code"] == 200
        })
        .expect("the impersonated request is audited");
    assert_eq!(
        acted["user"]["username"],
        format!("system:serviceaccount:{ns}:pretender")
    );
    assert_eq!(
        acted["impersonatedUser"]["groups"],
        json!(["system:authenticated"])
    );
}

#[test]
fn python_client_sees_the_same_authentication_and_authorization() {
    let server = server();
    let ns = namespace(server, "py");
    let other = tempfile::tempdir().unwrap();
    flotilla_apiserver::pki::ensure_self_signed(other.path(), &[]).unwrap();
    let (cert, key) =
        flotilla_apiserver::pki::issue_client_certificate(other.path(), "mallory", Some("system:masters"), 1)
            .unwrap();
    let cert_path = server.dir.join(format!("py-{ns}.crt"));
    let key_path = server.dir.join(format!("py-{ns}.key"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    let path = common::python_client_path();
    let mut script = std::process::Command::new("python3");
    script
        .arg(common::fixture("python/rbac.py"))
        .arg(&server.kubeconfig)
        .arg(&ns)
        .arg(&cert_path)
        .arg(&key_path);
    if let Some(path) = &path {
        script.env("PYTHONPATH", path);
    }
    let out = script.output().unwrap();
    assert!(
        out.status.success(),
        "python rbac checks failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("python rbac: ok"));
}

#[test]
fn audit_log_records_who_did_what_and_no_log_holds_tokens_or_secret_data() {
    let server = server();
    let ns = namespace(server, "audit");
    let token = service_account_token(server, &ns, "snoop");
    let snoop = kubeconfig(server, Credential::Token(&token));
    let plain = format!("s3cr3t-{}", rand_suffix());
    let encoded = base64::engine::general_purpose::STANDARD.encode(plain.as_bytes());
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "secret",
            "generic",
            "db",
            &format!("--from-literal=password={plain}"),
        ],
    );
    // Read, denied, and with a wrong token; then read by someone allowed.
    let denied = kubectl_as(server, &snoop, &["-n", &ns, "get", "secret", "db", "-o", "yaml"]);
    assert!(denied.failure().contains("cannot get resource \"secrets\""));
    let wrong = kubeconfig(server, Credential::Token("definitely-wrong-token-value"));
    kubectl_as(server, &wrong, &["-n", &ns, "get", "secrets"]).failure();
    admin(
        server,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "snoop-edit",
            "--clusterrole=edit",
            &format!("--serviceaccount={ns}:snoop"),
        ],
    );
    let read = kubectl_as(
        server,
        &snoop,
        &[
            "-n",
            &ns,
            "get",
            "secret",
            "db",
            "-o",
            "jsonpath={.data.password}",
        ],
    );
    assert_eq!(read.success(), encoded);
    // A write with the value in the body, rejected with it quoted in the message.
    let bad = kubectl_as_stdin(
        server,
        &snoop,
        &["-n", &ns, "create", "-f", "-"],
        &format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: bad}}\ndata: {{password: \"{plain}!\"}}\n"),
    );
    bad.failure();

    let audit_path = server.dir.join("audit.log");
    let lines = || -> Vec<Value> {
        std::fs::read_to_string(&audit_path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let snoop_name = format!("system:serviceaccount:{ns}:snoop");
    let events = lines();
    let mine = |e: &&Value| e["objectRef"]["namespace"] == ns.as_str();
    let forbidden = events
        .iter()
        .filter(mine)
        .find(|e| e["user"]["username"] == snoop_name.as_str() && e["responseStatus"]["code"] == 403)
        .expect("the forbidden read is audited");
    assert_eq!(forbidden["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(forbidden["kind"], "Event");
    assert_eq!(forbidden["level"], "Metadata");
    assert_eq!(forbidden["stage"], "ResponseComplete");
    assert_eq!(forbidden["verb"], "get");
    assert_eq!(
        forbidden["requestURI"],
        format!("/api/v1/namespaces/{ns}/secrets/db")
    );
    assert_eq!(
        forbidden["objectRef"],
        json!({"resource": "secrets", "namespace": ns, "name": "db", "apiVersion": "v1"})
    );
    assert_eq!(forbidden["sourceIPs"], json!(["127.0.0.1"]));
    assert!(forbidden["userAgent"].as_str().unwrap().starts_with("kubectl/"));
    assert_eq!(
        forbidden["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert!(
        forbidden["responseStatus"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot get resource")
    );
    assert!(
        forbidden["user"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:serviceaccounts"))
    );
    assert!(
        forbidden["requestReceivedTimestamp"]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .is_ok()
    );
    let allowed = events
        .iter()
        .filter(mine)
        .find(|e| {
            e["user"]["username"] == snoop_name.as_str()
                && e["responseStatus"]["code"] == 200
                && e["verb"] == "get"
        })
        .expect("the allowed read is audited");
    assert_eq!(
        allowed["annotations"]["authorization.k8s.io/reason"],
        format!(
            "RBAC: allowed by RoleBinding \"snoop-edit/{ns}\" of ClusterRole \"edit\" to ServiceAccount \"snoop/{ns}\""
        )
    );
    assert!(
        events
            .iter()
            .filter(mine)
            .any(|e| e["responseStatus"]["code"] == 401 && e["user"] == json!({}))
    );
    let created = events
        .iter()
        .filter(mine)
        .find(|e| {
            e["verb"] == "create"
                && e["objectRef"]["resource"] == "secrets"
                && e["responseStatus"]["code"] == 201
        })
        .expect("the admin's create is audited");
    assert!(created.get("requestObject").is_none() && created.get("responseObject").is_none());
    // Watches are recorded when they start.
    let mut watch = std::process::Command::new("kubectl")
        .env("KUBECONFIG", &server.kubeconfig)
        .args(["-n", &ns, "get", "configmaps", "--watch", "--request-timeout=2s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !lines()
        .iter()
        .filter(mine)
        .any(|e| e["verb"] == "watch" && e["stage"] == "ResponseStarted")
    {
        assert!(std::time::Instant::now() < deadline, "the watch was not audited");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = watch.kill();
    let _ = watch.wait();

    // Neither the audit log nor the server's debug log holds a token, a client key or Secret
    // data (plain or base64).
    let server_log = std::fs::read_to_string(server.dir.join("server.log")).unwrap();
    let audit_log = std::fs::read_to_string(&audit_path).unwrap();
    assert!(server_log.contains("DEBUG"), "the server logs at debug level");
    for (name, text) in [("server log", &server_log), ("audit log", &audit_log)] {
        for (what, secret) in [
            ("the admin token", server.token.as_str()),
            ("a ServiceAccount token", token.as_str()),
            ("a wrong token", "definitely-wrong-token-value"),
            ("the Secret's value", plain.as_str()),
            ("the Secret's value in base64", encoded.as_str()),
        ] {
            assert!(!text.contains(secret), "the {name} contains {what}");
        }
        assert!(!text.contains("PRIVATE KEY"), "the {name} contains a private key");
    }
}
