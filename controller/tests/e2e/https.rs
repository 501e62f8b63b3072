//! HTTPS for the secure port's tests: TLS by rustls, trusting one CA (a certificate the test
//! issued) or, for a self-signed port, any certificate; the request by hand, HTTP/1.0, as
//! `collector::http_get` sends it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Which server certificates a request accepts.
#[derive(Clone, Debug)]
pub enum Trust {
    /// Any (the port's certificate is self-signed); the handshake's signatures are still checked.
    Any,
    /// Those this CA issued for `127.0.0.1`.
    Ca(CertificateDer<'static>),
}

/// A serving certificate for `127.0.0.1`, PEM, and the CA that issued it.
pub struct Issued {
    /// The CA's certificate, to trust.
    pub ca: CertificateDer<'static>,
    /// The serving certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
}

/// Issues a CA and a serving certificate for `127.0.0.1` signed by it.
pub fn issue() -> anyhow::Result<Issued> {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "kube-gc test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate()?)?;
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])?.signed_by(&key, &ca)?;
    Ok(Issued { ca: ca.der().clone(), cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// `cert` and `key` (PEM) written as `tls.crt` and `tls.key` in a directory of their own (the
/// caller removes it): the directory and the kube-gc flags naming the two files.
pub fn tls_files(
    tag: &str,
    cert: &str,
    key: &str,
) -> anyhow::Result<(std::path::PathBuf, String, String)> {
    let dir = std::env::temp_dir().join(format!("kube-gc-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("tls.crt"), cert)?;
    std::fs::write(dir.join("tls.key"), key)?;
    let cert_flag = format!("--tls-cert-file={}", dir.join("tls.crt").display());
    let key_flag = format!("--tls-private-key-file={}", dir.join("tls.key").display());
    Ok((dir, cert_flag, key_flag))
}

/// GETs `path` from `https://127.0.0.1:port`, with `token` as a bearer token if given; the
/// status and the body.
pub async fn https_get(
    port: u16,
    path: &str,
    token: Option<&str>,
    trust: &Trust,
) -> anyhow::Result<(u16, String)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let config = match trust {
        Trust::Any => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
        Trust::Ca(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(ca.clone())?;
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    let io = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let name = ServerName::try_from("127.0.0.1")?;
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await?;
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        tls.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{auth}\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        // A server may end a TLS stream without close_notify once it has answered.
        if let Err(e) = tls.read_to_end(&mut buf).await {
            if buf.is_empty() {
                return Err(e.into());
            }
        }
        anyhow::Ok(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(20), io).await.context("timed out")??;
    parse_response(&buf)
}

/// The status and body of an HTTP/1.x response read to its end.
pub fn parse_response(buf: &[u8]) -> anyhow::Result<(u16, String)> {
    let text = String::from_utf8_lossy(buf).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .with_context(|| format!("no HTTP status in {:?}", &text[..text.len().min(200)]))?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}

#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
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
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
