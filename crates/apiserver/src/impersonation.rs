//! User impersonation (`kubectl --as`, `--as-group`): the `Impersonate-User`,
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>` headers, each checked
//! with the `impersonate` verb on `users`, `groups`, `serviceaccounts`, `uids` or
//! `userextras/<key>` as kube-apiserver does; the request then runs as the impersonated user.

use http::HeaderMap;

use crate::auth::{ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED, User};
use crate::errors::ApiError;
use crate::rbac::rules::Attributes;
use crate::rbac::{Decision, Index, authorize};
use crate::serviceaccount::ALL_SERVICE_ACCOUNTS;

/// Header naming the user to act as.
pub const USER: &str = "impersonate-user";
/// Header naming a group to act in (repeatable).
pub const GROUP: &str = "impersonate-group";
/// Header naming the uid to act with.
pub const UID: &str = "impersonate-uid";
/// Prefix of headers naming extra attributes.
pub const EXTRA: &str = "impersonate-extra-";

/// One thing to be allowed to impersonate.
fn attributes(resource: &str, group: &str, namespace: &str, name: &str, subresource: &str) -> Attributes {
    Attributes {
        resource_request: true,
        verb: "impersonate".into(),
        api_group: group.into(),
        api_version: "v1".into(),
        namespace: namespace.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: name.into(),
        path: String::new(),
    }
}

fn percent_decode(text: &str) -> String {
    form_urlencoded::parse(format!("k={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// A refused impersonation: the response, and the authorizer's reason for the audit log.
#[derive(Debug)]
pub struct Refused {
    /// 403 (kube's message) or 500 (groups, uid or extras without a user, as kube answers).
    pub error: ApiError,
    /// Why the authorizer said no (often empty).
    pub reason: String,
}

/// The user `requester` acts as, or None without impersonation headers.
pub fn impersonate(
    index: &Index,
    requester: &User,
    headers: &HeaderMap,
) -> Result<Option<User>, Box<Refused>> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect()
    };
    let user = values(USER).into_iter().next();
    let groups = values(GROUP);
    let uid = values(UID).into_iter().next();
    let mut extras: Vec<(String, String)> = Vec::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA)
            && let Ok(value) = value.to_str()
        {
            extras.push((percent_decode(key), value.to_owned()));
        }
    }
    let Some(name) = user else {
        if groups.is_empty() && uid.is_none() && extras.is_empty() {
            return Ok(None);
        }
        let error = ApiError::internal(format!(
            "requested groups {groups:?}, uid {uid:?} or extras without impersonating a user"
        ));
        return Err(Box::new(Refused {
            error,
            reason: String::new(),
        }));
    };
    let mut checks = Vec::new();
    let mut acting = User {
        name: name.clone(),
        ..User::default()
    };
    let service_account = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    match service_account {
        Some((ns, sa)) => {
            checks.push(attributes("serviceaccounts", "", ns, sa, ""));
            if groups.is_empty() {
                acting.groups = vec![
                    ALL_SERVICE_ACCOUNTS.to_owned(),
                    format!("{ALL_SERVICE_ACCOUNTS}:{ns}"),
                ];
            }
        }
        None => checks.push(attributes("users", "", "", &name, "")),
    }
    for group in &groups {
        checks.push(attributes("groups", "", "", group, ""));
        acting.groups.push(group.clone());
    }
    if let Some(uid) = &uid {
        checks.push(attributes("uids", "authentication.k8s.io", "", uid, ""));
        acting.uid = uid.clone();
    }
    for (key, value) in &extras {
        checks.push(attributes("userextras", "authentication.k8s.io", "", value, key));
        acting.extra.entry(key.clone()).or_default().push(value.clone());
    }
    for check in checks {
        if let Decision::Deny(reason) = authorize(index, requester, &check) {
            let error = crate::http::forbidden(requester, &check, &reason);
            return Err(Box::new(Refused { error, reason }));
        }
    }
    if name == ANONYMOUS {
        if !acting.in_group(UNAUTHENTICATED) {
            acting.groups.push(UNAUTHENTICATED.to_owned());
        }
    } else if !acting.in_group(AUTHENTICATED) && !acting.in_group(UNAUTHENTICATED) {
        acting.groups.push(AUTHENTICATED.to_owned());
    }
    Ok(Some(acting))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn index() -> Index {
        Index::from_objects([
            json!({"kind": "ClusterRole", "metadata": {"name": "as-ann"},
                "rules": [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"], "resourceNames": ["ann"]},
                          {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["groups"], "resourceNames": ["devs"]},
                          {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["serviceaccounts"]}]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "b"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "as-ann"},
                "subjects": [{"kind": "User", "name": "bob"}]}),
        ])
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                *k,
                v.parse().unwrap_or_else(|_| http::HeaderValue::from_static("")),
            );
        }
        map
    }

    fn bob() -> User {
        User {
            name: "bob".into(),
            groups: vec![AUTHENTICATED.into()],
            ..User::default()
        }
    }

    #[test]
    fn impersonation_needs_the_impersonate_verb_for_each_part() {
        let index = index();
        assert_eq!(impersonate(&index, &bob(), &headers(&[])).ok(), Some(None));
        let ann = impersonate(&index, &bob(), &headers(&[("impersonate-user", "ann")]))
            .ok()
            .flatten()
            .unwrap_or_default();
        assert_eq!(ann.name, "ann");
        assert_eq!(ann.groups, vec![AUTHENTICATED]);
        let with_group = impersonate(
            &index,
            &bob(),
            &headers(&[("impersonate-user", "ann"), ("impersonate-group", "devs")]),
        )
        .ok()
        .flatten()
        .unwrap_or_default();
        assert_eq!(with_group.groups, vec!["devs", AUTHENTICATED]);
        let sa = impersonate(
            &index,
            &bob(),
            &headers(&[("impersonate-user", "system:serviceaccount:ns:robot")]),
        )
        .ok()
        .flatten()
        .unwrap_or_default();
        assert_eq!(
            sa.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                AUTHENTICATED
            ]
        );

        let denied = impersonate(&index, &bob(), &headers(&[("impersonate-user", "carol")]));
        let Err(refused) = denied else {
            panic!("impersonating carol was allowed")
        };
        assert_eq!(refused.error.code, 403);
        assert_eq!(
            refused.error.message,
            "users \"carol\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
        let masters = impersonate(
            &index,
            &bob(),
            &headers(&[
                ("impersonate-user", "ann"),
                ("impersonate-group", "system:masters"),
            ]),
        );
        assert!(masters.is_err(), "bob may not act in system:masters");
        let groupless = impersonate(&index, &bob(), &headers(&[("impersonate-group", "devs")]));
        assert_eq!(groupless.err().map(|e| e.error.code), Some(500));
    }
}
