//! Authentication, as kube-apiserver does it: client certificates signed by the server's client
//! CA (CN is the user, O the groups; see [`crate::clientcert`]), bearer tokens from the static
//! token file (`--token-auth-file`: one `token,user,uid,"group1,group2"` per line) and
//! ServiceAccount tokens the server issued (see [`crate::serviceaccount`]). Every authenticated
//! user is in `system:authenticated`; a request without credentials is `system:anonymous` (group
//! `system:unauthenticated`) when `--anonymous-auth` is on, else 401. Credentials that are
//! presented but invalid are always 401. Tokens are compared in constant time and never logged.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use rand::Rng;

/// The group of every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of anonymous requests.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group whose members may do anything (authorization is not consulted).
pub const MASTERS: &str = "system:masters";

/// The authenticated caller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// User UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes (`authentication.kubernetes.io/credential-id`, bound pod).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> User {
        User {
            name: ANONYMOUS.to_owned(),
            groups: vec![UNAUTHENTICATED.to_owned()],
            ..User::default()
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Adds `system:authenticated` unless present (kube's authenticated group adder).
    pub fn authenticated(mut self) -> User {
        if !self.in_group(AUTHENTICATED) {
            self.groups.push(AUTHENTICATED.to_owned());
        }
        self
    }

    /// The `user` object of SubjectAccessReview status, audit events and SelfSubjectReview.
    pub fn to_json(&self) -> serde_json::Value {
        let mut user = serde_json::json!({"username": self.name});
        if !self.uid.is_empty() {
            user["uid"] = serde_json::json!(self.uid);
        }
        if !self.groups.is_empty() {
            user["groups"] = serde_json::json!(self.groups);
        }
        if !self.extra.is_empty() {
            user["extra"] = serde_json::json!(self.extra);
        }
        user
    }
}

/// Why a request was not authenticated (for the server's debug log; never holds a token).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthnError {
    /// No credentials and anonymous requests are off.
    #[error("no credentials and anonymous requests are disabled (--anonymous-auth=false)")]
    NoCredentials,
    /// A bearer token no authenticator accepts.
    #[error("invalid bearer token: {0}")]
    InvalidToken(String),
    /// A client certificate that does not verify against the client CA.
    #[error("invalid client certificate: {0}")]
    InvalidCertificate(String),
}

/// What the TLS layer learned about the client's certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ClientCertificate {
    /// None presented.
    #[default]
    None,
    /// Verified against the client CA: the user it names.
    Verified(User),
    /// Presented but not verified (unknown CA, expired, not for client auth, unparsable).
    Invalid(String),
}

/// Every way a request can authenticate.
pub struct Authenticator {
    /// Static tokens.
    pub tokens: Tokens,
    /// ServiceAccount token issuer and verifier.
    pub service_accounts: std::sync::Arc<crate::serviceaccount::Issuer>,
    /// Whether requests without credentials are served as `system:anonymous`.
    pub anonymous: bool,
}

