//! How to reach object storage: endpoint, region and credentials, taken as AWS's tools take
//! them (`AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`, `AWS_REGION` or `AWS_DEFAULT_REGION`,
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), or set by a host.
//!
//! Invariant: the secret key and session token are held as [`Secret`]s, whose `Debug` and
//! `Display` never show them, and are handed to the client alone: no error, log line or
//! report of this crate can carry them.

/// A credential that is never shown.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a credential.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The credential itself, for the client only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Endpoint, region and credentials of an S3-compatible service.
#[derive(Clone, Debug, Default)]
pub struct S3Config {
    /// The service's URL, e.g. `http://127.0.0.1:8333`. Default: `$AWS_ENDPOINT_URL_S3`, else
    /// `$AWS_ENDPOINT_URL`, else AWS's own endpoint for the region.
    pub endpoint: Option<String>,
    /// The region requests are signed for. Default: `$AWS_REGION`, else
    /// `$AWS_DEFAULT_REGION`, else `us-east-1`.
    pub region: Option<String>,
    /// The access key id. Default: `$AWS_ACCESS_KEY_ID`.
    pub access_key_id: Option<String>,
    /// The secret access key. Default: `$AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Option<Secret>,
    /// A session token for temporary credentials. Default: `$AWS_SESSION_TOKEN`.
    pub session_token: Option<Secret>,
}

impl S3Config {
    /// The configuration the environment gives, as AWS's tools read it.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        S3Config {
            endpoint: var("AWS_ENDPOINT_URL_S3").or_else(|| var("AWS_ENDPOINT_URL")),
            region: var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")),
            access_key_id: var("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY").map(Secret),
            session_token: var("AWS_SESSION_TOKEN").map(Secret),
        }
    }

    /// The region requests are signed for.
    pub(crate) fn region(&self) -> &str {
        self.region.as_deref().unwrap_or("us-east-1")
    }
}

/// How transfers are cut and spread. Every field's default suits a host's disk and a
/// data-center network to object storage.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// Sessions exported, imported, archived or restored at once (each uploads or downloads its
    /// files one after another). Default: 16.
    pub sessions_in_flight: usize,
    /// An object larger than this is uploaded in parts of this size (multipart), several parts
    /// of one object at once. Default: 16 MiB.
    pub part_bytes: usize,
    /// Parts of one object uploaded at once. Default: 4.
    pub parts_in_flight: usize,
    /// How long a failing request is retried before it fails. Default: 20 s.
    pub retry_timeout: std::time::Duration,
}

impl Default for Transfer {
    fn default() -> Self {
        Transfer {
            sessions_in_flight: 16,
            part_bytes: 16 << 20,
            parts_in_flight: 4,
            retry_timeout: std::time::Duration::from_secs(20),
        }
    }
}

impl Transfer {
    /// Refuse values no transfer can run with.
    pub fn validate(&self) -> crate::Result<()> {
        if self.sessions_in_flight == 0 || self.parts_in_flight == 0 {
            return Err(crate::Error::Config(
                "sessions and parts in flight must be at least 1".into(),
            ));
        }
        // S3's smallest part is 5 MiB (all but the last), its largest 5 GiB.
        if !(5 << 20..=5 << 30).contains(&self.part_bytes) {
            return Err(crate::Error::Config(format!(
                "a part of {} bytes is outside S3's 5 MiB..5 GiB",
                self.part_bytes
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{S3Config, Secret};

    #[test]
    fn a_secret_is_never_shown() {
        let config = S3Config {
            secret_access_key: Some(Secret::new("hunter2-very-secret")),
            session_token: Some(Secret::new("token-very-secret")),
            ..S3Config::default()
        };
        let shown = format!("{config:?} {}", Secret::new("hunter2-very-secret"));
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains("Secret(***)"), "{shown}");
    }
}
