//! Client certificate authentication. The TLS layer asks for a certificate (hinting the client
//! CA's name, as kube-apiserver does) but accepts connections without one and, like
//! kube-apiserver, does not fail the handshake on a certificate it cannot verify: it only
//! checks that the client holds the certificate's key. The chain is verified against the
//! client CA afterwards ([`identify`]), so an unverifiable certificate answers 401 Unauthorized
//! instead of a TLS alert. A verified certificate's subject CN is the user and its O values
//! are the groups.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::auth::{ClientCertificate, User};

/// Offers client authentication and checks key possession during the handshake; the chain is
/// verified by [`identify`] with the same inner verifier.
#[derive(Debug)]
pub struct DeferredVerifier {
    inner: Arc<dyn ClientCertVerifier>,
}

impl DeferredVerifier {
    /// Wraps a WebPKI verifier built from the client CA.
    pub fn new(inner: Arc<dyn ClientCertVerifier>) -> Self {
        Self { inner }
    }

    /// The verifier that checks chains against the client CA.
    pub fn inner(&self) -> Arc<dyn ClientCertVerifier> {
        self.inner.clone()
    }
}

impl ClientCertVerifier for DeferredVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// What the peer's certificates (as the handshake left them) say about the client.
pub fn identify(
    verifier: Option<&Arc<dyn ClientCertVerifier>>,
    peer: Option<&[CertificateDer<'static>]>,
) -> ClientCertificate {
    let Some((end_entity, intermediates)) = peer.and_then(|chain| chain.split_first()) else {
        return ClientCertificate::None;
    };
    let Some(verifier) = verifier else {
        return ClientCertificate::Invalid(
            "client certificates are not accepted (no --client-ca-file)".to_owned(),
        );
    };
    if let Err(e) = verifier.verify_client_cert(end_entity, intermediates, UnixTime::now()) {
        return ClientCertificate::Invalid(e.to_string());
    }
    match subject(end_entity.as_ref()) {
        Some(subject) if !subject.common_name.is_empty() => ClientCertificate::Verified(User {
            name: subject.common_name,
            groups: subject.organizations,
            ..User::default()
        }),
        Some(_) => ClientCertificate::Invalid("the certificate's subject has no common name".to_owned()),
        None => ClientCertificate::Invalid("the certificate's subject cannot be parsed".to_owned()),
    }
}

/// The parts of a certificate subject that name a user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subject {
    /// CN (the last one, if several).
    pub common_name: String,
    /// Every O, in order.
    pub organizations: Vec<String>,
}

/// One DER element: (tag, contents, rest).
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[count..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// 2.5.4.3 (commonName).
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
/// 2.5.4.10 (organizationName).
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// The CN and O values of a DER certificate's subject.
pub fn subject(der: &[u8]) -> Option<Subject> {
    let (tag, certificate, _) = element(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = element(certificate)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut rest = tbs;
    // Optional explicit version [0].
    let (tag, _, after) = element(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    // serialNumber, signature, issuer, validity; then subject.
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (tag, mut names, _) = element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut subject = Subject::default();
    while !names.is_empty() {
        let (tag, mut set, after) = element(names)?;
        names = after;
        if tag != SET {
            return None;
        }
        while !set.is_empty() {
            let (tag, attribute, after) = element(set)?;
            set = after;
            if tag != SEQUENCE {
                return None;
            }
            let (tag, oid, value) = element(attribute)?;
            if tag != OID {
                return None;
            }
            let (_, text, _) = element(value)?;
            let text = String::from_utf8_lossy(text).into_owned();
            if oid == OID_COMMON_NAME {
                subject.common_name = text;
            } else if oid == OID_ORGANIZATION {
                subject.organizations.push(text);
            }
        }
    }
    Some(subject)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn certificate(cn: Option<&str>, org: Option<&str>) -> Vec<u8> {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        if let Some(org) = org {
            params.distinguished_name.push(DnType::OrganizationName, org);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    /// DER: tag, short or long length, contents.
    fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if contents.len() < 0x80 {
            out.push(contents.len() as u8);
        } else {
            out.push(0x82);
            out.extend_from_slice(&(contents.len() as u16).to_be_bytes());
        }
        out.extend_from_slice(contents);
        out
    }

    fn attribute(oid: &[u8], value: &str) -> Vec<u8> {
        let mut body = der(OID, oid);
        body.extend(der(0x0c, value.as_bytes()));
        der(SET, &der(SEQUENCE, &body))
    }

    #[test]
    fn reads_common_name_and_organizations() {
        let der_cert = certificate(Some("jane"), Some("system:masters"));
        assert_eq!(
            subject(&der_cert),
            Some(Subject {
                common_name: "jane".into(),
                organizations: vec!["system:masters".into()],
            })
        );
        assert_eq!(
            subject(&certificate(Some("solo"), None)).unwrap().organizations,
            Vec::<String>::new()
        );
        assert_eq!(subject(&certificate(None, Some("o"))).unwrap().common_name, "");

        // Several O values (as openssl writes `/O=dev/O=ops/CN=jane`), in a v1 certificate
        // without the explicit version; the rest of the certificate is not read.
        let mut names = attribute(OID_ORGANIZATION, "dev");
        names.extend(attribute(OID_ORGANIZATION, "ops"));
        names.extend(attribute(&[0x55, 0x04, 0x06], "NL"));
        names.extend(attribute(OID_COMMON_NAME, "jane"));
        let mut tbs = der(0x02, &[1]);
        tbs.extend(der(SEQUENCE, &[]));
        tbs.extend(der(SEQUENCE, &[]));
        tbs.extend(der(SEQUENCE, &[]));
        tbs.extend(der(SEQUENCE, &names));
        let handmade = der(SEQUENCE, &der(SEQUENCE, &tbs));
        assert_eq!(
            subject(&handmade),
            Some(Subject {
                common_name: "jane".into(),
                organizations: vec!["dev".into(), "ops".into()],
            })
        );
    }

    #[test]
    fn garbage_is_not_a_subject() {
        assert_eq!(subject(&[]), None);
        assert_eq!(subject(&[0x30, 0x82, 0xff]), None);
        assert_eq!(subject(&[0x02, 0x01, 0x00]), None);
        let cert = certificate(Some("x"), None);
        assert_eq!(subject(&cert[..cert.len() / 3]), None);
    }

    #[test]
    fn no_certificate_is_no_identity() {
        assert_eq!(identify(None, None), ClientCertificate::None);
        assert_eq!(identify(None, Some(&[])), ClientCertificate::None);
        let cert = CertificateDer::from(certificate(Some("x"), None));
        assert!(matches!(
            identify(None, Some(&[cert])),
            ClientCertificate::Invalid(_)
        ));
    }
}
