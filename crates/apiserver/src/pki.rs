//! TLS material: a self-signed CA and a serving certificate generated on first start (kept in
//! `<data-dir>/pki/` and reused), or user-provided files; the rustls server config (which asks
//! for client certificates when a client CA is configured); and client certificates signed by
//! the generated CA (for tests and tools: CN is the user, O the groups).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// PEM files in use.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// CA certificate (what clients trust).
    pub ca_cert: PathBuf,
    /// Serving certificate chain.
    pub cert: PathBuf,
    /// Serving key.
    pub key: PathBuf,
}

/// Generates (once) the CA and serving certificate under `pki_dir`. The serving certificate
/// is regenerated when the wanted SANs change.
pub fn ensure_self_signed(pki_dir: &Path, extra_sans: &[String]) -> anyhow::Result<TlsFiles> {
    std::fs::create_dir_all(pki_dir).with_context(|| format!("creating {}", pki_dir.display()))?;
    let files = TlsFiles {
        ca_cert: pki_dir.join("ca.crt"),
        cert: pki_dir.join("apiserver.crt"),
        key: pki_dir.join("apiserver.key"),
    };
    let ca_key_path = pki_dir.join("ca.key");
    let sans_path = pki_dir.join("apiserver.sans");
    let mut sans: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    for s in extra_sans {
        if !sans.contains(s) {
            sans.push(s.clone());
        }
    }
    let sans_text = sans.join("\n");

    if !files.ca_cert.exists() || !ca_key_path.exists() {
        let key = KeyPair::generate().context("generating the CA key")?;
        let cert = ca_params().self_signed(&key).context("self-signing the CA")?;
        crate::fsutil::write_atomic(&ca_key_path, key.serialize_pem().as_bytes(), 0o600)?;
        crate::fsutil::write_atomic(&files.ca_cert, cert.pem().as_bytes(), 0o644)?;
        let _ = std::fs::remove_file(&files.cert);
    }
    let current_sans = std::fs::read_to_string(&sans_path).unwrap_or_default();
    if !files.cert.exists() || !files.key.exists() || current_sans != sans_text {
        let ca_key_pem = std::fs::read_to_string(&ca_key_path).context("reading the CA key")?;
        let ca_key = KeyPair::from_pem(&ca_key_pem).context("parsing the CA key")?;
        // The CA's parameters are fixed, so the issuer is rebuilt from them and its key
        // (the subject and key identifier match the stored CA certificate).
        let issuer = Issuer::new(ca_params(), ca_key);
        let key = KeyPair::generate().context("generating the serving key")?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "flotilla-apiserver");
        params.subject_alt_names = sans
            .iter()
            .map(|s| match s.parse::<std::net::IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => s.clone().try_into().map(SanType::DnsName),
            })
            .collect::<Result<_, _>>()
            .context("a --tls-san entry is neither an IP address nor a DNS name")?;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = rcgen::date_time_ymd(2024, 1, 1);
        params.not_after = rcgen::date_time_ymd(2124, 1, 1);
        let cert = params
            .signed_by(&key, &issuer)
            .context("signing the serving certificate")?;
        crate::fsutil::write_atomic(&files.key, key.serialize_pem().as_bytes(), 0o600)?;
        crate::fsutil::write_atomic(&files.cert, cert.pem().as_bytes(), 0o644)?;
        crate::fsutil::write_atomic(&sans_path, sans_text.as_bytes(), 0o644)?;
    }
    Ok(files)
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "flotilla-apiserver-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = rcgen::date_time_ymd(2024, 1, 1);
    params.not_after = rcgen::date_time_ymd(2124, 1, 1);
    params
}

