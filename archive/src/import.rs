//! `import s3://BUCKET/PREFIX`: a DSH session root in object storage, imported with the rules
//! and verdicts of a local root. The root is listed once and read as DSH lists a root: each
//! first-level name is a project directory, a session file directly in one is the refused flat
//! layout, and each session directory's canonical generation files (`session[.vN].jsonl[.zstd]`)
//! are one session. A session directory is fetched into a temporary directory and imported
//! from there by the engine's own reader, so its generations, DSH's identity rule and every
//! verdict are those of a local import; reports name the objects by their URLs.

use std::collections::BTreeMap;
use std::io::BufWriter;

use sessionlog_codec::format::generation::parse_generation_name;
use sessionlog_engine::{
    scan_session_dir, Error as EngineError, ImportOptions, ImportReport, RootLocation, Store,
};

use crate::bucket::Bucket;
use crate::error::{Error, Result};

/// One input of a bucket import and its outcome: the served object's URL (or the refused
/// object's), and the session imported or why not.
pub type BucketImport = Vec<(String, Result<ImportReport>)>;

/// Import every session of `bucket`'s root into `store` with `options` (its location,
/// generations and name are set per session); `progress` hears each object's bytes fetched.
pub fn import_root(
    store: &Store,
    bucket: &Bucket,
    options: &ImportOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<BucketImport> {
    let listing = bucket.list()?;
    let mut refused: BucketImport = Vec::new();
    let mut sessions: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for name in listing.keys() {
        let parts: Vec<&str> = name.split('/').collect();
        match parts.as_slice() {
            [_, file] if file.ends_with(".jsonl") || file.ends_with(".jsonl.zstd") => {
                let shown = format!("{}/{name}", bucket.root);
                let reason = format!(
                    "session artifact \"{shown}\" uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading"
                );
                refused.push((shown, Err(EngineError::RootLayout(reason).into())));
            }
            [project, session, file] if parse_generation_name(file).is_some() => {
                sessions
                    .entry(((*project).to_owned(), (*session).to_owned()))
                    .or_default()
                    .push((*file).to_owned());
            }
            _ => {}
        }
    }
    let sessions: Vec<_> = sessions.into_iter().collect();
    let outcomes = std::sync::Mutex::new(Vec::with_capacity(sessions.len()));
    crate::par::for_each(&sessions, bucket.transfer.sessions_in_flight, |entry| {
        let ((project, session), files) = entry;
        let outcome = import_session(store, bucket, options, project, session, files, progress);
        outcomes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(outcome);
    });
    let mut all = outcomes
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.extend(refused);
    Ok(all)
}

/// Fetch one session directory's generation files and import them.
fn import_session(
    store: &Store,
    bucket: &Bucket,
    options: &ImportOptions,
    project: &str,
    session: &str,
    files: &[String],
    progress: &(dyn Fn(u64) + Sync),
) -> (String, Result<ImportReport>) {
    let dir_url = format!("{}/{project}/{session}", bucket.root);
    let fetched = (|| {
        let tmp = tempfile::Builder::new()
            .prefix("sessionlog-import-")
            .tempdir()
            .map_err(Error::io("creating a temporary directory"))?;
        for file in files {
            let key = bucket.root.key(&format!("{project}/{session}/{file}"))?;
            let path = tmp.path().join(file);
            let what = || format!("writing {}", path.display());
            let out = std::fs::File::create(&path).map_err(Error::io(what()))?;
            let mut out = BufWriter::with_capacity(1 << 20, out);
            let digest = bucket.fetch_to(&key, &mut out)?;
            std::io::Write::flush(&mut out).map_err(Error::io(what()))?;
            progress(digest.bytes);
        }
        Ok(tmp)
    })();
    let tmp = match fetched {
        Ok(tmp) => tmp,
        Err(e) => return (dir_url, Err(e)),
    };
    let shown_tmp = tmp.path().display().to_string();
    let dir = match scan_session_dir(tmp.path()) {
        Ok(Some(dir)) => dir,
        Ok(None) => {
            let reason = format!("{dir_url} holds no session generation");
            return (dir_url, Err(Error::Location(reason)));
        }
        // Name the directory by its URL, not the temporary copy's path.
        Err(EngineError::RootLayout(m)) => {
            return (
                dir_url.clone(),
                Err(EngineError::RootLayout(m.replace(&shown_tmp, &dir_url)).into()),
            )
        }
        Err(e) => return (dir_url, Err(e.into())),
    };
    let served_url = format!(
        "{dir_url}/{}",
        dir.served
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let options = ImportOptions {
        location: Some(RootLocation {
            path: served_url.clone().into(),
            project_dir: project.to_owned(),
            session_dir: session.to_owned(),
        }),
        generations: Some(dir.clone()),
        name: Some(served_url.clone()),
        ..options.clone()
    };
    let imported = store.import_path(&dir.served.path, &options, &mut |_| {});
    (served_url, imported.map_err(Error::from))
}
