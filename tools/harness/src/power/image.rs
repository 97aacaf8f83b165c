//! A session as a user sees it, for byte-for-byte comparison before and after a power cut:
//! absent, or present (deleted or not) with the bytes of every generation's export.
//!
//! Invariant: two stores agree on a session exactly when its images are equal — the served
//! generation's export (in its own encoding) followed by each frozen lower generation's.

use sessionlog_engine::{SessionSummary, Store};

/// What a session looks like from outside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Image {
    /// Not stored (never created, or purged).
    Absent,
    /// Stored.
    Present {
        /// Marked deleted (hidden, still exportable).
        deleted: bool,
        /// The served export, then each lower generation's, in ascending version order.
        bytes: Vec<u8>,
    },
}

impl Image {
    /// The image of session `id` in `store`.
    pub fn of(store: &Store, id: &str) -> anyhow::Result<Image> {
        match store.list()?.into_iter().find(|s| s.id == id) {
            Some(summary) => Image::listed(store, &summary),
            None => Ok(Image::Absent),
        }
    }

    /// The image of a stored session, from its listing entry.
    pub fn listed(store: &Store, summary: &SessionSummary) -> anyhow::Result<Image> {
        let id = &summary.id;
        let mut bytes = Vec::new();
        store.export(id, None, &mut bytes)?;
        let served = summary.format;
        for &version in summary.generations.iter().filter(|&&v| v != served) {
            store.export_generation(id, version, None, &mut bytes)?;
        }
        Ok(Image::Present {
            deleted: summary.deleted_at_ms.is_some(),
            bytes,
        })
    }

    /// The image built from an expected export (a live session, or an imported file).
    pub fn exported(bytes: Vec<u8>) -> Image {
        Image::Present {
            deleted: false,
            bytes,
        }
    }

    /// File form: one tag byte (`-` absent, `P` present, `D` deleted), then the bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Image::Absent => vec![b'-'],
            Image::Present { deleted, bytes } => {
                let mut v = Vec::with_capacity(bytes.len() + 1);
                v.push(if *deleted { b'D' } else { b'P' });
                v.extend_from_slice(bytes);
                v
            }
        }
    }

    /// Read back what [`Image::encode`] wrote.
    pub fn decode(mut file: Vec<u8>) -> anyhow::Result<Image> {
        let deleted = match file.first() {
            Some(b'-') => return Ok(Image::Absent),
            Some(b'P') => false,
            Some(b'D') => true,
            _ => anyhow::bail!("image file with an unknown tag"),
        };
        file.remove(0);
        Ok(Image::Present {
            deleted,
            bytes: file,
        })
    }

    /// Read an image file.
    pub fn load(path: &std::path::Path) -> anyhow::Result<Image> {
        let bytes = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("reading image {}: {e}", path.display()))?;
        Image::decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_round_trip_through_their_file_form() {
        for image in [
            Image::Absent,
            Image::exported(b"{\"type\":\"session\"}\n".to_vec()),
            Image::Present {
                deleted: true,
                bytes: vec![0, 1, 2],
            },
        ] {
            assert_eq!(Image::decode(image.encode()).expect("decode"), image);
        }
        assert!(Image::decode(vec![b'x']).is_err());
    }
}