/// ALPN protocols offered: HTTP/2 and HTTP/1.1, as kube-apiserver. `FLOTILLA_APISERVER_HTTP2=0`
/// offers HTTP/1.1 only.
///
/// (HTTP/2 was off by default until 2026-11-27: writes and watch events over it took ~40 ms.
/// That was Nagle's algorithm on clients that do not set `TCP_NODELAY` (kube-rs's and hyper's
/// default connectors; Go sets it) holding a request's DATA frame until the server's delayed
/// ACK of its HEADERS frame, not the server: a client with `TCP_NODELAY` sees the same latency
/// over HTTP/2 as over HTTP/1.1. ADR 0020.)
fn alpn() -> Vec<Vec<u8>> {
    if std::env::var("FLOTILLA_APISERVER_HTTP2").is_ok_and(|v| v == "0") {
        vec![b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    }
}

/// A certificate and key (PEM) for a client named `user` in `group` (if any), signed by the CA
/// under `pki_dir` (which [`ensure_self_signed`] created), valid for `days` days from an hour
/// ago. (rcgen encodes one value per attribute type, so one group: make certificates with
/// several O values with openssl; the server reads them all.)
pub fn issue_client_certificate(
    pki_dir: &Path,
    user: &str,
    group: Option<&str>,
    days: u32,
) -> anyhow::Result<(String, String)> {
    let ca_key_pem = std::fs::read_to_string(pki_dir.join("ca.key")).context("reading the CA key")?;
    let ca_key = KeyPair::from_pem(&ca_key_pem).context("parsing the CA key")?;
    let issuer = Issuer::new(ca_params(), ca_key);
    let key = KeyPair::generate().context("generating the client key")?;
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, user);
    if let Some(group) = group {
        params.distinguished_name.push(DnType::OrganizationName, group);
    }
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let now = std::time::SystemTime::now();
    params.not_before = (now - std::time::Duration::from_secs(3600)).into();
    params.not_after = (now + std::time::Duration::from_secs(u64::from(days) * 86_400)).into();
    let cert = params
        .signed_by(&key, &issuer)
        .context("signing the client certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The TLS server config and, when client certificates are accepted, the verifier that checks
/// a presented chain against the client CA after the handshake.
pub struct ServerTls {
    /// The rustls config.
    pub config: Arc<rustls::ServerConfig>,
    /// Verifies client chains (see [`crate::clientcert::identify`]).
    pub client_verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
}

/// Builds the rustls server config (ring provider, ALPN); with `client_ca`, clients may present
/// a certificate signed by it (optional, as in kube-apiserver with `--client-ca-file`).
pub fn server_config(cert: &Path, key: &Path, client_ca: Option<&Path>) -> anyhow::Result<ServerTls> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing certificates in {}", cert.display()))?;
    if certs.is_empty() {
        bail!("{} holds no certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the private key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client_verifier = match client_ca {
        None => None,
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for ca in CertificateDer::pem_file_iter(path)
                .with_context(|| format!("reading the client CA {} (--client-ca-file)", path.display()))?
            {
                let ca = ca.with_context(|| format!("parsing certificates in {}", path.display()))?;
                roots.add(ca).with_context(|| {
                    format!("{} holds a certificate that is not a usable CA", path.display())
                })?;
            }
            if roots.is_empty() {
                bail!("the client CA file {} holds no certificate", path.display());
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            )
            .allow_unauthenticated()
            .build()
            .with_context(|| format!("building a client certificate verifier from {}", path.display()))?;
            Some(verifier)
        }
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("configuring TLS versions")?;
    let builder = match &client_verifier {
        Some(inner) => builder
            .with_client_cert_verifier(Arc::new(crate::clientcert::DeferredVerifier::new(inner.clone()))),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not match")?;
    config.alpn_protocols = alpn();
    Ok(ServerTls {
        config: Arc::new(config),
        client_verifier,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn generates_once_and_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let files = ensure_self_signed(dir.path(), &[]).unwrap();
        let ca = std::fs::read(&files.ca_cert).unwrap();
        let cert = std::fs::read(&files.cert).unwrap();
        let again = ensure_self_signed(dir.path(), &[]).unwrap();
        assert_eq!(std::fs::read(&again.ca_cert).unwrap(), ca);
        assert_eq!(std::fs::read(&again.cert).unwrap(), cert);
        // A new SAN re-issues the serving certificate from the same CA.
        let with_san = ensure_self_signed(dir.path(), &["flotilla.local".into()]).unwrap();
        assert_eq!(std::fs::read(&with_san.ca_cert).unwrap(), ca);
        assert_ne!(std::fs::read(&with_san.cert).unwrap(), cert);
        server_config(&with_san.cert, &with_san.key, None).unwrap();
        let tls = server_config(&with_san.cert, &with_san.key, Some(&with_san.ca_cert)).unwrap();
        assert!(tls.client_verifier.is_some());
    }

    #[test]
    fn client_certificates_name_the_user_and_verify_against_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let files = ensure_self_signed(dir.path(), &[]).unwrap();
        let tls = server_config(&files.cert, &files.key, Some(&files.ca_cert)).unwrap();
        let (cert, _key) = issue_client_certificate(dir.path(), "jane", Some("dev"), 1).unwrap();
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        match crate::clientcert::identify(tls.client_verifier.as_ref(), Some(&chain)) {
            crate::auth::ClientCertificate::Verified(user) => {
                assert_eq!(user.name, "jane");
                assert_eq!(user.groups, vec!["dev"]);
            }
            other => panic!("not verified: {other:?}"),
        }
        // A certificate from another CA is presented but invalid.
        let other = tempfile::tempdir().unwrap();
        ensure_self_signed(other.path(), &[]).unwrap();
        let (foreign, _) = issue_client_certificate(other.path(), "jane", Some("system:masters"), 1).unwrap();
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(foreign.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(matches!(
            crate::clientcert::identify(tls.client_verifier.as_ref(), Some(&chain)),
            crate::auth::ClientCertificate::Invalid(_)
        ));
        // The serving certificate is not for client authentication.
        let serving: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(matches!(
            crate::clientcert::identify(tls.client_verifier.as_ref(), Some(&serving)),
            crate::auth::ClientCertificate::Invalid(_)
        ));
    }
}
