//! Object storage: `export-all --to`, `import s3://…`, `archive`, `restore`, `verify --objects`,
//! and reads of archived sessions (fetched into a scratch store), through
//! `sessionlog-archive`.

use std::io::Write;
use std::process::ExitCode;

use serde::Serialize;
use sessionlog_archive::{ArchiveRoot, ArchiveSources, ArchivedView, Bucket, S3Config, Transfer};
use sessionlog_engine::{ExportFormat, ImportOptions, ImportReport, Options, Store, VerifyProblem};
use sessionlog_tools_common::output::report_line;

use crate::cli::S3Args;

/// What reaching object storage takes: the configuration from the environment and the flags.
pub struct ObjectStorage {
    config: S3Config,
    transfer: Transfer,
}

impl ObjectStorage {
    /// `S3Config::from_env`, with the flags' endpoint and region over it, and the flags' retry
    /// timeout.
    pub fn new(args: &S3Args) -> Self {
        let mut config = S3Config::from_env();
        if let Some(endpoint) = &args.endpoint_url {
            config.endpoint = Some(endpoint.clone());
        }
        if let Some(region) = &args.region {
            config.region = Some(region.clone());
        }
        let transfer = Transfer {
            retry_timeout: std::time::Duration::from_secs(args.s3_retry_timeout),
            ..Transfer::default()
        };
        ObjectStorage { config, transfer }
    }

    fn bucket(&self, url: &str) -> anyhow::Result<Bucket> {
        Ok(Bucket::open(
            ArchiveRoot::parse(url)?,
            &self.config,
            self.transfer,
        )?)
    }

    /// The sources archived sessions are fetched from.
    pub fn sources(&self) -> ArchiveSources {
        ArchiveSources::new(self.config.clone(), self.transfer)
    }

    /// Run `read` of session `id` on `store`, or, when it is archived there, on a scratch store
    /// holding it, fetched from its archive.
    pub fn read(
        &self,
        store: &Store,
        options: &Options,
        id: &str,
        read: impl Fn(&Store) -> anyhow::Result<ExitCode>,
    ) -> anyhow::Result<ExitCode> {
        match read(store) {
            Err(e) if is_archived(&e) => {
                let view = ArchivedView::open(store, &self.sources(), id, options.clone())?;
                read(view.store())
            }
            other => other,
        }
    }

    /// `export-all --to URL`.
    pub fn export_all(
        &self,
        store: &Store,
        url: &str,
        format: Option<ExportFormat>,
        json: bool,
    ) -> anyhow::Result<ExitCode> {
        let bucket = self.bucket(url)?;
        let started = std::time::Instant::now();
        let bar = crate::cmd::session_bar(store.ids()?.len() as u64, "exporting");
        let summary =
            sessionlog_archive::export_all(store, &bucket, &self.sources(), format, &|n| {
                bar.inc(n)
            })?;
        bar.finish_and_clear();
        let seconds = started.elapsed().as_secs_f64();
        for (id, error) in &summary.failures {
            eprintln!("failed session \"{id}\": {error}");
        }
        let root = bucket.root().to_string();
        if json {
            let line = Rooted {
                to: &root,
                report: &summary,
                seconds: Some(seconds),
            };
            report_line(&mut std::io::stdout().lock(), &line)?;
        } else {
            println!(
                "exported {} sessions ({} bytes) to {root}: {} objects created, {} already there, {} failed",
                summary.sessions,
                summary.bytes,
                summary.created,
                summary.already_there,
                summary.failures.len()
            );
        }
        Ok(exit(summary.failures.is_empty()))
    }

    /// `import s3://…`: every session of the root, reported as a local import reports.
    pub fn import(
        &self,
        store: &Store,
        url: &str,
        options: &ImportOptions,
    ) -> anyhow::Result<Vec<(String, Result<ImportReport, ImportFailure>)>> {
        let bucket = self.bucket(url)?;
        let bar = crate::cmd::progress_bar(0, "importing");
        let outcomes = sessionlog_archive::import_root(store, &bucket, options, &|n| bar.inc(n))?;
        bar.finish_and_clear();
        Ok(outcomes
            .into_iter()
            .map(|(name, r)| {
                let r = r.map_err(|e| match e {
                    sessionlog_archive::Error::Engine(e) => ImportFailure::Engine(e),
                    other => ImportFailure::Other(other.to_string()),
                });
                (name, r)
            })
            .collect())
    }

