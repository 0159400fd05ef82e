//! Container image references: Docker's reference grammar (`github.com/distribution/reference`,
//! v0.6) and the `[registry/]repository[:tag|@digest]` components Karmada's image overrider
//! changes (`pkg/util/imageparser`).
//!
//! ```text
//! reference      := name [ ":" tag ] [ "@" digest ]
//! name           := [ domain "/" ] path
//! domain         := host [ ":" port ]            host: DNS name (letters of either case) or [IPv6]
//! path           := component ( "/" component )*  component: [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
//! tag            := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//! digest         := algorithm ":" hex            algorithm: [A-Za-z][A-Za-z0-9]* ( [-_+.] [A-Za-z][A-Za-z0-9]* )*
//! ```
//!
//! A digest must also be one Karmada can verify: `sha256`, `sha384` or `sha512` with exactly
//! 64, 96 or 128 lowercase hex digits (`github.com/opencontainers/go-digest`). The path after
//! the domain is at most 255 characters.
//!
//! Which part is the registry follows Karmada's `SplitHostname`, not the grammar: the first
//! path component is the registry only if it contains `.` or `:` or is `localhost`
//! (`fictional/nginx` is a repository; `example.com/nginx` has registry `example.com`).
//! A reference with both a tag and a digest keeps only the tag, as Karmada's parser does.

use std::fmt;

/// The longest path (after the domain) a reference may have.
pub const PATH_MAX_LENGTH: usize = 255;

/// Why an image reference does not parse. The messages are Docker's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageReferenceError {
    /// Empty.
    #[error("repository name must have at least one component")]
    Empty,
    /// Would parse if lowercased.
    #[error("repository name must be lowercase")]
    Uppercase,
    /// Does not follow the grammar.
    #[error("invalid reference format")]
    InvalidFormat,
    /// The path is longer than 255 characters.
    #[error("repository name must not be more than 255 characters")]
    TooLong,
    /// The digest's algorithm is not sha256, sha384 or sha512.
    #[error("unsupported digest algorithm")]
    UnsupportedDigest,
    /// The digest's hex part has the wrong length for its algorithm.
    #[error("invalid checksum digest length")]
    DigestLength,
    /// The digest's hex part is not lowercase hex.
    #[error("invalid checksum digest format")]
    DigestFormat,
}

/// An image reference split into the components Karmada's image overrider changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageReference {
    /// The registry host and port (`registry.k8s.io`, `example.com:5000`), or empty.
    pub registry: String,
    /// The repository path (`kube-apiserver`, `library/nginx`).
    pub repository: String,
    /// The tag, or empty.
    pub tag: String,
    /// The digest (`sha256:...`), or empty. Empty whenever `tag` is set.
    pub digest: String,
}

impl ImageReference {
    /// Parses `image` (see the module docs).
    pub fn parse(image: &str) -> Result<Self, ImageReferenceError> {
        let Some(parts) = split_reference(image) else {
            if image.is_empty() {
                return Err(ImageReferenceError::Empty);
            }
            if split_reference(&image.to_lowercase()).is_some() {
                return Err(ImageReferenceError::Uppercase);
            }
            return Err(ImageReferenceError::InvalidFormat);
        };
        if parts.path.len() > PATH_MAX_LENGTH {
            return Err(ImageReferenceError::TooLong);
        }
        if let Some(digest) = parts.digest {
            check_digest(digest)?;
        }
        let (registry, repository) = split_hostname(parts.name);
        let tag = parts.tag.unwrap_or_default().to_owned();
        let digest = if tag.is_empty() {
            parts.digest.unwrap_or_default().to_owned()
        } else {
            String::new()
        };
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }

    /// The tag if set, else the digest (Karmada's `TagOrDigest`).
    pub fn tag_or_digest(&self) -> &str {
        if self.tag.is_empty() {
            &self.digest
        } else {
            &self.tag
        }
    }