impl Authenticator {
    /// The user of a request: its verified client certificate, else its bearer token (static,
    /// then ServiceAccount), else anonymous when allowed. Presented but invalid credentials fail
    /// even when anonymous requests are allowed, as in kube-apiserver.
    pub fn authenticate(
        &self,
        api: &crate::ops::Api,
        certificate: &ClientCertificate,
        authorization: Option<&str>,
    ) -> Result<Arc<User>, AuthnError> {
        if let ClientCertificate::Verified(user) = certificate {
            return Ok(Arc::new(user.clone().authenticated()));
        }
        if let Some(token) = bearer_token(authorization) {
            if let Some(user) = self.tokens.authenticate(token) {
                return Ok(Arc::new(user.clone().authenticated()));
            }
            // Already in `system:authenticated`, and shared by every request with the token.
            return self
                .service_accounts
                .authenticate(api, token)
                .map_err(AuthnError::InvalidToken);
        }
        if let ClientCertificate::Invalid(why) = certificate {
            return Err(AuthnError::InvalidCertificate(why.clone()));
        }
        if self.anonymous {
            Ok(Arc::new(User::anonymous()))
        } else {
            Err(AuthnError::NoCredentials)
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive);
/// None for other schemes and empty tokens, which kube treats as no token.
pub fn bearer_token(header: Option<&str>) -> Option<&str> {
    let header = header?.trim();
    let (scheme, token) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// Known tokens.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    by_token: HashMap<String, User>,
}

impl Tokens {
    /// Parses a token CSV file's contents.
    pub fn parse(contents: &str) -> anyhow::Result<Tokens> {
        let mut by_token = HashMap::new();
        for (i, line) in contents.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields = split_csv(line);
            if fields.len() < 3 {
                bail!(
                    "token file line {}: expected token,user,uid[,\"group1,group2\"], found {} column(s)",
                    i + 1,
                    fields.len()
                );
            }
            if fields[0].is_empty() {
                bail!("token file line {}: the token is empty", i + 1);
            }
            let groups = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            by_token.insert(
                fields[0].clone(),
                User {
                    name: fields[1].clone(),
                    uid: fields[2].clone(),
                    groups,
                    extra: BTreeMap::new(),
                },
            );
        }
        Ok(Tokens { by_token })
    }

    /// Loads the token file, or creates it with one random admin token when `create` is set
    /// and it does not exist.
    pub fn load_or_create(path: &Path, create: bool) -> anyhow::Result<Tokens> {
        if !path.exists() && create {
            let token = random_token();
            let contents = format!("{token},admin,admin,\"system:masters\"\n");
            crate::fsutil::write_atomic(path, contents.as_bytes(), 0o600)
                .with_context(|| format!("writing the token file {}", path.display()))?;
        }
        let contents = std::fs::read_to_string(path)
            .with_context(|| format!("reading the token file {} (--token-auth-file)", path.display()))?;
        let tokens = Tokens::parse(&contents).with_context(|| format!("parsing {}", path.display()))?;
        if tokens.by_token.is_empty() {
            bail!("the token file {} has no tokens", path.display());
        }
        Ok(tokens)
    }

    /// The user a bearer token belongs to.
    pub fn authenticate(&self, token: &str) -> Option<&User> {
        // Constant-time comparison against every token, so timing reveals nothing.
        let mut found = None;
        for (known, user) in &self.by_token {
            if constant_time_eq(known.as_bytes(), token.as_bytes()) {
                found = Some(user);
            }
        }
        found
    }

    /// A token of a member of `system:masters` (or the first token), for the kubeconfig.
    pub fn admin_token(&self) -> Option<&str> {
        let mut entries: Vec<(&String, &User)> = self.by_token.iter().collect();
        entries.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        entries
            .iter()
            .find(|(_, u)| u.groups.iter().any(|g| g == "system:masters"))
            .or(entries.first())
            .map(|(t, _)| t.as_str())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Splits one CSV line, honouring double quotes.
fn split_csv(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut cur).trim().to_owned()),
            other => cur.push(other),
        }
    }
    fields.push(cur.trim().to_owned());
    fields
}

/// A random 32-character token.
pub fn random_token() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..32)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_kube_apiserver_token_files() {
        let tokens = Tokens::parse("# comment\nabc,alice,1,\"system:masters,dev\"\n\ndef,bob,2\n").unwrap();
        let alice = tokens.authenticate("abc").unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, vec!["system:masters", "dev"]);
        assert_eq!(tokens.authenticate("def").unwrap().groups, Vec::<String>::new());
        assert!(tokens.authenticate("nope").is_none());
        assert!(tokens.authenticate("").is_none());
        assert_eq!(tokens.admin_token(), Some("abc"));
    }

    #[test]
    fn bearer_tokens_are_taken_from_the_authorization_header() {
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some("BEARER abc")), Some("abc"));
        assert_eq!(bearer_token(Some("Bearer ")), None);
        assert_eq!(bearer_token(Some("Basic YWxhZGRpbjpvcGVu")), None);
        assert_eq!(bearer_token(Some("abc")), None);
        assert_eq!(bearer_token(None), None);
    }

    #[test]
    fn users_join_the_authenticated_group_once() {
        let user = User {
            name: "a".into(),
            groups: vec![AUTHENTICATED.into(), "dev".into()],
            ..User::default()
        };
        assert_eq!(user.clone().authenticated().groups, user.groups);
        assert_eq!(User::anonymous().groups, vec![UNAUTHENTICATED]);
        assert!(!User::anonymous().in_group(AUTHENTICATED));
        assert_eq!(
            User::default().authenticated().to_json(),
            serde_json::json!({"username": "", "groups": [AUTHENTICATED]})
        );
    }

    #[test]
    fn rejects_malformed_lines() {
        let err = Tokens::parse("onlytoken,user\n").unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
        assert!(Tokens::parse(",user,uid\n").is_err());
    }

    #[test]
    fn creates_a_token_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        let first = Tokens::load_or_create(&path, true).unwrap();
        let token = first.admin_token().unwrap().to_owned();
        assert_eq!(token.len(), 32);
        let again = Tokens::load_or_create(&path, true).unwrap();
        assert_eq!(again.admin_token(), Some(token.as_str()));
        assert!(Tokens::load_or_create(&dir.path().join("missing.csv"), false).is_err());
    }
}
