//! One archive root in an S3-compatible service: the client, the runtime its requests run on,
//! and the few operations the archive makes of object storage: list a root, store an object
//! without ever replacing one ([`crate::upload`]), read an object back with its size and
//! SHA-256, fetch, delete.
//!
//! Requests are signed by `object_store` (SigV4), retried with backoff for at most
//! [`Transfer::retry_timeout`], and run on a runtime of two threads that the calling threads
//! block on: the engine's export and import are synchronous, and several sessions' transfers
//! wait on the network at once.

use std::collections::BTreeMap;
use std::io::Write;

use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use sha2::{Digest as _, Sha256};

use crate::conditional::CreateOnlyConnector;
use crate::config::{S3Config, Transfer};
use crate::error::{Error, Result};
use crate::location::ArchiveRoot;

/// An object's size and SHA-256.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Digest {
    /// Its size.
    pub bytes: u64,
    /// The SHA-256 of its bytes.
    pub sha256: [u8; 32],
}

impl Digest {
    /// The digest of what `hasher` saw, `bytes` long.
    pub(crate) fn of(hasher: Sha256, bytes: u64) -> Digest {
        Digest {
            bytes,
            sha256: hasher.finalize().into(),
        }
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes, sha256 {}", self.bytes, hex(&self.sha256))
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An archive root and the client that reaches it.
pub struct Bucket {
    pub(crate) store: AmazonS3,
    pub(crate) runtime: tokio::runtime::Runtime,
    pub(crate) root: ArchiveRoot,
    pub(crate) transfer: Transfer,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the client: its configuration holds the credentials.
        f.debug_struct("Bucket")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Bucket {
    /// A client of `root` as `config` says.
    pub fn open(root: ArchiveRoot, config: &S3Config, transfer: Transfer) -> Result<Bucket> {
        transfer.validate()?;
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&root.bucket)
            .with_region(config.region())
            .with_http_connector(CreateOnlyConnector)
            .with_retry(RetryConfig {
                retry_timeout: transfer.retry_timeout,
                // The timeout ends the retries, not a count: a server restarting answers 500 for
                // a while, and ten quick retries pass in under two seconds.
                max_retries: usize::MAX,
                ..RetryConfig::default()
            });
        let mut client = ClientOptions::new();
        if let Some(endpoint) = &config.endpoint {
            client = client.with_allow_http(endpoint.starts_with("http://"));
            builder = builder.with_endpoint(endpoint);
        }
        builder = builder.with_client_options(client);
        match (&config.access_key_id, &config.secret_access_key) {
            (Some(id), Some(secret)) => {
                builder = builder
                    .with_access_key_id(id)
                    .with_secret_access_key(secret.expose());
                if let Some(token) = &config.session_token {
                    builder = builder.with_token(token.expose());
                }
            }
            (None, None) => {}
            _ => {
                return Err(Error::Config(
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together: one is set without the other".into(),
                ))
            }
        }
        // The builder's errors name the setting at fault, never its value.
        let store = builder
            .build()
            .map_err(|e| Error::Config(format!("{root}: {e}")))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sessionlog-s3")
            .enable_all()
            .build()
            .map_err(Error::io("starting the object storage client's threads"))?;
        Ok(Bucket {
            store,
            runtime,
            root,
            transfer,
        })
    }

    /// The root this client reaches.
    pub fn root(&self) -> &ArchiveRoot {
        &self.root
    }

    /// How transfers are cut and spread.
    pub fn transfer(&self) -> Transfer {
        self.transfer
    }

    /// Every object below the root: its name relative to the root, and its size.
    pub fn list(&self) -> Result<BTreeMap<String, u64>> {
        let prefix = match self.root.prefix.as_str() {
            "" => None,
            prefix => Some(Path::parse(prefix).map_err(|e| Error::Location(e.to_string()))?),
        };
        let shown = self.root.to_string();
        let objects: Vec<object_store::ObjectMeta> = self
            .runtime
            .block_on(self.store.list(prefix.as_ref()).try_collect())
            .map_err(Error::request("listing", shown))?;
        Ok(objects
            .into_iter()
            .filter_map(|o| {
                let relative = self.root.relative(o.location.as_ref())?.to_owned();
                Some((relative, o.size))
            })
            .collect())
    }

    /// Read object `key` into `out`, returning its digest.
    pub(crate) fn fetch_to(&self, key: &Path, out: &mut dyn Write) -> Result<Digest> {
        let shown = self.root.show(key);
        self.runtime.block_on(async {
            let got = self
                .store
                .get(key)
                .await
                .map_err(Error::request("reading", shown.clone()))?;
            let mut stream = got.into_stream();
            let mut hasher = Sha256::new();
            let mut bytes = 0u64;
            while let Some(chunk) = stream
                .try_next()
                .await
                .map_err(Error::request("reading", shown.clone()))?
            {
                hasher.update(&chunk);
                bytes += chunk.len() as u64;
                out.write_all(&chunk)
                    .map_err(Error::io(format!("writing what {shown} holds")))?;
            }
            Ok(Digest::of(hasher, bytes))
        })
    }

    /// Read object `key` back: its size and SHA-256.
    pub(crate) fn digest(&self, key: &Path) -> Result<Digest> {
        self.fetch_to(key, &mut std::io::sink())
    }

    /// The digest of the object named `name` below the root, read back whole (`None` when
    /// there is none).
    pub fn object_digest(&self, name: &str) -> Result<Option<Digest>> {
        let key = self.root.key(name)?;
        if !self.exists(&key)? {
            return Ok(None);
        }
        self.digest(&key).map(Some)
    }

    /// Read object `key` into `out`, refusing it unless it is `expected`.
    pub(crate) fn fetch_checked(
        &self,
        key: &Path,
        expected: Digest,
        out: &mut dyn Write,
    ) -> Result<()> {
        let got = self.fetch_to(key, out)?;
        if got != expected {
            return Err(Error::Mismatch {
                location: self.root.show(key),
                expected: expected.to_string(),
                got: got.to_string(),
            });
        }
        Ok(())
    }

    /// Whether object `key` exists.
    pub(crate) fn exists(&self, key: &Path) -> Result<bool> {
        match self.runtime.block_on(self.store.head(key)) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(Error::request("looking up", self.root.show(key))(e)),
        }
    }

    /// Delete object `key`.
    pub(crate) fn delete(&self, key: &Path) -> Result<()> {
        self.runtime
            .block_on(self.store.delete(key))
            .map_err(Error::request("deleting", self.root.show(key)))
    }
}