    /// Sets the tag (clearing the digest) when `value` is a tag, else the digest (clearing the
    /// tag) when it is a digest; anything else changes nothing (Karmada's `SetTagOrDigest`).
    pub fn set_tag_or_digest(&mut self, value: &str) {
        if is_tag(value) {
            self.tag = value.to_owned();
            self.digest.clear();
        } else if is_digest_syntax(value) {
            self.digest = value.to_owned();
            self.tag.clear();
        }
    }

    /// Removes the tag if set, else the digest (Karmada's `RemoveTagOrDigest`).
    pub fn remove_tag_or_digest(&mut self) {
        if self.tag.is_empty() {
            self.digest.clear();
        } else {
            self.tag.clear();
        }
    }

    /// `registry/repository`, or the repository alone without a registry.
    pub fn full_repository(&self) -> String {
        if self.registry.is_empty() {
            self.repository.clone()
        } else {
            format!("{}/{}", self.registry, self.repository)
        }
    }
}

impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let repository = self.full_repository();
        if !self.tag.is_empty() {
            write!(f, "{repository}:{}", self.tag)
        } else if !self.digest.is_empty() {
            write!(f, "{repository}@{}", self.digest)
        } else {
            f.write_str(&repository)
        }
    }
}

/// A reference's parts as the grammar splits them.
struct Parts<'a> {
    /// `[domain/]path`.
    name: &'a str,
    /// The path the grammar's domain split leaves (the length limit applies to it).
    path: &'a str,
    tag: Option<&'a str>,
    digest: Option<&'a str>,
}

fn split_reference(reference: &str) -> Option<Parts<'_>> {
    let (rest, digest) = match reference.split_once('@') {
        Some((rest, digest)) => {
            if !is_digest_syntax(digest) {
                return None;
            }
            (rest, Some(digest))
        }
        None => (reference, None),
    };
    // A tag holds neither ':' nor '/', and a name holds ':' only before a '/' (a port or an
    // IPv6 host), so a tag is whatever follows the last ':' when no '/' follows it.
    let (name, tag) = match rest.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => {
            if !is_tag(tag) {
                return None;
            }
            (name, Some(tag))
        }
        _ => (rest, None),
    };
    let path = name_path(name)?;
    Some(Parts {
        name,
        path,
        tag,
        digest,
    })
}

/// The path of `name` as the grammar splits it (a leading domain taken when it fits), or
/// `None` when `name` is not `[domain/]path`.
fn name_path(name: &str) -> Option<&str> {
    if let Some((domain, path)) = name.split_once('/')
        && is_domain(domain)
        && is_path(path)
    {
        return Some(path);
    }
    is_path(name).then_some(name)
}

/// Karmada's `SplitHostname`: the first component is the registry when it contains `.` or `:`
/// or is `localhost`.
fn split_hostname(name: &str) -> (&str, &str) {
    match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest),
        _ => ("", name),
    }
}

fn check_digest(digest: &str) -> Result<(), ImageReferenceError> {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return Err(ImageReferenceError::DigestFormat);
    };
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ImageReferenceError::UnsupportedDigest),
    };
    if hex.len() != length {
        return Err(ImageReferenceError::DigestLength);
    }
    if !hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(ImageReferenceError::DigestFormat);
    }
    Ok(())
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
pub fn is_tag(value: &str) -> bool {
    let bytes = value.as_bytes();
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    !bytes.is_empty()
        && bytes.len() <= 128
        && word(&bytes[0])
        && bytes[1..].iter().all(|b| word(b) || *b == b'.' || *b == b'-')
}

