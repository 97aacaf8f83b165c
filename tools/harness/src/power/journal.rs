//! The acknowledgement journal: what the power-loss child intended and what the store
//! acknowledged, kept outside the cut file system so the cut cannot touch it.
//!
//! One line per record, each written with one `write` (a frozen child leaves at most one
//! line without its `"\n"`, which acknowledges nothing):
//!
//! ```text
//! I <op> append <id>:<first_seq>:<count> ...    a group commit (append_many) about to run
//! I <op> create <id>                            a live session about to be created
//! I <op> <kind> <id>[=<image>] ...              an admin op about to run, the ids it may touch
//!                                               (with the image it must leave, when known)
//! A <op> ok|rejected [<id>=<image> ...]         op acknowledged (its call returned); an admin
//!                                               op names the image each id had afterwards
//! ```
//!
//! Invariant: an `A` line is written only after the store call returned, and an image file is
//! complete before the line naming it is written.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context};

use super::image::Image;

/// One session batch of a group commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendSpec {
    /// Session id.
    pub id: String,
    /// Seq of the batch's first event.
    pub first_seq: u64,
    /// Events in the batch.
    pub count: u64,
}

/// What an operation was about to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Intent {
    /// One `append_many` call.
    Append(Vec<AppendSpec>),
    /// Creation of a live (feed) session without events (`create_session`).
    Create { id: String },
    /// Any other writer (`kind`): the ids it may touch, each with the image it must leave when
    /// that is known in advance (an import).
    Admin {
        kind: String,
        ids: Vec<(String, Option<PathBuf>)>,
    },
}

/// One operation as the parent reads it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpRecord {
    /// What it was about to do.
    pub intent: Intent,
    /// `Some` when acknowledged: `true` when the call succeeded, and the images it named.
    pub ack: Option<(bool, Vec<(String, PathBuf)>)>,
    /// Acknowledged and then made durable by a `Store::sync` that returned (a `sync` op
    /// intended after this ack, or a bulk import, which syncs before it acknowledges): it
    /// must survive whatever the store's durability.
    pub synced: bool,
}

/// The admin op that calls `Store::sync` (ids: none).
pub const SYNC: &str = "sync";
/// The admin op that imports unsynced and calls `Store::sync` before acknowledging.
pub const BULK_IMPORT: &str = "import-bulk";

/// The child's writer side.
pub struct Journal {
    file: Mutex<File>,
    images: PathBuf,
    next_op: AtomicU64,
    next_image: AtomicU64,
}

impl Journal {
    /// Append to the journal at `path`; images go in `images` (created).
    pub fn create(path: &Path, images: &Path) -> anyhow::Result<Journal> {
        std::fs::create_dir_all(images)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Journal {
            file: Mutex::new(file),
            images: images.to_path_buf(),
            next_op: AtomicU64::new(0),
            next_image: AtomicU64::new(0),
        })
    }

    fn line(&self, text: String) -> anyhow::Result<()> {
        self.file
            .lock()
            .map_err(|_| anyhow::anyhow!("journal lock poisoned"))?
            .write_all(text.as_bytes())
            .context("writing the journal")
    }

    /// Record an intent; returns the op number to acknowledge.
    pub fn intend(&self, intent: &Intent) -> anyhow::Result<u64> {
        let op = self.next_op.fetch_add(1, Ordering::SeqCst);
        let body = match intent {
            Intent::Append(items) => {
                let parts: Vec<String> = items
                    .iter()
                    .map(|a| format!("{}:{}:{}", a.id, a.first_seq, a.count))
                    .collect();
                format!("append {}", parts.join(" "))
            }
            Intent::Create { id } => format!("create {id}"),
            Intent::Admin { kind, ids } => {
                let parts: Vec<String> = ids
                    .iter()
                    .map(|(id, img)| match img {
                        Some(p) => format!("{id}={}", p.display()),
                        None => id.clone(),
                    })
                    .collect();
                format!("{kind} {}", parts.join(" "))
            }
        };
        self.line(format!("I {op} {body}\n"))?;
        Ok(op)
    }

    /// Store `image` in a new image file; returns its path.
    pub fn save_image(&self, image: &Image) -> anyhow::Result<PathBuf> {
        let n = self.next_image.fetch_add(1, Ordering::SeqCst);
        let path = self.images.join(format!("{n}.img"));
        std::fs::write(&path, image.encode())
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// Acknowledge `op`, naming the image each touched id has now.
    pub fn ack(&self, op: u64, ok: bool, images: &[(String, PathBuf)]) -> anyhow::Result<()> {
        let mut text = format!("A {op} {}", if ok { "ok" } else { "rejected" });
        for (id, p) in images {
            text.push_str(&format!(" {id}={}", p.display()));
        }
        text.push('\n');
        self.line(text)
    }
}

