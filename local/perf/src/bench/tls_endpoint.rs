//! DynamoDB Local behind TLS, so a local cold start pays the TLS handshake a Lambda pays to
//! reach DynamoDB on AWS (DynamoDB Local itself speaks plain HTTP).
//!
//! [`TlsEndpoint`] makes a throwaway certificate authority and a certificate for `localhost`
//! signed by it, terminates TLS on a free loopback port and passes the bytes on to the plain
//! endpoint. Processes trust it through standard configuration only, nothing compiled into
//! them: `SSL_CERT_FILE` (read by `rustls-native-certs`, the AWS SDK for Rust's trust store)
//! and `AWS_CA_BUNDLE` (botocore's), both pointing at the CA's PEM file; see
//! [`TlsEndpoint::client_environment`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum TlsEndpointError {
    /// Making the certificates failed.
    #[error("certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// The TLS configuration was refused.
    #[error("tls: {0}")]
    Tls(#[from] tokio_rustls::rustls::Error),
    /// Binding the port or writing the CA file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A TLS endpoint in front of a plain one, with its own CA.
pub struct TlsEndpoint {
    addr: SocketAddr,
    ca_file: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

impl TlsEndpoint {
    /// Serves TLS on `127.0.0.1:0`, forwarding every connection to `upstream`; the CA
    /// certificate is written to `ca_file`.
    pub async fn start(upstream: SocketAddr, ca_file: &Path) -> Result<Self, TlsEndpointError> {
        let (ca_pem, certificate, key) = throwaway_certificates()?;
        if let Some(dir) = ca_file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(ca_file, trust_bundle(&ca_pem))?;
        let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![certificate], key)?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = forward(acceptor, client, upstream).await;
                });
            }
        });
        Ok(Self {
            addr,
            ca_file: ca_file.to_path_buf(),
            server,
        })
    }

    /// The endpoint URL (`https://127.0.0.1:PORT`; the certificate names `127.0.0.1` and
    /// `localhost`).
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The trust file (PEM): the throwaway CA, then the platform's roots.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// What a function process needs to use the endpoint: the DynamoDB endpoint override and
    /// the standard trust-store variables of the Rust SDK (`SSL_CERT_FILE`) and of botocore
    /// (`AWS_CA_BUNDLE`).
    pub fn client_environment(&self) -> BTreeMap<String, String> {
        let ca = self.ca_file.display().to_string();
        BTreeMap::from([
            ("AWS_ENDPOINT_URL_DYNAMODB".to_string(), self.url()),
            ("SSL_CERT_FILE".to_string(), ca.clone()),
            ("AWS_CA_BUNDLE".to_string(), ca),
        ])
    }
}

impl Drop for TlsEndpoint {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The platform's CA bundles, where Debian and Amazon Linux keep them.
const PLATFORM_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// `ca_pem` followed by the platform's roots: `SSL_CERT_FILE` replaces the trust store, so a
/// file with the throwaway CA alone would make a TLS cold start parse one root where a Lambda
/// parses the whole bundle (about 150), and the figure would come out too low.
fn trust_bundle(ca_pem: &str) -> String {
    let platform = PLATFORM_BUNDLES
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .unwrap_or_default();
    format!("{ca_pem}\n{platform}")
}

async fn forward(
    acceptor: TlsAcceptor,
    client: TcpStream,
    upstream: SocketAddr,
) -> std::io::Result<()> {
    let mut tls = acceptor.accept(client).await?;
    let mut plain = TcpStream::connect(upstream).await?;
    plain.set_nodelay(true)?;
    tokio::io::copy_bidirectional(&mut tls, &mut plain).await?;
    Ok(())
}

/// A CA valid for a day around now, and a `localhost` / `127.0.0.1` server certificate it
/// signed: (CA PEM, server certificate, server key).
fn throwaway_certificates(
) -> Result<(String, CertificateDer<'static>, PrivateKeyDer<'static>), TlsEndpointError> {
    let day = time::Duration::days(1);
    let now = time::OffsetDateTime::now_utc();
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Device Fleet local test CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = now - day;
    ca_params.not_after = now + day;
    let ca_key = KeyPair::generate()?;
    let ca_certificate = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = now - day;
    params.not_after = now + day;
    let key = KeyPair::generate()?;
    let certificate = params.signed_by(&key, &issuer)?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((ca_certificate.pem(), certificate.der().clone(), key_der))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_client_trusting_the_ca_file_reaches_the_plain_upstream_through_tls() {
        // A plain upstream that answers one line.
        let upstream = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let upstream_addr = upstream.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = upstream.accept().await.unwrap();
            let mut buf = [0u8; 5];
            socket.read_exact(&mut buf).await.unwrap();
            socket.write_all(b"pong:").await.unwrap();
            socket.write_all(&buf).await.unwrap();
        });
        let dir = std::env::temp_dir().join(format!("tls-endpoint-{}", std::process::id()));
        let endpoint = TlsEndpoint::start(upstream_addr, &dir.join("ca.pem"))
            .await
            .unwrap();
        assert!(endpoint.url().starts_with("https://127.0.0.1:"));
        let env = endpoint.client_environment();
        assert_eq!(env["SSL_CERT_FILE"], env["AWS_CA_BUNDLE"]);

        // A client that trusts only that CA file.
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        let pem = std::fs::read(endpoint.ca_file()).unwrap();
        let certs = rustls_pemfile_certs(&pem);
        if PLATFORM_BUNDLES.iter().any(|p| Path::new(p).is_file()) {
            assert!(certs.len() > 1, "the platform's roots follow the CA");
        }
        let (added, _) = roots.add_parsable_certificates(certs);
        assert!(added >= 1);
        let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
        let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(endpoint.addr).await.unwrap();
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        tls.write_all(b"ping!").await.unwrap();
        let mut answer = [0u8; 10];
        tls.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"pong:ping!");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The certificates of a PEM file (the CA file holds exactly one).
    fn rustls_pemfile_certs(pem: &[u8]) -> Vec<CertificateDer<'static>> {
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        CertificateDer::pem_slice_iter(pem)
            .map(|c| c.unwrap())
            .collect()
    }
}
