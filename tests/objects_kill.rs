//! Kill -9 of `sessionlog export-all --to` and `sessionlog archive` at random points, and of the
//! S3 server once mid-run (the run held there by a [`Gate`] that forwards half of what it must
//! upload, so the kill cannot land after the run ended): every object ever seen is whole, no session is left half-archived
//! (each is either intact in the store or archived with objects that read back as recorded),
//! `verify` is clean after every kill, and a rerun finishes the job: the bucket then imports
//! into a store equal to the source, and every archived session restores byte for byte.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sessionlog::engine::Store;
use sessionlog_archive::{import_root, restore, ArchiveSources, Bucket};
use sessionlog_harness::gen::GenOptions;
use sha2::{Digest as _, Sha256};

use crate::fixtures::temp_store;
use crate::gate::Gate;
use crate::objects::{
    all_exports, assert_verifies, bucket, cli_command, config, import_generated, options,
    server_with_bucket, transfer, varied_store, Exports,
};

/// Kill cycles of each command.
const CYCLES: u32 = 5;

/// A small PRNG for kill times; its seed is printed so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let seed = std::env::var("SESSIONLOG_KILL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("kill times seeded with SESSIONLOG_KILL_SEED={seed}");
        Rng(seed | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// SIGKILL `child` (if it still runs) and reap it; whether it was still running.
fn kill_9(child: &mut Child) -> bool {
    let running = matches!(child.try_wait(), Ok(None));
    let _ = Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status();
    let _ = child.wait();
    running
}

/// Every object the bucket holds for a session of `store` holds exactly that session's file.
fn assert_objects_whole(target: &Bucket, store: &Store) {
    let held = target.list().expect("list");
    for id in store.ids().expect("ids") {
        for file in store.root_files(&id, None).expect("files") {
            if !held.contains_key(&file.key) {
                continue;
            }
            let mut bytes = Vec::new();
            store
                .export_generation(&id, file.version, None, &mut bytes)
                .expect("export");
            let digest = target
                .object_digest(&file.key)
                .expect("digest")
                .expect("listed object");
            assert_eq!(
                (digest.bytes, digest.sha256),
                (bytes.len() as u64, <[u8; 32]>::from(Sha256::digest(&bytes))),
                "{} is not the session's file",
                file.key
            );
        }
    }
}

/// Every session of `store` is intact (exports as `before`) or archived with objects that read
/// back as recorded and hold the bytes it had.
fn assert_none_half_archived(
    store: &Store,
    sources: &ArchiveSources,
    before: &[(String, Exports)],
) {
    assert_verifies(store);
    for (id, exports) in before {
        match store.archived_copy(id).expect("record") {
            None => assert_eq!(&crate::objects::exports(store, id), exports, "{id} changed"),
            Some(copy) => {
                let view = sessionlog_archive::ArchivedView::open(store, sources, id, options())
                    .unwrap_or_else(|e| panic!("{id} archived at {}: {e}", copy.root));
                assert_eq!(
                    &crate::objects::exports(view.store(), id),
                    exports,
                    "{id} archived wrong"
                );
            }
        }
    }
}

/// `command` with its output dropped: a run killed midway reports failures nobody reads.
fn quiet(mut command: Command) -> Command {
    command.stdout(Stdio::null()).stderr(Stdio::null());
    command
}

fn run_to_success(mut command: Command) {
    let out = command.output().expect("run sessionlog");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kill_9_of_export_all_to_and_archive_then_reruns_finish_the_job() {
    let server = server_with_bucket("kills");
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    let before = {
        let store = varied_store(dir.path());
        all_exports(&store)
    };
    let mut rng = Rng::seeded();
    let exports = bucket(&server, "s3://kills/export");
    let mut killed_running = 0;
    for _ in 0..CYCLES {
        let mut child = quiet(cli_command(
            &server,
            &db,
            &["export-all", "--to", "s3://kills/export"],
        ))
        .spawn()
        .expect("spawn");
        std::thread::sleep(Duration::from_millis(50 + rng.below(600)));
        killed_running += u32::from(kill_9(&mut child));
        let store = Store::open(&db, options()).expect("open");
        assert_objects_whole(&exports, &store);
    }
    run_to_success(cli_command(
        &server,
        &db,
        &["export-all", "--to", "s3://kills/export"],
    ));
    let (_fresh_dir, fresh) = temp_store();
    for (name, outcome) in
        import_root(&fresh, &exports, &Default::default(), &|_| {}).expect("import")
    {
        assert!(outcome.is_ok(), "{name}: {outcome:?}");
    }
    assert_eq!(all_exports(&fresh), before);

    let sources = ArchiveSources::new(config(&server), transfer());
    for _ in 0..CYCLES {
        let mut child = quiet(cli_command(
            &server,
            &db,
            &["archive", "--older-than", "0s", "--to", "s3://kills/cold"],
        ))
        .spawn()
        .expect("spawn");
        std::thread::sleep(Duration::from_millis(50 + rng.below(900)));
        killed_running += u32::from(kill_9(&mut child));
        let store = Store::open(&db, options()).expect("open");
        assert_none_half_archived(&store, &sources, &before);
    }
    assert!(
        killed_running > 0,
        "every run ended before its kill: nothing was tested"
    );
    run_to_success(cli_command(
        &server,
        &db,
        &["archive", "--older-than", "0s", "--to", "s3://kills/cold"],
    ));
    let store = Store::open(&db, options()).expect("open");
    for (id, _) in &before {
        assert!(
            store.archived_copy(id).expect("record").is_some(),
            "{id} not archived"
        );
        restore(&store, &sources, id).expect("restore");
    }
    assert_eq!(all_exports(&store), before);
    assert_verifies(&store);
}

#[test]
fn the_s3_server_killed_mid_run_then_a_rerun_completes() {
    let mut server = server_with_bucket("crash");
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    let before = {
        let store = Store::open(&db, options()).expect("open");
        let opts = GenOptions {
            sessions: 150,
            events_per_session: 1_000,
            seed: 21,
            torn_fraction: 0.0,
        };
        import_generated(&store, &opts);
        all_exports(&store)
    };
    // Each run uploads every session's file: its kept export's bytes.
    let to_upload: u64 = before
        .iter()
        .map(|(id, e)| match &e[0] {
            Ok(bytes) => bytes.len() as u64,
            Err(e) => panic!("{id} does not export: {e}"),
        })
        .sum();
    let sources = ArchiveSources::new(config(&server), transfer());
    for (args, prefix) in [
        (
            ["export-all", "--to", "s3://crash/export", "", ""],
            "export",
        ),
        (
            ["archive", "--older-than", "0s", "--to", "s3://crash/cold"],
            "cold",
        ),
    ] {
        let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
        let run = args.join(" ");
        let watch = bucket(&server, &format!("s3://crash/{prefix}"));
        // The run goes through a gate that forwards half of what it must upload, then holds it:
        // when the server is killed, the run has stored part of its files and cannot have
        // finished.
        let gate = Gate::start(&server.endpoint(), to_upload / 2);
        let mut command = quiet(cli_command(&server, &db, &args));
        command.env("AWS_ENDPOINT_URL", gate.endpoint());
        let mut child = command.spawn().expect("spawn");
        assert!(
            gate.wait_held(Duration::from_secs(300), || matches!(
                child.try_wait(),
                Ok(None)
            )),
            "`sessionlog {run}` ended, or sent under {} bytes in 300 s, before the gate held it \
             (exit: {:?})",
            to_upload / 2,
            child.try_wait()
        );
        let stored = Instant::now();
        while watch.list().map_or(true, |l| l.is_empty()) {
            assert!(
                stored.elapsed() < Duration::from_secs(60),
                "`sessionlog {run}` sent half its bytes but the bucket holds nothing"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server.kill();
        drop(gate);
        let status = child.wait().expect("wait");
        assert!(
            !status.success(),
            "`sessionlog {run}` succeeded with the server killed"
        );
        server.restart().unwrap_or_else(|e| panic!("{e:#}"));
        {
            let store = Store::open(&db, options()).expect("open");
            assert_none_half_archived(&store, &sources, &before);
        }
        run_to_success(cli_command(&server, &db, &args));
    }
    let exports = bucket(&server, "s3://crash/export");
    let (_fresh_dir, fresh) = temp_store();
    for (name, outcome) in
        import_root(&fresh, &exports, &Default::default(), &|_| {}).expect("import")
    {
        assert!(outcome.is_ok(), "{name}: {outcome:?}");
    }
    assert_eq!(all_exports(&fresh), before);
    let store = Store::open(&db, options()).expect("open");
    assert_none_half_archived(&store, &sources, &before);
    for (id, _) in &before {
        restore(&store, &sources, id).expect("restore");
    }
    assert_eq!(all_exports(&store), before);
    assert_verifies(&store);
}
