//! The kubeconfig written for clients after the listener is bound.

use std::path::Path;

use base64::Engine;
use serde_json::json;

/// Renders a kubeconfig for `server` (https URL), trusting `ca_pem`, authenticating with
/// `token`, with one context named `context`.
pub fn render(server: &str, ca_pem: &[u8], token: &str, context: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}],
        "current-context": context,
        "preferences": {},
    });
    serde_yaml::to_string(&config).unwrap_or_default()
}

/// Writes the kubeconfig atomically with mode 0600 (it holds a token).
pub fn write(path: &Path, contents: &str) -> std::io::Result<()> {
    crate::fsutil::write_atomic(path, contents.as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn renders_a_loadable_kubeconfig() {
        let text = render("https://127.0.0.1:6443", b"PEM", "tok", "flotilla");
        let parsed: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(parsed["current-context"].as_str(), Some("flotilla"));
        assert_eq!(parsed["users"][0]["user"]["token"].as_str(), Some("tok"));
        assert_eq!(
            parsed["clusters"][0]["cluster"]["server"].as_str(),
            Some("https://127.0.0.1:6443")
        );
    }
}
