//! ServiceAccount tokens, as kube-apiserver issues and checks them: the TokenRequest
//! subresource (`POST .../serviceaccounts/<name>/token`, what `kubectl create token` calls)
//! signs a JWT (ES256) with a key kept under the data dir; the token names the ServiceAccount
//! and its uid (and optionally a Pod or Secret it is bound to), carries audiences and an
//! expiry, and authenticates as `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts`
//! and `system:serviceaccounts:<ns>` only while that same ServiceAccount (same uid) exists: a
//! deleted and re-created ServiceAccount invalidates every token issued before.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use parking_lot::Mutex;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::User;
use crate::errors::{ApiError, ApiResult, Cause};
use crate::ops::Api;

/// kube-apiserver's usual `--service-account-issuer`.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// A TokenRequest without `expirationSeconds` gets one hour.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime a TokenRequest may ask for (kube: 10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest lifetime a TokenRequest may ask for (kube: 2^32 seconds).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// Clock skew tolerated on `exp`, `nbf` and `iat` (go-jose's default leeway, which kube uses).
pub const LEEWAY_SECONDS: i64 = 60;
/// The group of every ServiceAccount.
pub const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// Verified tokens remembered (their signature is not checked again; expiry and the
/// ServiceAccount's uid are).
const CACHE_LIMIT: usize = 4096;

/// `system:serviceaccount:<namespace>:<name>`.
pub fn user_name(namespace: &str, name: &str) -> String {
    format!("{USER_NAME_PREFIX}{namespace}:{name}")
}

/// What every ServiceAccount's user name begins with ([`user_name`]).
const USER_NAME_PREFIX: &str = "system:serviceaccount:";

/// Whether `user` is [`user_name`]`(namespace, name)`, without building that name (RBAC asks
/// this of every ServiceAccount subject of every binding it visits, for every request).
pub fn is_user_name(user: &str, namespace: &str, name: &str) -> bool {
    user.strip_prefix(USER_NAME_PREFIX)
        .and_then(|rest| rest.strip_prefix(namespace))
        .and_then(|rest| rest.strip_prefix(':'))
        == Some(name)
}

/// A name and uid in the `kubernetes.io` claim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectClaim {
    /// Object name.
    pub name: String,
    /// Object uid.
    pub uid: String,
}

/// The private `kubernetes.io` claim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount.
    pub serviceaccount: ObjectClaim,
    /// The Pod the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectClaim>,
    /// The Secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectClaim>,
}

/// The claims of a ServiceAccount token.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer (`--service-account-issuer`).
    pub iss: String,
    /// `system:serviceaccount:<ns>:<name>`.
    pub sub: String,
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry (Unix seconds).
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// Not before.
    pub nbf: i64,
    /// Token id (recorded as the user's credential id).
    pub jti: String,
    /// Which ServiceAccount (and bound object).
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

/// Signs and verifies ServiceAccount tokens.
pub struct Issuer {
    key: EcdsaKeyPair,
    public_key: Vec<u8>,
    key_id: String,
    issuer: String,
    audiences: Vec<String>,
    max_expiration: Option<i64>,
    rng: SystemRandom,
    /// Tokens whose signature, issuer, audiences and subject were verified, keyed by the token
    /// itself: a hit is an exact match, and looking it up costs a SipHash of the token where a
    /// SHA-256 digest of it was about 6% of a busy control plane's instructions. Held in memory
    /// only (the request carried it there); never logged, never in `Debug`.
    verified: Mutex<HashMap<Box<str>, Arc<Verified>>>,
    /// What authentication reads of a token's ServiceAccount (or bound object) — uid and whether
    /// it is being deleted — by store key, with the revision it was read at: every request
    /// with a token checks it, and decoding the stored object each time was a measurable part
    /// of a busy control plane's CPU.
    holders: Mutex<HashMap<String, Holder>>,
}

