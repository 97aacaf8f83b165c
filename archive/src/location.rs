//! Archive roots: `s3://BUCKET[/PREFIX]`, under which sessions are laid out as in a DSH session
//! root (`PREFIX/--<project>--/<session dir>/session[.vN].jsonl[.zstd]`).

use object_store::path::Path;

use crate::error::{Error, Result};

/// A bucket and a key prefix in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveRoot {
    /// The bucket.
    pub bucket: String,
    /// The key prefix, without leading or trailing `/` (empty: the bucket's top).
    pub prefix: String,
}

impl ArchiveRoot {
    /// Parse `s3://BUCKET[/PREFIX]`.
    pub fn parse(url: &str) -> Result<Self> {
        let rest = url.strip_prefix("s3://").ok_or_else(|| {
            Error::Location(format!("\"{url}\" is not an s3://BUCKET/PREFIX URL"))
        })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(Error::Location(format!("\"{url}\" names no bucket")));
        }
        let prefix = prefix.trim_matches('/').to_owned();
        Path::parse(&prefix)
            .map_err(|e| Error::Location(format!("\"{url}\": its prefix is not a key: {e}")))?;
        Ok(ArchiveRoot {
            bucket: bucket.to_owned(),
            prefix,
        })
    }

    /// Whether `url` is an `s3://` URL (not a local path).
    pub fn is_url(url: &str) -> bool {
        url.starts_with("s3://")
    }

    /// The object key of `relative` (a DSH root's `/`-separated name) under this root.
    pub(crate) fn key(&self, relative: &str) -> Result<Path> {
        let full = if self.prefix.is_empty() {
            relative.to_owned()
        } else {
            format!("{}/{relative}", self.prefix)
        };
        Path::parse(&full).map_err(|e| {
            Error::Location(format!(
                "s3://{}/{full} is not an object key: {e}",
                self.bucket
            ))
        })
    }

    /// The name of `key` relative to this root (`None` when it is not below it).
    pub(crate) fn relative<'k>(&self, key: &'k str) -> Option<&'k str> {
        if self.prefix.is_empty() {
            return Some(key);
        }
        key.strip_prefix(self.prefix.as_str())?.strip_prefix('/')
    }

    /// `s3://BUCKET/KEY` of an object key, for messages.
    pub(crate) fn show(&self, key: &Path) -> String {
        format!("s3://{}/{key}", self.bucket)
    }
}

impl std::fmt::Display for ArchiveRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "s3://{}", self.bucket)
        } else {
            write!(f, "s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ArchiveRoot;

    #[test]
    fn urls_name_a_bucket_and_a_prefix() {
        let root = ArchiveRoot::parse("s3://sessions/cold/2026/").expect("parse");
        assert_eq!(
            (root.bucket.as_str(), root.prefix.as_str()),
            ("sessions", "cold/2026")
        );
        assert_eq!(root.to_string(), "s3://sessions/cold/2026");
        let key = root.key("--p--/a~002Eb/session.jsonl").expect("key");
        assert_eq!(key.as_ref(), "cold/2026/--p--/a~002Eb/session.jsonl");
        assert_eq!(
            root.relative(key.as_ref()),
            Some("--p--/a~002Eb/session.jsonl")
        );
        assert_eq!(root.relative("cold/2025/x"), None);
        let top = ArchiveRoot::parse("s3://sessions").expect("parse");
        assert_eq!(top.key("x/y").expect("key").as_ref(), "x/y");
        for bad in ["sessions/x", "s3:///x", "s3://b/a//../c"] {
            assert!(ArchiveRoot::parse(bad).is_err(), "{bad}");
        }
    }
}
