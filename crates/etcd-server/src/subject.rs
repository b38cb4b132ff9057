//! Who a client certificate names: the common name (CN) of its subject,
//! read once per connection. A call without a token is the call of the
//! user the certificate names ([`crate::auth`]), as etcd takes a
//! certificate's common name for the user's name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tonic::transport::CertificateDer;
use yasna::models::ObjectIdentifier;
use yasna::tags::{TAG_IA5STRING, TAG_PRINTABLESTRING, TAG_UTF8STRING};

/// The longest common name read: longer ones count as none.
pub const MAX_COMMON_NAME_BYTES: usize = 256;

/// Connections whose certificate's name is remembered; past it the memory
/// is emptied (a name is read again, never wrong).
const MAX_REMEMBERED: usize = 1024;

/// What the client of a call showed the listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Presented {
    /// Nothing: the listener runs without TLS (`--insecure-no-tls`).
    Plain,
    /// A certificate of the cluster's CA, with its subject's common name
    /// (none: it has none, or one that is not text).
    Certificate(Option<Arc<str>>),
}

/// The common name of the subject of the DER certificate `der`: its first
/// CN attribute, if it is a UTF-8, printable or IA5 string of at most
/// [`MAX_COMMON_NAME_BYTES`]. `None` for anything else, or a certificate
/// that does not parse.
pub fn common_name(der: &[u8]) -> Option<String> {
    let cn_oid = ObjectIdentifier::from_slice(&[2, 5, 4, 3]);
    let mut found: Option<String> = None;
    let parsed = yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            // TBSCertificate.
            r.next().read_sequence(|r| {
                // version [0] EXPLICIT (absent: v1).
                r.read_optional(|r| r.read_tagged(yasna::Tag::context(0), |r| r.read_der()))?;
                // serialNumber, signature, issuer, validity.
                for _ in 0..4 {
                    r.next().read_der()?;
                }
                // subject: a SEQUENCE OF SET OF AttributeTypeAndValue.
                r.next().read_sequence_of(|r| {
                    r.read_set_of(|r| {
                        r.read_sequence(|r| {
                            let oid = r.next().read_oid()?;
                            let value = r.next().read_tagged_der()?;
                            let text = [TAG_UTF8STRING, TAG_PRINTABLESTRING, TAG_IA5STRING]
                                .contains(&value.tag())
                                && value.value().len() <= MAX_COMMON_NAME_BYTES;
                            if oid == cn_oid && found.is_none() && text {
                                found = std::str::from_utf8(value.value()).ok().map(str::to_string);
                            }
                            Ok(())
                        })
                    })
                })?;
                // subjectPublicKeyInfo, and the optional unique ids and
                // extensions.
                while r.read_optional(|r| r.read_der())?.is_some() {}
                Ok(())
            })?;
            // signatureAlgorithm, signatureValue.
            r.next().read_der()?;
            r.next().read_der()?;
            Ok(())
        })
    });
    parsed.ok().and(found)
}

/// A connection's certificates, as tonic hands them to each call.
type Certificates = Arc<Vec<CertificateDer<'static>>>;

/// What each open connection presented, read from its certificate once
/// (tonic hands every call of a connection the same certificates).
#[derive(Default)]
pub struct Subjects {
    /// By the address of a connection's certificate list, which the entry
    /// keeps alive, so no other list can take that address meanwhile.
    remembered: Mutex<HashMap<usize, (Certificates, Presented)>>,
}

impl Subjects {
    /// What the client of the call with these request extensions showed.
    pub fn presented(&self, extensions: &tonic::codegen::http::Extensions) -> Presented {
        let Some(info) = extensions.get::<TlsConnectInfo<TcpConnectInfo>>() else {
            return Presented::Plain;
        };
        let Some(certs) = info.peer_certs() else { return Presented::Certificate(None) };
        let key = Arc::as_ptr(&certs) as usize;
        let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, presented)) = remembered.get(&key) {
            return presented.clone();
        }
        let name = certs.first().and_then(|c| common_name(c)).map(Arc::from);
        let presented = Presented::Certificate(name);
        if remembered.len() >= MAX_REMEMBERED {
            remembered.clear();
        }
        remembered.insert(key, (certs, presented.clone()));
        presented
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(cn: Option<&str>) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(vec!["x.example".to_string()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "tenure tests");
        if let Some(cn) = cn {
            params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn the_subjects_common_name_is_read_and_nothing_else() {
        let der = certificate(Some("client-billing.prod"));
        assert_eq!(common_name(&der).as_deref(), Some("client-billing.prod"));
        assert_eq!(common_name(&certificate(None)), None, "only an organisation");
        let long = "n".repeat(MAX_COMMON_NAME_BYTES + 1);
        assert_eq!(common_name(&certificate(Some(&long))), None);
        // Not a certificate, cut short, or with bytes after it.
        assert_eq!(common_name(b"\x30\x03\x02\x01\x01"), None);
        assert_eq!(common_name(&der[..der.len() - 1]), None);
        assert_eq!(common_name(&[der.as_slice(), b"\x00"].concat()), None);
        assert_eq!(common_name(b""), None);
    }

    #[test]
    fn a_plain_call_presents_nothing() {
        let subjects = Subjects::default();
        assert_eq!(subjects.presented(&Default::default()), Presented::Plain);
    }
}
