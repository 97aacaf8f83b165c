//! TLS to PostgreSQL as libpq's `sslmode` asks: `disable` (none), `prefer` (TLS when the server
//! offers it, unverified), `require` (TLS, unverified; verified as `verify-ca` when a root CA is
//! given, as libpq does), `verify-ca` (the server's chain must lead to the CA) and `verify-full`
//! (that, and the certificate must name the host connected to). rustls over ring, in pure Rust.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use postgres::config::Host;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{Error, Result};

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl TlsMode {
    /// The mode PostgreSQL's client library negotiates with (it knows disable, prefer and
    /// require; verification is the connector's).
    pub(crate) fn negotiation(self) -> postgres::config::SslMode {
        match self {
            TlsMode::Disable => postgres::config::SslMode::Disable,
            TlsMode::Prefer => postgres::config::SslMode::Prefer,
            _ => postgres::config::SslMode::Require,
        }
    }

    /// libpq's name of the mode.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        }
    }

    /// Whether connections in this mode authenticate the server: `verify-ca`, `verify-full`, and
    /// `require` with a CA given (verified as `verify-ca`, as libpq does).
    pub(crate) fn verifies(self, ca_given: bool) -> bool {
        match self {
            TlsMode::VerifyCa | TlsMode::VerifyFull => true,
            TlsMode::Require => ca_given,
            TlsMode::Disable | TlsMode::Prefer => false,
        }
    }
}

/// What a host says once when it connects to a server off this machine without authenticating
/// it (libpq's meaning of `mode` is kept; this only says what it costs), or `None`: the mode
/// verifies the server, or every host connected to is this machine (a unix socket, `localhost`,
/// a loopback address).
pub(crate) fn unverified_warning(
    mode: TlsMode,
    ca_given: bool,
    hosts: &[Host],
    hostaddrs: &[IpAddr],
) -> Option<String> {
    if mode.verifies(ca_given) {
        return None;
    }
    // A `hostaddr` is where its host's connection goes (the name then only checks the
    // certificate).
    let remote = match hostaddrs.is_empty() {
        true => hosts.iter().find_map(|h| match h {
            Host::Tcp(name) if !is_loopback_name(name) => Some(name.clone()),
            _ => None,
        }),
        false => hostaddrs
            .iter()
            .find(|a| !a.is_loopback())
            .map(IpAddr::to_string),
    }?;
    let exposure = match mode {
        TlsMode::Disable => "nothing is encrypted",
        TlsMode::Prefer => {
            "the server is not authenticated and a machine on the path can turn encryption off"
        }
        _ => "the server is not authenticated",
    };
    Some(format!(
        "sslmode {} to {remote}, off this machine: {exposure}, so a machine on the path can read          and change the fleet's traffic, the password included; use sslmode=verify-full with          sslrootcert (the CA that signed the server's certificate)",
        mode.name()
    ))
}

/// Whether host name `name` is this machine.
fn is_loopback_name(name: &str) -> bool {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost") || bare.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
}

/// The rustls client configuration for `mode`, trusting the CA in `root_cert` (PEM).
#[expect(
    deprecated,
    reason = "ring keeps the build pure Rust and C (no cmake); it lacks only post-quantum key exchange"
)]
pub(crate) fn client_config(mode: TlsMode, root_cert: Option<&Path>) -> Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, root_cert) {
        (TlsMode::Disable | TlsMode::Prefer | TlsMode::Require, None) => {
            Arc::new(Unverified(provider))
        }
        (TlsMode::Disable | TlsMode::Prefer, Some(_)) => Arc::new(Unverified(provider)),
        (mode, Some(path)) => {
            let roots = Arc::new(load_roots(path)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| Error::Config(format!("TLS: the CA in {}: {e}", path.display())))?;
            match mode {
                TlsMode::VerifyFull => webpki,
                _ => Arc::new(ChainOnly(webpki)),
            }
        }
        (_, None) => {
            return Err(Error::Config(
                "sslmode verify-ca and verify-full need sslrootcert".into(),
            ))
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// The certificates of the PEM file at `path`.
fn load_roots(path: &Path) -> Result<RootCertStore> {
    let text = std::fs::read(path).map_err(|e| {
        Error::Config(format!(
            "TLS: cannot read the CA file {}: {e}",
            path.display()
        ))
    })?;
    let mut roots = RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut text.as_slice()) {
        let cert = cert.map_err(|e| {
            Error::Config(format!(
                "TLS: the CA file {} is not PEM: {e}",
                path.display()
            ))
        })?;
        roots
            .add(cert)
            .map_err(|e| Error::Config(format!("TLS: a certificate in {}: {e}", path.display())))?;
    }
    if roots.is_empty() {
        return Err(Error::Config(format!(
            "TLS: the CA file {} holds no certificate",
            path.display()
        )));
    }
    Ok(roots)
}

/// `verify-ca`: the chain must lead to a trusted root; the name it is issued for is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require` without a CA (and `prefer`): encrypted, the server not authenticated, as libpq.
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
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
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
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