/// A token [`Issuer::verified`] holds: its claims, the store keys its requests check and the
/// user it authenticates, built once (a service sends the same token with every request, and
/// formatting the keys and building the user each time was a visible part of a busy control
/// plane's CPU).
struct Verified {
    claims: Claims,
    /// The ServiceAccount's store key.
    service_account: String,
    /// The bound pod's and secret's (`pods`, `secrets`): resource, store key, name and uid.
    bound: Vec<(&'static str, String, String, String)>,
    /// The user, in `system:authenticated`.
    user: Arc<User>,
}

impl Verified {
    fn new(claims: Claims) -> Verified {
        let k = &claims.kubernetes;
        let key = |resource: &str, name: &str| format!("/registry/core/{resource}/{}/{name}", k.namespace);
        let bound = [("pods", &k.pod), ("secrets", &k.secret)]
            .into_iter()
            .filter_map(|(resource, bound)| {
                let bound = bound.as_ref()?;
                Some((
                    resource,
                    key(resource, &bound.name),
                    bound.name.clone(),
                    bound.uid.clone(),
                ))
            })
            .collect();
        let mut extra = BTreeMap::new();
        extra.insert(
            "authentication.kubernetes.io/credential-id".to_owned(),
            vec![format!("JTI={}", claims.jti)],
        );
        if let Some(pod) = &k.pod {
            extra.insert(
                "authentication.kubernetes.io/pod-name".to_owned(),
                vec![pod.name.clone()],
            );
            extra.insert(
                "authentication.kubernetes.io/pod-uid".to_owned(),
                vec![pod.uid.clone()],
            );
        }
        let user = User {
            name: claims.sub.clone(),
            uid: k.serviceaccount.uid.clone(),
            groups: vec![
                ALL_SERVICE_ACCOUNTS.to_owned(),
                format!("{ALL_SERVICE_ACCOUNTS}:{}", k.namespace),
            ],
            extra,
        }
        .authenticated();
        Verified {
            service_account: key("serviceaccounts", &k.serviceaccount.name),
            bound,
            user: Arc::new(user),
            claims,
        }
    }
}

/// [`Issuer::holders`]' record of one object.
#[derive(Clone)]
struct Holder {
    mod_revision: u64,
    uid: String,
    deleting: bool,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.issuer)
            .field("key_id", &self.key_id)
            .field("audiences", &self.audiences)
            .finish_non_exhaustive()
    }
}

fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

