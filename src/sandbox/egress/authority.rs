//! The certificate authority the egress proxy signs with when it ends a box's TLS to a
//! host that has secrets: made when the proxy starts, one per server instance, its key
//! in this process's memory only (never written anywhere, never sent). Boxes trust its
//! certificate (and nothing of it is secret).
//!
//! The CA is name-constrained to the secrets' hosts: even a key that leaked could not
//! vouch for any other site, and every TLS client that enforces name constraints
//! (OpenSSL, which Python and Node use) refuses such a certificate. Leaf certificates
//! are made on first use per host and kept.

use crate::policy::allowlist::{Host, HostRule, IpRange, Subtree};
use rcgen::{
    BasicConstraints, CertificateParams, CidrSubnet, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    NameConstraints, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use time::{Duration, OffsetDateTime};

/// How long the CA and its leaves are valid (a server instance lives less).
const VALIDITY: Duration = Duration::days(398);
/// The most leaf certificates kept: a wildcard secret host could be asked for under
/// any number of names; past this the cache starts over.
pub const MOST_LEAVES: usize = 1024;

pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    certificate: CertificateDer<'static>,
    pem: String,
    leaves: Mutex<HashMap<Host, Arc<CertifiedKey>>>,
}

impl Authority {
    /// A new CA for instance `instance`, constrained to the names and ranges `hosts`.
    pub fn new(instance: &str, hosts: &[HostRule]) -> Result<Authority, String> {
        let failed = |e: rcgen::Error| format!("making the egress proxy's CA: {e}");
        let key = KeyPair::generate().map_err(failed)?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::OrganizationName, "code-sandbox-mcp");
        name.push(
            DnType::CommonName,
            format!("code-sandbox-mcp egress proxy {}", short(instance)),
        );
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(1);
        params.not_after = now + VALIDITY;
        params.name_constraints = Some(constraints(hosts));
        let certificate = params.self_signed(&key).map_err(failed)?;
        let pem = certificate.pem();
        Ok(Authority {
            certificate: certificate.der().clone(),
            issuer: Issuer::new(params, key),
            pem,
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA's certificate, PEM.
    pub fn certificate_pem(&self) -> &str {
        &self.pem
    }

    /// A certificate and key for `host`, signed by this CA (made once per host).
    pub fn leaf(&self, host: &Host) -> Result<Arc<CertifiedKey>, String> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(leaf) = leaves.get(host) {
            return Ok(leaf.clone());
        }
        if leaves.len() >= MOST_LEAVES {
            leaves.clear();
        }
        let failed = |e: rcgen::Error| format!("making a certificate for {host}: {e}");
        let key = KeyPair::generate().map_err(failed)?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, host.to_string());
        params.distinguished_name = name;
        params.subject_alt_names = vec![match host {
            Host::Name(name) => SanType::DnsName(
                name.clone()
                    .try_into()
                    .map_err(|e| format!("{name} is no certificate name: {e}"))?,
            ),
            Host::Ip(ip) => SanType::IpAddress(*ip),
        }];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(1);
        params.not_after = now + VALIDITY;
        let certificate = params.signed_by(&key, &self.issuer).map_err(failed)?;
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing = super::upstream_tls::provider()
            .key_provider
            .load_private_key(private)
            .map_err(|e| format!("loading the key for {host}: {e}"))?;
        let leaf = Arc::new(CertifiedKey::new(
            vec![certificate.der().clone(), self.certificate.clone()],
            signing,
        ));
        leaves.insert(host.clone(), leaf.clone());
        Ok(leaf)
    }
}

/// Only the secrets' names (and addresses, when one is listed as such) may be vouched
/// for; with no address listed, every address is excluded.
fn constraints(hosts: &[HostRule]) -> NameConstraints {
    let mut permitted = Vec::new();
    for host in hosts {
        match host.subtree() {
            Subtree::Dns(name) => {
                if !permitted.contains(&GeneralSubtree::DnsName(name.to_string())) {
                    permitted.push(GeneralSubtree::DnsName(name.to_string()));
                }
            }
            Subtree::Range(range) => permitted.push(GeneralSubtree::IpAddress(subnet(range))),
        }
    }
    let any_address = permitted
        .iter()
        .any(|subtree| matches!(subtree, GeneralSubtree::IpAddress(_)));
    let excluded = if any_address {
        Vec::new()
    } else {
        ["0.0.0.0/0", "::/0"]
            .iter()
            .map(|all| GeneralSubtree::IpAddress(subnet(IpRange::parse(all).expect("a range"))))
            .collect()
    };
    NameConstraints {
        permitted_subtrees: permitted,
        excluded_subtrees: excluded,
    }
}

fn subnet(range: IpRange) -> CidrSubnet {
    CidrSubnet::from_addr_prefix(range.network(), range.prefix())
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_signs_leaves_for_its_hosts_and_keeps_them() {
        let hosts: Vec<HostRule> = ["api.example.com", "*.example.org", "10.0.0.5:8443"]
            .iter()
            .map(|h| HostRule::parse(h).unwrap())
            .collect();
        let authority = Authority::new("0123456789abcdef", &hosts).unwrap();
        assert!(authority
            .certificate_pem()
            .starts_with("-----BEGIN CERTIFICATE-----"));
        let host = Host::Name("api.example.com".into());
        let leaf = authority.leaf(&host).unwrap();
        assert_eq!(leaf.cert.len(), 2, "the leaf and the CA");
        assert!(
            Arc::ptr_eq(&leaf, &authority.leaf(&host).unwrap()),
            "made once"
        );
        assert!(authority
            .leaf(&Host::Ip("10.0.0.5".parse().unwrap()))
            .is_ok());
        let NameConstraints {
            permitted_subtrees,
            excluded_subtrees,
        } = constraints(&hosts);
        assert_eq!(permitted_subtrees.len(), 3);
        assert!(excluded_subtrees.is_empty());
        let names_only = constraints(&hosts[..2]);
        assert_eq!(
            names_only.excluded_subtrees.len(),
            2,
            "no address is vouched for"
        );
    }
}