    /// `archive --older-than D --to URL`.
    pub fn archive(
        &self,
        store: &Store,
        url: &str,
        older_than_ms: i64,
        json: bool,
    ) -> anyhow::Result<ExitCode> {
        let bucket = self.bucket(url)?;
        let bar = crate::cmd::session_bar(0, "archiving");
        let summary = sessionlog_archive::archive(store, &bucket, older_than_ms, &|n| bar.inc(n))?;
        bar.finish_and_clear();
        for (id, error) in &summary.failures {
            eprintln!("failed session \"{id}\": {error}");
        }
        let root = bucket.root().to_string();
        if json {
            let line = Rooted {
                to: &root,
                report: &summary,
                seconds: None,
            };
            report_line(&mut std::io::stdout().lock(), &line)?;
        } else {
            let mut out = std::io::stdout().lock();
            for (id, bytes) in &summary.archived {
                writeln!(out, "archived {id} ({bytes} bytes)")?;
            }
            for (id, reason) in &summary.kept {
                writeln!(out, "kept {id}: {reason}")?;
            }
            let bytes: u64 = summary.archived.iter().map(|(_, b)| b).sum();
            writeln!(
                out,
                "archived {} sessions ({bytes} bytes) to {root}, kept {}, {} failed",
                summary.archived.len(),
                summary.kept.len(),
                summary.failures.len()
            )?;
        }
        Ok(exit(summary.failures.is_empty()))
    }

    /// `restore ID`.
    pub fn restore(&self, store: &Store, id: &str, json: bool) -> anyhow::Result<ExitCode> {
        let report = sessionlog_archive::restore(store, &self.sources(), id)?;
        for (key, error) in &report.not_deleted {
            eprintln!("restored, but its object {key} was not deleted: {error}");
        }
        let r = &report.import;
        if json {
            report_line(&mut std::io::stdout().lock(), &report)?;
        } else {
            println!(
                "restored {}: {}, {} events, {} bytes; {} objects deleted from the archive",
                r.id, r.verdict, r.events, r.bytes, report.deleted
            );
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `verify --objects`: every archived session's objects read back and checked against their
    /// record; a problem each that fails.
    pub fn verify_objects(
        &self,
        store: &Store,
        ids: &[String],
    ) -> anyhow::Result<Vec<VerifyProblem>> {
        let sources = self.sources();
        let ids = if ids.is_empty() {
            store.ids()?
        } else {
            ids.to_vec()
        };
        let mut problems = Vec::new();
        for id in ids {
            let Some(copy) = store.archived_copy(&id)? else {
                continue;
            };
            for file in &copy.files {
                if let Err(e) = sources.fetch_file(&copy.root, file, &mut std::io::sink()) {
                    problems.push(VerifyProblem {
                        session: id.clone(),
                        detail: format!("its archived object {}: {e}", file.key),
                    });
                }
            }
        }
        Ok(problems)
    }
}

/// Why one input of a bucket import was not imported.
pub enum ImportFailure {
    /// The store refused it (as it would a local file).
    Engine(sessionlog_engine::Error),
    /// It could not be fetched, or the fleet refused it.
    Other(String),
}

impl From<sessionlog_cluster::Error> for ImportFailure {
    fn from(e: sessionlog_cluster::Error) -> Self {
        match e {
            sessionlog_cluster::Error::Store(e) => ImportFailure::Engine(e),
            other => ImportFailure::Other(other.to_string()),
        }
    }
}

/// Whether an error is the engine's refusal of an archived session's bytes.
fn is_archived(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<sessionlog_engine::Error>(),
            Some(sessionlog_engine::Error::Archived { .. })
        )
    })
}

/// A report of a run against an object-storage root, as `--json` prints it: the root, the
/// report's own rendering (what Node returns), and the run's seconds where they are timed.
#[derive(Serialize)]
struct Rooted<'a, R> {
    to: &'a str,
    #[serde(flatten)]
    report: &'a R,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
