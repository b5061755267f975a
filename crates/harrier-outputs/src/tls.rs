//! TLS for the HTTP output (client) and the webserver (server), with rustls
//! and its ring provider. Files are PEM. Every error is one line naming the
//! configuration key and the file, for `harrier run` to print before it exits.

pub use rustls;

use anyhow::{anyhow, bail, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::sync::Arc;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &str, key: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| anyhow!("{key}: cannot read {path}: {e}"))
}

/// Every certificate of a PEM file (none is an error).
pub fn certs_in(path: &str, key: &str) -> Result<Vec<CertificateDer<'static>>> {
    let pem = read(path, key)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{key}: {path} is not PEM: {e}"))?;
    if certs.is_empty() {
        bail!("{key}: no certificate in {path}");
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn key_in(path: &str, key: &str) -> Result<PrivateKeyDer<'static>> {
    let pem = read(path, key)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => anyhow!("{key}: no private key in {path}"),
        e => anyhow!("{key}: {path}: {e}"),
    })
}

/// Where the HTTP output's trust anchors come from (Falco's order: ca_cert,
/// else ca_bundle, else ca_path).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// Do not verify the receiver's certificate (nor its name).
    pub insecure: bool,
    pub ca_cert: Option<String>,
    pub ca_bundle: Option<String>,
    /// A folder of PEM files; None: /etc/ssl/certs if it holds any, else
    /// the Mozilla roots built in.
    pub ca_path: Option<String>,
    /// mTLS: the client's certificate and key files.
    pub client_cert: Option<(String, String)>,
}

impl ClientTls {
    pub fn config(&self) -> Result<Arc<ClientConfig>> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| anyhow!("http_output: TLS: {e}"))?;
        let builder = if self.insecure {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(NoVerify(provider())))
        } else {
            builder.with_root_certificates(self.roots()?)
        };
        let config = match &self.client_cert {
            Some((cert, key)) => {
                let chain = certs_in(cert, "http_output.client_cert")?;
                let k = key_in(key, "http_output.client_key")?;
                builder
                    .with_client_auth_cert(chain, k)
                    .map_err(|e| anyhow!("http_output.client_key: {key} does not go with {cert}: {e}"))?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(Arc::new(config))
    }

    fn roots(&self) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        let file = match (&self.ca_cert, &self.ca_bundle) {
            (Some(f), _) => Some((f, "http_output.ca_cert")),
            (None, Some(f)) => Some((f, "http_output.ca_bundle")),
            (None, None) => None,
        };
        if let Some((f, key)) = file {
            for c in certs_in(f, key)? {
                roots.add(c).map_err(|e| anyhow!("{key}: {f}: {e}"))?;
            }
            return Ok(roots);
        }
        let dir = self.ca_path.as_deref().unwrap_or("/etc/ssl/certs");
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                for e in entries.flatten() {
                    // Files that are not PEM certificates are passed over, as libcurl does.
                    let Ok(pem) = std::fs::read(e.path()) else { continue };
                    for c in CertificateDer::pem_slice_iter(&pem).flatten() {
                        let _ = roots.add(c);
                    }
                }
            }
            Err(e) if self.ca_path.is_some() => bail!("http_output.ca_path: cannot read {dir}: {e}"),
            Err(_) => {}
        }
        if roots.is_empty() {
            if self.ca_path.is_some() {
                bail!("http_output.ca_path: no PEM certificate in {dir}");
            }
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        Ok(roots)
    }
}

/// http_output.insecure: any certificate and name are taken; the handshake's
/// signatures are still checked, so the session is encrypted to whoever holds
/// the certificate's key.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The webserver's TLS from Falco's ssl_certificate: one PEM file holding the
/// private key and the certificate chain (`key` names the setting in errors).
pub fn server_config(pem_file: &str, key: &str) -> Result<Arc<ServerConfig>> {
    let chain = certs_in(pem_file, key)?;
    let k = key_in(pem_file, key)?;
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("{key}: TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, k)
        .map_err(|e| anyhow!("{key}: {pem_file}: {e}"))?;
    Ok(Arc::new(config))
}