/// The digest grammar `algorithm:hex` with at least 32 hex digits (whether Karmada supports
/// the algorithm is checked when a reference is parsed).
pub fn is_digest_syntax(value: &str) -> bool {
    let Some((algorithm, hex)) = value.split_once(':') else {
        return false;
    };
    let components_ok = {
        let mut components = algorithm.split(['-', '_', '+', '.']);
        components.all(|c| {
            let bytes = c.as_bytes();
            !bytes.is_empty()
                && bytes[0].is_ascii_alphabetic()
                && bytes[1..].iter().all(u8::is_ascii_alphanumeric)
        })
    };
    components_ok && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A digest Karmada can verify: `sha256`, `sha384` or `sha512` with the right number of
/// lowercase hex digits.
pub fn is_supported_digest(value: &str) -> bool {
    is_digest_syntax(value) && check_digest(value).is_ok()
}

/// A registry: a DNS name (letters of either case) or a bracketed IPv6 address, with an
/// optional `:port`.
pub fn is_domain(value: &str) -> bool {
    let (host, port) = match value.rsplit_once(':') {
        // A ':' inside brackets is part of the IPv6 address, not a port separator.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (value, None),
    };
    if let Some(port) = port
        && (port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    is_host(host)
}

fn is_host(host: &str) -> bool {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_hexdigit() || b == b':');
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
                && bytes[0] != b'-'
                && bytes[bytes.len() - 1] != b'-'
        })
}

/// A repository path: `/`-separated components of lowercase letters and digits joined by `.`,
/// `_`, `__` or runs of `-`.
pub fn is_path(value: &str) -> bool {
    !value.is_empty() && value.split('/').all(is_path_component)
}

fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        // A separator: ".", "_", "__" or a run of "-", followed by an alphanumeric.
        let start = i;
        match bytes[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if bytes.get(i) == Some(&b'_') {
                    i += 1;
                }
            }
            b'-' => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return false,
        }
        if i == start || !bytes.get(i).copied().is_some_and(alnum) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;

    use super::*;

    const SHA: &str = "sha256:dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276fc9c";

    fn parsed(registry: &str, repository: &str, tag: &str, digest: &str) -> ImageReference {
        ImageReference {
            registry: registry.into(),
            repository: repository.into(),
            tag: tag.into(),
            digest: digest.into(),
        }
    }

    #[test]
    fn components() {
        let cases = [
            ("nginx", parsed("", "nginx", "", "")),
            ("nginx:1.25", parsed("", "nginx", "1.25", "")),
            ("library/nginx:latest", parsed("", "library/nginx", "latest", "")),
            // A first component without '.' or ':' is a repository, not a registry.
            ("fictional/nginx", parsed("", "fictional/nginx", "", "")),
            (
                "registry.k8s.io/kube-apiserver:v1.19.1",
                parsed("registry.k8s.io", "kube-apiserver", "v1.19.1", ""),
            ),
            (
                "fictional.registry.example:10443/karmada/karmada-controller-manager:v1.0.0",
                parsed(
                    "fictional.registry.example:10443",
                    "karmada/karmada-controller-manager",
                    "v1.0.0",
                    "",
                ),
            ),
            ("localhost/app", parsed("localhost", "app", "", "")),
            ("localhost:5000/app:1", parsed("localhost:5000", "app", "1", "")),
            ("[::1]:5000/app", parsed("[::1]:5000", "app", "", "")),
            (&format!("nginx@{SHA}"), parsed("", "nginx", "", SHA)),
            // Tag and digest: Karmada keeps the tag only.
            (&format!("nginx:1.0@{SHA}"), parsed("", "nginx", "1.0", "")),
            // A bare "name:port" is a name with a tag.
            ("localhost:5000", parsed("", "localhost", "5000", "")),
            ("a__b/c-d--e.f_g", parsed("", "a__b/c-d--e.f_g", "", "")),
            ("Registry.Example/app", parsed("Registry.Example", "app", "", "")),
        ];
        for (image, expected) in cases {
            assert_eq!(ImageReference::parse(image).unwrap(), expected, "{image}");
        }
    }

    #[test]
    fn errors() {
        use ImageReferenceError::*;
        let long = "a".repeat(256);
        let cases = [
            ("", Empty),
            ("Nginx", Uppercase),
            ("library/Nginx:1", Uppercase),
            ("nginx:", InvalidFormat),
            ("nginx::1", InvalidFormat),
            ("-nginx", InvalidFormat),
            ("nginx-", InvalidFormat),
            ("nginx/", InvalidFormat),
            ("a___b", InvalidFormat),
            ("nginx:.bad", InvalidFormat),
            ("nginx@sha256:abc", InvalidFormat),
            ("nginx@1@2", InvalidFormat),
            ("nginx with space", InvalidFormat),
            ("registry:abc/app", InvalidFormat),
            (&long, TooLong),
            ("nginx@md5:0123456789abcdef0123456789abcdef", UnsupportedDigest),
            ("nginx@sha256:0123456789abcdef0123456789abcdef", DigestLength),
            (
                "nginx@sha256:DBCC1C35AC38DF41FD2F5E4130B32FFDB93EBAE8B3DBE638C23575912276FC9C",
                DigestFormat,
            ),
        ];
        for (image, expected) in cases {
            assert_eq!(ImageReference::parse(image), Err(expected), "{image}");
        }
        // 255 characters of path is still fine, with a registry in front.
        let ok = format!("example.com/{}", "a".repeat(255));
        assert!(ImageReference::parse(&ok).is_ok());
    }

    #[test]
    fn rendering_and_tag_or_digest() {
        let mut image = ImageReference::parse("example.com/app:1").unwrap();
        assert_eq!(image.to_string(), "example.com/app:1");
        assert_eq!(image.tag_or_digest(), "1");
        image.set_tag_or_digest(SHA);
        assert_eq!(image.to_string(), format!("example.com/app@{SHA}"));
        assert_eq!(image.tag_or_digest(), SHA);
        image.set_tag_or_digest("v2");
        assert_eq!(image.to_string(), "example.com/app:v2");
        // Neither a tag nor a digest: nothing changes.
        image.set_tag_or_digest("not a tag");
        assert_eq!(image.to_string(), "example.com/app:v2");
        image.remove_tag_or_digest();
        assert_eq!(image.to_string(), "example.com/app");
        image.registry.clear();
        assert_eq!(image.to_string(), "app");
        let mut digested = ImageReference::parse(&format!("app@{SHA}")).unwrap();
        digested.remove_tag_or_digest();
        assert_eq!(digested.to_string(), "app");
    }

    #[test]
    fn grammar_predicates() {
        for tag in ["latest", "v1.19.1", "_x", "1", &"a".repeat(128)] {
            assert!(is_tag(tag), "{tag}");
        }
        for tag in ["", ".x", "-x", "a:b", "a/b", &"a".repeat(129)] {
            assert!(!is_tag(tag), "{tag}");
        }
        for domain in [
            "docker.io",
            "example.com:5000",
            "localhost",
            "[::1]",
            "[fe80::1]:443",
            "My-Registry.example",
        ] {
            assert!(is_domain(domain), "{domain}");
        }
        for domain in ["", "-x.io", "x-.io", "a..b", "a:", "a:b", "[]", "[zz]", "a/b"] {
            assert!(!is_domain(domain), "{domain}");
        }
        for path in ["nginx", "library/nginx", "a.b", "a_b", "a__b", "a---b"] {
            assert!(is_path(path), "{path}");
        }
        for path in ["", "Nginx", "a/", "/a", "a..b", "a___b", "a-", "a.-b"] {
            assert!(!is_path(path), "{path}");
        }
        assert!(is_supported_digest(SHA));
        assert!(is_digest_syntax("md5:0123456789abcdef0123456789abcdef"));
        assert!(!is_supported_digest("md5:0123456789abcdef0123456789abcdef"));
        assert!(!is_digest_syntax("sha256:xyz"));
        assert!(!is_digest_syntax("sha256"));
    }
}