/// Read a journal back: every op in intent order. Missing file: no ops.
pub fn read(path: &Path) -> anyhow::Result<Vec<OpRecord>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut ops: BTreeMap<u64, OpRecord> = BTreeMap::new();
    // Line of each ack, and of the last intent of a sync that was acknowledged.
    let mut acked_at: BTreeMap<u64, usize> = BTreeMap::new();
    let mut sync_intents: BTreeMap<u64, usize> = BTreeMap::new();
    let lines = text.split_inclusive('\n').filter(|l| l.ends_with('\n'));
    for (n, line) in lines.enumerate() {
        let mut f = line.split_whitespace();
        let (Some(tag), Some(op)) = (f.next(), f.next().and_then(|n| n.parse::<u64>().ok())) else {
            bail!("malformed journal line {line:?}");
        };
        match tag {
            "I" => {
                let intent = parse_intent(f.next(), f.collect())
                    .with_context(|| format!("journal line {line:?}"))?;
                if matches!(&intent, Intent::Admin { kind, .. } if kind == SYNC) {
                    sync_intents.insert(op, n);
                }
                ops.insert(
                    op,
                    OpRecord {
                        intent,
                        ack: None,
                        synced: false,
                    },
                );
            }
            "A" => {
                let ok = f.next() == Some("ok");
                let images = f
                    .map(|t| {
                        t.split_once('=')
                            .map(|(id, p)| (id.to_owned(), PathBuf::from(p)))
                            .with_context(|| format!("journal line {line:?}"))
                    })
                    .collect::<anyhow::Result<_>>()?;
                let Some(rec) = ops.get_mut(&op) else {
                    bail!("journal acknowledges op {op} it never intended");
                };
                rec.ack = Some((ok, images));
                acked_at.insert(op, n);
            }
            _ => bail!("malformed journal line {line:?}"),
        }
    }
    let last_sync = sync_intents
        .iter()
        .filter(|(op, _)| acked_at.contains_key(op))
        .map(|(_, &line)| line)
        .max();
    for (op, rec) in &mut ops {
        let bulk = matches!(&rec.intent, Intent::Admin { kind, .. } if kind == BULK_IMPORT);
        rec.synced = acked_at
            .get(op)
            .is_some_and(|&at| bulk || last_sync.is_some_and(|s| at < s));
    }
    Ok(ops.into_values().collect())
}

fn parse_intent(kind: Option<&str>, args: Vec<&str>) -> anyhow::Result<Intent> {
    Ok(match kind {
        Some("append") => Intent::Append(
            args.iter()
                .map(|a| {
                    let mut p = a.rsplitn(3, ':');
                    let (Some(count), Some(first), Some(id)) = (p.next(), p.next(), p.next())
                    else {
                        bail!("bad append item {a:?}");
                    };
                    Ok(AppendSpec {
                        id: id.to_owned(),
                        first_seq: first.parse()?,
                        count: count.parse()?,
                    })
                })
                .collect::<anyhow::Result<_>>()?,
        ),
        Some("create") => match args.as_slice() {
            [id] => Intent::Create {
                id: (*id).to_owned(),
            },
            _ => bail!("create names one id"),
        },
        Some(kind) => Intent::Admin {
            kind: kind.to_owned(),
            ids: args
                .iter()
                .map(|a| match a.split_once('=') {
                    Some((id, p)) => (id.to_owned(), Some(PathBuf::from(p))),
                    None => ((*a).to_owned(), None),
                })
                .collect(),
        },
        None => bail!("intent without a kind"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intents_and_acks_read_back_and_a_cut_line_acknowledges_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("j.log");
        let j = Journal::create(&path, &dir.path().join("img")).expect("journal");
        let items = vec![
            AppendSpec {
                id: "v0-00001".into(),
                first_seq: 4,
                count: 3,
            },
            AppendSpec {
                id: "v4-00002".into(),
                first_seq: 0,
                count: 1,
            },
        ];
        let a = j.intend(&Intent::Append(items.clone())).expect("intent");
        j.ack(a, true, &[]).expect("ack");
        let created = Intent::Create {
            id: "v0-00003".into(),
        };
        let c = j.intend(&created).expect("intent");
        j.ack(c, true, &[]).expect("ack");
        let img = j.save_image(&Image::Absent).expect("image");
        let b = j
            .intend(&Intent::Admin {
                kind: "import".into(),
                ids: vec![("imp-1".into(), Some(img.clone()))],
            })
            .expect("intent");
        // A line cut by the freeze: no "\n".
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("A {b} ok imp-1=").as_bytes()))
            .expect("append");
        let ops = read(&path).expect("read");
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0].intent, Intent::Append(items));
        assert_eq!(ops[0].ack, Some((true, vec![])));
        assert_eq!(ops[1].intent, created);
        assert_eq!(
            ops[2].intent,
            Intent::Admin {
                kind: "import".into(),
                ids: vec![("imp-1".into(), Some(img))]
            }
        );
        assert_eq!(ops[2].ack, None, "a cut line acknowledges nothing");
        assert!(!ops[0].synced, "no sync returned after it");
    }

    #[test]
    fn a_returned_sync_covers_exactly_the_acks_written_before_it_began() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("j.log");
        let j = Journal::create(&path, &dir.path().join("img")).expect("journal");
        let create = |id: &str| j.intend(&Intent::Create { id: id.into() }).expect("intent");
        let sync = || {
            j.intend(&Intent::Admin {
                kind: SYNC.into(),
                ids: vec![],
            })
            .expect("intent")
        };
        let before = create("v0-00000");
        j.ack(before, true, &[]).expect("ack");
        let during = create("v0-00002");
        let s = sync();
        j.ack(during, true, &[]).expect("ack");
        j.ack(s, true, &[]).expect("ack");
        let unreturned = sync();
        let after = create("v0-00004");
        j.ack(after, true, &[]).expect("ack");
        let ops = read(&path).expect("read");
        let synced: Vec<bool> = [before, during, after]
            .iter()
            .map(|&op| ops[op as usize].synced)
            .collect();
        assert_eq!(synced, [true, false, false]);
        assert!(ops[unreturned as usize].ack.is_none());
    }
}