impl Issuer {
    /// Loads the signing key (an ECDSA P-256 PKCS#8 PEM), creating it first when `create` is
    /// set and it does not exist. `audiences` empty means `[issuer]` (kube's `--api-audiences`
    /// default); `max_expiration` caps the lifetime TokenRequests get.
    pub fn load_or_create(
        path: &Path,
        create: bool,
        issuer: &str,
        audiences: &[String],
        max_expiration: Option<i64>,
    ) -> anyhow::Result<Issuer> {
        let rng = SystemRandom::new();
        if create && !path.exists() {
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                .map_err(|_| anyhow::anyhow!("generating the ServiceAccount signing key"))?;
            crate::fsutil::write_atomic(path, pem_encode("PRIVATE KEY", pkcs8.as_ref()).as_bytes(), 0o600)
                .with_context(|| format!("writing the ServiceAccount signing key {}", path.display()))?;
        }
        let pem = std::fs::read_to_string(path).with_context(|| {
            format!(
                "reading the ServiceAccount signing key {} (--service-account-signing-key-file)",
                path.display()
            )
        })?;
        let b64: String = pem
            .lines()
            .skip_while(|l| !l.starts_with("-----BEGIN PRIVATE KEY-----"))
            .skip(1)
            .take_while(|l| !l.starts_with("-----END"))
            .collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .with_context(|| format!("{}: not a PEM \"PRIVATE KEY\" (PKCS#8)", path.display()))?;
        if der.is_empty() {
            bail!(
                "{}: no \"PRIVATE KEY\" block; the ServiceAccount signing key must be an ECDSA P-256 key in PKCS#8 PEM",
                path.display()
            );
        }
        let key = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng).map_err(
            |e| {
                anyhow::anyhow!(
                    "{}: not an ECDSA P-256 PKCS#8 key ({e}); the ServiceAccount signing key must be one",
                    path.display()
                )
            },
        )?;
        let public_key = key.public_key().as_ref().to_vec();
        let key_id = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &public_key));
        let audiences = if audiences.is_empty() {
            vec![issuer.to_owned()]
        } else {
            audiences.to_vec()
        };
        Ok(Issuer {
            key,
            public_key,
            key_id,
            issuer: issuer.to_owned(),
            audiences,
            max_expiration: max_expiration.filter(|m| *m > 0),
            rng,
            verified: Mutex::new(HashMap::new()),
            holders: Mutex::new(HashMap::new()),
        })
    }

    /// The `iss` of issued tokens.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The audiences this server accepts (and gives tokens that ask for none).
    pub fn audiences(&self) -> &[String] {
        &self.audiences
    }

    /// A signed JWT carrying `claims`.
    pub fn sign(&self, claims: &Claims) -> anyhow::Result<String> {
        let header = json!({"alg": "ES256", "kid": self.key_id});
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header)?),
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims)?)
        );
        let signature = self
            .key
            .sign(&self.rng, signing_input.as_bytes())
            .map_err(|_| anyhow::anyhow!("signing a ServiceAccount token"))?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }

    /// The claims of `token` if its signature, issuer, audiences and lifetime hold at `now`
    /// (Unix seconds). The error says which check failed (it never contains the token).
    pub fn verify(&self, token: &str, now: i64) -> Result<Claims, String> {
        self.verified(token, now).map(|v| v.claims.clone())
    }

    /// [`Issuer::verify`], answered from [`Issuer::verified`] once the token has been verified.
    fn verified(&self, token: &str, now: i64) -> Result<Arc<Verified>, String> {
        let cached = self.verified.lock().get(token).cloned();
        let verified = match cached {
            Some(verified) => verified,
            None => {
                let verified = Arc::new(Verified::new(self.verify_signature(token)?));
                let mut cache = self.verified.lock();
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
                cache.insert(token.into(), verified.clone());
                verified
            }
        };
        check_lifetime(&verified.claims, now)?;
        Ok(verified)
    }

    fn verify_signature(&self, token: &str) -> Result<Claims, String> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWT".to_owned());
        };
        let decode = |part: &str, what: &str| {
            URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| format!("the JWT {what} is not base64url"))
        };
        let header: Value = serde_json::from_slice(&decode(header, "header")?)
            .map_err(|_| "the JWT header is not JSON".to_owned())?;
        if header["alg"] != "ES256" {
            return Err(format!("unsupported JWT algorithm {}", header["alg"]));
        }
        let signature = decode(signature, "signature")?;
        let signing_input_len = token.len() - token.rsplit('.').next().map_or(0, str::len) - 1;
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &self.public_key)
            .verify(&token.as_bytes()[..signing_input_len], &signature)
            .map_err(|_| "the token's signature does not verify with the ServiceAccount key".to_owned())?;
        let claims: Claims = serde_json::from_slice(&decode(payload, "payload")?)
            .map_err(|e| format!("the token's claims are not a ServiceAccount token's: {e}"))?;
        if claims.iss != self.issuer {
            return Err(format!("issuer {:?} is not {:?}", claims.iss, self.issuer));
        }
        if !claims.aud.iter().any(|a| self.audiences.contains(a)) {
            return Err(format!(
                "token audiences {:?} is invalid for the target audiences {:?}",
                claims.aud, self.audiences
            ));
        }
        let expected = user_name(
            &claims.kubernetes.namespace,
            &claims.kubernetes.serviceaccount.name,
        );
        if claims.sub != expected {
            return Err(format!(
                "subject {:?} does not name the ServiceAccount",
                claims.sub
            ));
        }
        Ok(claims)
    }

    /// The user of a ServiceAccount token, in `system:authenticated`: valid (see
    /// [`Issuer::verify`]) and issued for the ServiceAccount (and bound object) that exists now
    /// with the same uid.
    pub fn authenticate(&self, api: &Api, token: &str) -> Result<Arc<User>, String> {
        if token.bytes().filter(|&b| b == b'.').count() != 2 {
            return Err("not a known static token, and not a JWT".to_owned());
        }
        let verified = self.verified(token, jiff::Timestamp::now().as_second())?;
        let k = &verified.claims.kubernetes;
        let current_uid = |key: &str| -> Option<(String, bool)> {
            let kv = api.store.get(key)?;
            if let Some(held) = self.holders.lock().get(key)
                && held.mod_revision == kv.mod_revision
            {
                return Some((held.uid.clone(), held.deleting));
            }
            let obj = crate::objects::decode_stored(&kv.value, kv.mod_revision);
            let held = Holder {
                mod_revision: kv.mod_revision,
                uid: crate::objects::meta_str(&obj, "uid")
                    .unwrap_or_default()
                    .to_owned(),
                deleting: crate::objects::is_deleting(&obj),
            };
            let answer = (held.uid.clone(), held.deleting);
            let mut holders = self.holders.lock();
            if holders.len() >= CACHE_LIMIT {
                holders.clear();
            }
            holders.insert(key.to_owned(), held);
            Some(answer)
        };
        match current_uid(&verified.service_account) {
            None => {
                return Err(format!(
                    "serviceaccounts \"{}\" not found in namespace {}",
                    k.serviceaccount.name, k.namespace
                ));
            }
            Some((uid, _)) if uid != k.serviceaccount.uid => {
                return Err(format!(
                    "service account UID ({uid}) does not match claim ({})",
                    k.serviceaccount.uid
                ));
            }
            Some((_, true)) => {
                return Err(format!(
                    "service account {}/{} has been deleted",
                    k.namespace, k.serviceaccount.name
                ));
            }
            Some(_) => {}
        }
        for (resource, key, name, bound_uid) in &verified.bound {
            match current_uid(key) {
                Some((uid, false)) if uid == *bound_uid => {}
                _ => {
                    return Err(format!(
                        "the {resource} object {}/{name} the token is bound to no longer exists",
                        k.namespace
                    ));
                }
            }
        }
        Ok(verified.user.clone())
    }

    /// Serves `POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`: validates the
    /// TokenRequest `body` like kube-apiserver and answers it with a signed token.
    pub fn token_request(&self, api: &Api, namespace: &str, name: &str, body: &Value) -> ApiResult<Value> {
        let invalid =
            |causes: Vec<Cause>| ApiError::invalid("authentication.k8s.io", "TokenRequest", name, causes);
        if let Some(body_name) = body["metadata"]["name"].as_str().filter(|n| !n.is_empty())
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the TokenRequest ({body_name}) does not match the ServiceAccount on the URL ({name})"
            )));
        }
        let spec = &body["spec"];
        let requested = match &spec["expirationSeconds"] {
            Value::Null => DEFAULT_EXPIRATION_SECONDS,
            v => v.as_i64().ok_or_else(|| {
                invalid(vec![Cause::invalid(
                    "spec.expirationSeconds",
                    v,
                    "must be an integer number of seconds",
                )])
            })?,
        };
        if requested < MIN_EXPIRATION_SECONDS {
            return Err(invalid(vec![Cause::invalid(
                "spec.expirationSeconds",
                &json!(requested),
                "may not specify a duration less than 10 minutes",
            )]));
        }
        if requested > MAX_EXPIRATION_SECONDS {
            return Err(invalid(vec![Cause::invalid(
                "spec.expirationSeconds",
                &json!(requested),
                "may not specify a duration larger than 2^32 seconds",
            )]));
        }
        let audiences: Vec<String> = match &spec["audiences"] {
            Value::Null => vec![],
            Value::Array(items) => items
                .iter()
                .map(|a| a.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    invalid(vec![Cause::invalid(
                        "spec.audiences",
                        &spec["audiences"],
                        "must be a list of strings",
                    )])
                })?,
            other => {
                return Err(invalid(vec![Cause::invalid(
                    "spec.audiences",
                    other,
                    "must be a list of strings",
                )]));
            }
        };
        let audiences = if audiences.is_empty() {
            self.audiences.clone()
        } else {
            audiences
        };
        let sa_key = format!("/registry/core/serviceaccounts/{namespace}/{name}");
        let sa = api
            .store
            .get(&sa_key)
            .map(|kv| crate::objects::decode_stored(&kv.value, kv.mod_revision))
            .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
        if crate::objects::is_deleting(&sa) {
            return Err(ApiError::forbidden(
                "",
                "serviceaccounts",
                name,
                "the ServiceAccount is being deleted",
            ));
        }
        let mut kubernetes = KubernetesClaims {
            namespace: namespace.to_owned(),
            serviceaccount: ObjectClaim {
                name: name.to_owned(),
                uid: crate::objects::meta_str(&sa, "uid")
                    .unwrap_or_default()
                    .to_owned(),
            },
            pod: None,
            secret: None,
        };
        let bound = &spec["boundObjectRef"];
        if !bound.is_null() {
            let kind = bound["kind"].as_str().unwrap_or_default();
            let resource = match kind {
                "Pod" => "pods",
                "Secret" => "secrets",
                _ => {
                    return Err(invalid(vec![Cause::unsupported(
                        "spec.boundObjectRef.kind",
                        &bound["kind"],
                        &["Pod", "Secret"],
                    )]));
                }
            };
            let bound_name = bound["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| invalid(vec![Cause::required("spec.boundObjectRef.name", "")]))?;
            let object = api
                .store
                .get(&format!("/registry/core/{resource}/{namespace}/{bound_name}"))
                .map(|kv| crate::objects::decode_stored(&kv.value, kv.mod_revision))
                .ok_or_else(|| ApiError::not_found("", resource, bound_name))?;
            let uid = crate::objects::meta_str(&object, "uid")
                .unwrap_or_default()
                .to_owned();
            if let Some(wanted) = bound["uid"].as_str().filter(|u| !u.is_empty())
                && wanted != uid
            {
                return Err(ApiError::conflict(
                    "",
                    resource,
                    bound_name,
                    &format!(
                        "the UID in the bound object reference ({wanted}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
                    ),
                ));
            }
            let claim = Some(ObjectClaim {
                name: bound_name.to_owned(),
                uid,
            });
            if kind == "Pod" {
                kubernetes.pod = claim;
            } else {
                kubernetes.secret = claim;
            }
        }
        let expiration = match self.max_expiration {
            Some(max) if requested > max => max,
            _ => requested,
        };
        let now = jiff::Timestamp::now().as_second();
        let claims = Claims {
            iss: self.issuer.clone(),
            sub: user_name(namespace, name),
            aud: audiences.clone(),
            exp: now + expiration,
            iat: now,
            nbf: now,
            jti: crate::objects::new_uid(),
            kubernetes,
        };
        let token = self
            .sign(&claims)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let expires = jiff::Timestamp::from_second(claims.exp)
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default();
        let mut spec_out = json!({"audiences": audiences, "expirationSeconds": expiration});
        if !bound.is_null() {
            spec_out["boundObjectRef"] = bound.clone();
        }
        tracing::info!(
            serviceaccount = %format!("{namespace}/{name}"),
            expiration_seconds = expiration,
            jti = %claims.jti,
            "issued a ServiceAccount token"
        );
        Ok(json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": crate::objects::now_rfc3339()},
            "spec": spec_out,
            "status": {"token": token, "expirationTimestamp": expires},
        }))
    }
}

