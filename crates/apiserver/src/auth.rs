//! Authentication: kube-apiserver's static token file and bearer tokens.
//!
//! Format (kube-apiserver `--token-auth-file`): one `token,user,uid,"group1,group2"` per line;
//! the groups column is optional. Tokens are compared in constant time and never logged.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, bail};
use rand::Rng;

/// The authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// User UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
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
