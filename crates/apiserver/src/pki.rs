//! TLS material: a self-signed CA and a serving certificate generated on first start (kept in
//! `<data-dir>/pki/` and reused), or user-provided files; and the rustls server config.

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

/// Builds the rustls server config (ring provider, ALPN h2 + http/1.1).
pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
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
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("configuring TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not match")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
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
        server_config(&with_san.cert, &with_san.key).unwrap();
    }
}