fn check_lifetime(claims: &Claims, now: i64) -> Result<(), String> {
    if now > claims.exp + LEEWAY_SECONDS {
        return Err("service account token has expired".to_owned());
    }
    if now + LEEWAY_SECONDS < claims.nbf {
        return Err("service account token is not valid yet".to_owned());
    }
    if now + LEEWAY_SECONDS < claims.iat {
        return Err("service account token is issued in the future".to_owned());
    }
    Ok(())
}

/// Parses a Go-style duration (`24h`, `90m`, `1h30m`, `3600s`) into seconds.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let mut total = 0i64;
    let mut number = String::new();
    let mut seen_unit = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(format!("{text:?} is not a duration like 24h, 90m or 3600s")),
        };
        let n: i64 = number
            .parse()
            .map_err(|_| format!("{text:?} is not a duration like 24h, 90m or 3600s"))?;
        total += n * unit;
        number.clear();
        seen_unit = true;
    }
    if !number.is_empty() || !seen_unit {
        return Err(format!(
            "{text:?} is not a duration like 24h, 90m or 3600s (a unit is required)"
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn issuer(dir: &Path) -> Issuer {
        Issuer::load_or_create(&dir.join("sa.key"), true, DEFAULT_ISSUER, &[], None).unwrap()
    }

    #[test]
    fn a_user_name_is_recognised_as_the_built_one_would_be() {
        let users = [
            "system:serviceaccount:ns:sa",
            "system:serviceaccount:ns:sa2",
            "system:serviceaccount:ns2:sa",
            "system:serviceaccount:a:b:c",
            "system:serviceaccount:ns:",
            "system:serviceaccount::sa",
            "system:serviceaccount:ns",
            "system:serviceaccounts:ns:sa",
            "alice",
            "",
        ];
        let subjects = [
            ("ns", "sa"),
            ("ns", "sa2"),
            ("ns2", "sa"),
            ("a", "b:c"),
            ("a:b", "c"),
            ("ns", ""),
            ("", "sa"),
            ("n", "s:sa"),
        ];
        for user in users {
            for (namespace, name) in subjects {
                assert_eq!(
                    is_user_name(user, namespace, name),
                    user == user_name(namespace, name),
                    "{user:?} as {namespace:?}/{name:?}"
                );
            }
        }
    }

    fn claims(now: i64) -> Claims {
        Claims {
            iss: DEFAULT_ISSUER.into(),
            sub: user_name("ns", "sa"),
            aud: vec![DEFAULT_ISSUER.into()],
            exp: now + 600,
            iat: now,
            nbf: now,
            jti: "id".into(),
            kubernetes: KubernetesClaims {
                namespace: "ns".into(),
                serviceaccount: ObjectClaim {
                    name: "sa".into(),
                    uid: "u1".into(),
                },
                pod: None,
                secret: None,
            },
        }
    }

    #[test]
    fn signs_and_verifies_and_reuses_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let first = issuer(dir.path());
        let token = first.sign(&claims(1000)).unwrap();
        assert_eq!(first.verify(&token, 1000).unwrap(), claims(1000));
        // The key is kept: a restarted server accepts tokens it issued before.
        let again = issuer(dir.path());
        assert_eq!(again.verify(&token, 1000).unwrap().jti, "id");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join("sa.key"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn rejects_tampered_foreign_expired_and_misdirected_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let issuer = issuer(dir.path());
        let now = 1_000_000;
        let token = issuer.sign(&claims(now)).unwrap();
        // Within the leeway after expiry it still passes; past it, it does not.
        assert!(issuer.verify(&token, now + 600 + LEEWAY_SECONDS).is_ok());
        assert_eq!(
            issuer.verify(&token, now + 600 + LEEWAY_SECONDS + 1).unwrap_err(),
            "service account token has expired"
        );
        assert_eq!(
            issuer.verify(&token, now - LEEWAY_SECONDS - 1).unwrap_err(),
            "service account token is not valid yet"
        );
        // Another key's token.
        let other_dir = tempfile::tempdir().unwrap();
        let other =
            super::Issuer::load_or_create(&other_dir.path().join("k"), true, DEFAULT_ISSUER, &[], None)
                .unwrap();
        let foreign = other.sign(&claims(now)).unwrap();
        assert!(issuer.verify(&foreign, now).unwrap_err().contains("signature"));
        // A payload swapped under a valid signature.
        let mut forged = claims(now);
        forged.kubernetes.serviceaccount.name = "admin".into();
        forged.sub = user_name("ns", "admin");
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        let parts: Vec<&str> = token.split('.').collect();
        let tampered = format!("{}.{forged_payload}.{}", parts[0], parts[2]);
        assert!(issuer.verify(&tampered, now).unwrap_err().contains("signature"));
        // Wrong audience, wrong issuer, inconsistent subject.
        let mut aud = claims(now);
        aud.aud = vec!["vault".into()];
        assert!(
            issuer
                .verify(&issuer.sign(&aud).unwrap(), now)
                .unwrap_err()
                .contains("audiences")
        );
        let mut iss = claims(now);
        iss.iss = "https://elsewhere".into();
        assert!(
            issuer
                .verify(&issuer.sign(&iss).unwrap(), now)
                .unwrap_err()
                .contains("issuer")
        );
        let mut sub = claims(now);
        sub.sub = "system:serviceaccount:ns:other".into();
        assert!(
            issuer
                .verify(&issuer.sign(&sub).unwrap(), now)
                .unwrap_err()
                .contains("subject")
        );
        // The cache of verified tokens answers exact matches only: with `token` in it, a token
        // that differs in its signature's last character, or has one more, is checked afresh.
        assert!(issuer.verify(&token, now).is_ok());
        let last = token.chars().last().unwrap();
        let changed = format!(
            "{}{}",
            &token[..token.len() - 1],
            if last == 'A' { 'B' } else { 'A' }
        );
        assert!(issuer.verify(&changed, now).unwrap_err().contains("signature"));
        assert!(issuer.verify(&format!("{token}A"), now).is_err());
        assert!(issuer.verify(&token, now).is_ok());
        for garbage in ["", "a.b", "a.b.c", "a.b.c.d", "eyJhbGciOiJub25lIn0.e30."] {
            assert!(issuer.verify(garbage, now).is_err(), "{garbage:?}");
        }
    }

    #[test]
    fn a_key_that_is_not_p256_pkcs8_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.key");
        std::fs::write(&path, "not a key").unwrap();
        let err = Issuer::load_or_create(&path, false, DEFAULT_ISSUER, &[], None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("PRIVATE KEY"), "{err}");
        let missing = Issuer::load_or_create(&dir.path().join("none"), false, DEFAULT_ISSUER, &[], None)
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("--service-account-signing-key-file"),
            "{missing}"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("24h"), Ok(86_400));
        assert_eq!(parse_duration("1h30m"), Ok(5_400));
        assert_eq!(parse_duration("600s"), Ok(600));
        for bad in ["", "10", "1d", "h", "-1h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
