//! Name validation rules (DNS-1123 subdomain/label, DNS-1035 label) with kube-apiserver's
//! messages.

/// kube-apiserver's message for an invalid DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// kube-apiserver's message for an invalid DNS-1123 label.
pub const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
/// kube-apiserver's message for an invalid DNS-1035 label.
pub const DNS1035_LABEL_MESSAGE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Which rule a resource's names follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (most resources).
    Subdomain,
    /// DNS-1123 label (namespaces).
    Label,
    /// DNS-1035 label (services).
    Dns1035,
    /// Any valid path segment (RBAC objects: `system:discovery`).
    PathSegment,
}

/// Checks a name; returns kube-apiserver's error texts.
pub fn check(rule: NameRule, name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                errors.push("must be no more than 253 characters".to_owned());
            }
            if !is_dns1123_subdomain(name) {
                errors.push(DNS1123_SUBDOMAIN_MESSAGE.to_owned());
            }
        }
        NameRule::Label => {
            if name.len() > 63 {
                errors.push("must be no more than 63 characters".to_owned());
            }
            if !label_chars(name) {
                errors.push(DNS1123_LABEL_MESSAGE.to_owned());
            }
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                errors.push(format!("may not be '{name}'"));
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    errors.push(format!("may not contain '{bad}'"));
                }
            }
        }
        NameRule::Dns1035 => {
            if name.len() > 63 {
                errors.push("must be no more than 63 characters".to_owned());
            }
            if !label_chars(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
                errors.push(DNS1035_LABEL_MESSAGE.to_owned());
            }
        }
    }
    errors
}

fn label_chars(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && label_chars(s)
}

/// Dot-separated DNS-1123 labels, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(label_chars)
}

/// A label or annotation key: optional DNS subdomain prefix and a name part.
pub fn check_qualified_name(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && !is_dns1123_subdomain(p)
    {
        return Some(format!("prefix part {DNS1123_SUBDOMAIN_MESSAGE}"));
    }
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then(|| "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_owned())
}

/// A label value: empty, or up to 63 alphanumerics/`-_.` starting and ending alphanumeric.
pub fn check_label_value(value: &str) -> Option<String> {
    let ok = value.is_empty()
        || (value.len() <= 63
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    (!ok).then(|| "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_and_labels() {
        assert!(is_dns1123_subdomain("a.b-c.d1"));
        assert!(!is_dns1123_subdomain("A"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(!is_dns1123_subdomain(""));
        assert!(is_dns1123_label("web-1"));
        assert!(!is_dns1123_label("a.b"));
        assert!(check(NameRule::Subdomain, &"a".repeat(254)).len() == 2);
        assert!(check(NameRule::Dns1035, "1abc").len() == 1);
        assert!(check(NameRule::Label, "ns1").is_empty());
        assert!(check(NameRule::PathSegment, "system:discovery").is_empty());
        assert!(check(NameRule::PathSegment, "Any Thing").is_empty());
        assert_eq!(check(NameRule::PathSegment, ".."), vec!["may not be '..'"]);
        assert_eq!(
            check(NameRule::PathSegment, "a/b%"),
            vec!["may not contain '/'", "may not contain '%'"]
        );
    }

    #[test]
    fn label_keys_and_values() {
        assert!(check_qualified_name("app.kubernetes.io/name").is_none());
        assert!(check_qualified_name("app").is_none());
        assert!(check_qualified_name("Bad_/x").is_some());
        assert!(check_qualified_name("-x").is_some());
        assert!(check_label_value("").is_none());
        assert!(check_label_value("v1.2_3").is_none());
        assert!(check_label_value("bad value").is_some());
    }
}
