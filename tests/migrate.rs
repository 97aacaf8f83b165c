//! Migration to the current format (issue #9 item 1): the V0 fixture corpus migrated inside the
//! store, refusals that leave it unchanged (case 24), the V2 refusal of case 21, and zstd
//! successors written as DSH's migration writer writes them (case 28).

use sessionlog::codec::json::{parse, stringify, Object, Value};
use sessionlog::codec::migrate::producer_kind;
use sessionlog::engine::{Error, MigrateOptions, MigrationOutcome, Store};

use crate::fixtures::{export_bytes, fixtures, import_bytes, names_ending, temp_store};

/// A fixture as DSH's released V0 reader can take it: the snapshot goldens normalise the
/// header's cwd (`{{cwd}}`) and the request headers' tools (`"{{tools}}"`), which DSH requires to
/// be an absolute path and an array; the cwd is made `/srv/…` and the tools `[]`. Nothing else
/// changes.
fn prepared(bytes: &[u8]) -> Vec<u8> {
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .expect("a header line");
    let Ok(Value::Object(mut header)) = parse(std::str::from_utf8(&bytes[..end]).expect("utf8"))
    else {
        panic!("header is not an object");
    };
    if let Some(Value::String(cwd)) = header.get("cwd") {
        let cwd = cwd.to_string_lossy();
        if !cwd.starts_with('/') {
            let fixed = format!("/srv/{}", cwd.replace("{{cwd}}", "project"));
            header.insert("cwd".into(), Value::from(fixed.as_str()));
        }
    }
    let body =
        String::from_utf8_lossy(&bytes[end..]).replace(r#""tools":"{{tools}}""#, r#""tools":[]"#);
    let mut out = stringify(&Value::Object(header)).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// `bytes` as DSH's live zstd writer frames a log written one event per batch: a frame a line.
fn frame_per_line(bytes: &[u8]) -> Vec<u8> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .flat_map(|line| sessionlog::codec::format::zstd::compress_frame(line).expect("frame"))
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The successors DSH 0.2's own migration code wrote for the prepared fixtures (its stages and
/// its migration writer run under Node 22 outside this repository), pinned by SHA-256 of the
/// prepared input, the `.jsonl` successor and the `.jsonl.zstd` successor (header frame, then
/// the rows through one streaming compressor): ours must be the same bytes in both encodings.
/// The zstd source is the prepared file as DSH's live writer frames it, one frame per line.
#[test]
fn migrated_fixtures_are_byte_identical_to_dsh_0_2s_own_migration() {
    let Some(fx) = fixtures() else { return };
    let golden = include_str!("data/migrate-dsh-0.2.sha256");
    let mut checked = 0;
    for line in golden.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let [name, input, plain, zstd] = fields[..] else {
            panic!("malformed golden line {line}");
        };
        let bytes = prepared(&std::fs::read(fx.join("dsh").join(name)).expect("fixture"));
        assert_eq!(
            sha256_hex(&bytes),
            input,
            "{name}: prepared differently from DSH's run"
        );
        let framed = frame_per_line(&bytes);
        for (source, want) in [(None, plain), (Some(framed), zstd)] {
            let (_dir, store) = temp_store();
            let id = match &source {
                None => {
                    import_bytes(&store, name, &bytes, false)
                        .expect("import")
                        .id
                }
                Some(z) => {
                    store
                        .import_zstd(name, z, &Default::default())
                        .expect("import")
                        .id
                }
            };
            store
                .migrate(&id, &MigrateOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut v4 = Vec::new();
            store.export(&id, None, &mut v4).expect("export");
            assert_eq!(
                sha256_hex(&v4),
                want,
                "{name} (zstd: {}): not DSH's bytes",
                source.is_some()
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 97);
}

/// A V0 message (DSH 0.1's model) in DSH 0.2's: a tool result is a tool-role message, and a
/// plugin source names its producer (the codec's table of DSH's renames).
fn v0_message_in_v4_model(message: &Value) -> Value {
    let mut m = message.as_object().expect("message object").clone();
    if let Some(Value::Object(source)) = m.get("source").cloned() {
        if source.get("kind").and_then(Value::as_str) == Some("plugin") {
            let plugin = source
                .get("plugin")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let kind = producer_kind(plugin, m.get("role"));
            let mut renamed = Object::new();
            for (k, v) in source.iter() {
                if k.eq_str("plugin") {
                    continue;
                }
                let v = if k.eq_str("kind") {
                    Value::from(kind.as_str())
                } else {
                    v.clone()
                };
                renamed.insert(k.clone(), v);
            }
            m.insert("source".into(), Value::Object(renamed));
        }
    }
    let wrapper = match m.get("content") {
        Some(Value::Array(blocks)) if blocks.len() == 1 => blocks[0]
            .as_object()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-result"))
            .cloned(),
        _ => None,
    };
    let Some(wrapper) = wrapper.filter(|_| m.get("role").and_then(Value::as_str) == Some("user"))
    else {
        return Value::Object(m);
    };
    let mut lifted = Object::new()
        .with("role", "tool")
        .with("source", m.get("source").cloned().unwrap_or_default())
        .with(
            "toolCallId",
            wrapper.get("toolCallId").cloned().unwrap_or_default(),
        )
        .with(
            "content",
            wrapper.get("content").cloned().unwrap_or_default(),
        );
    if let Some(e) = wrapper.get("isError") {
        lifted.insert("isError".into(), e.clone());
    }
    lifted.insert("id".into(), m.get("id").cloned().unwrap_or_default());
    Value::Object(lifted)
}

/// The migrated session's messages without the system-prompt nodes V0 has no counterpart of
/// (DSH 0.1 sent the prompt from the request header, not as a message).
fn messages_without_system_prompt(store: &Store, id: &str) -> Vec<String> {
    store
        .messages_at(id, None)
        .unwrap_or_else(|e| panic!("messages of migrated {id}: {e}"))
        .iter()
        .filter(|m| {
            m.as_object()
                .and_then(|o| o.get("role"))
                .and_then(Value::as_str)
                != Some("system")
        })
        .map(stringify)
        .collect()
}

#[test]
fn the_v0_corpus_migrates_or_is_refused_with_dsh_reason_and_the_store_unchanged() {
    let Some(fx) = fixtures() else { return };
    let expected_dir = fx.join("dsh-expected");
    // DSH 0.2's own refusal of each fixture it does not migrate (from the same run as the
    // golden successors; the two it migrates but its V4 reader refuses are not listed).
    let dsh_refusals: std::collections::HashMap<&str, &str> =
        include_str!("data/migrate-dsh-0.2.refusals")
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .collect();
    let mut migrated = 0;
    let mut compared = 0;
    let mut admission_refusals = 0;
    let mut refused = std::collections::BTreeMap::<String, usize>::new();
    for name in names_ending(&fx.join("dsh"), &[".jsonl"]) {
        let raw = std::fs::read(fx.join("dsh").join(&name)).expect("fixture");
        let first = raw.split(|&b| b == b'\n').next().unwrap_or_default();
        let is_session = parse(std::str::from_utf8(first).unwrap_or(""))
            .ok()
            .and_then(|h| h.as_object().and_then(|o| o.get("type")).cloned())
            == Some(Value::from("session"));
        if !is_session {
            continue;
        }
        let bytes = prepared(&raw);
        let (_dir, store) = temp_store();
        let id = import_bytes(&store, &name, &bytes, false)
            .expect("import")
            .id;
        let before = format!("{:?}", store.list().expect("list"));
        match store.migrate(&id, &MigrateOptions::default()) {
            Ok(report) => {
                migrated += 1;
                assert!(report.published);
                let summary = &store.list().expect("list")[0];
                assert_eq!(summary.format, 4, "{name}");
                let mut v0 = Vec::new();
                store
                    .export_generation(&id, 0, None, &mut v0)
                    .expect("generation 0");
                assert_eq!(v0, bytes, "{name}: the source generation is kept unchanged");
                let problems = store.verify(&[]).expect("verify").problems;
                assert!(problems.is_empty(), "{name}: {problems:?}");
                let stem = name.trim_end_matches(".jsonl");
                let expected = expected_dir.join(format!("{stem}.messages.jsonl"));
                if let Ok(text) = std::fs::read_to_string(&expected) {
                    let want: Vec<String> = text
                        .lines()
                        .map(|l| stringify(&v0_message_in_v4_model(&parse(l).expect("message"))))
                        .collect();
                    assert_eq!(messages_without_system_prompt(&store, &id), want, "{name}");
                    compared += 1;
                }
            }
            Err(Error::Migration { reason, .. }) => {
                let rule: String = reason
                    .chars()
                    .filter(|c| !c.is_ascii_digit())
                    .take(70)
                    .collect();
                *refused.entry(rule).or_default() += 1;
                match dsh_refusals.get(name.as_str()) {
                    Some(dsh) => assert_eq!(
                        reason,
                        format!("{dsh}; source v0 artifact remains unchanged"),
                        "{name}: not DSH's refusal"
                    ),
                    // DSH's stages migrate it; its V4 reader is what refuses the result.
                    None => {
                        assert!(
                            reason.starts_with(
                                "Session migration from v0 to v4 refuses the transformed artifact: "
                            ),
                            "{name}: refused ({reason}), but DSH 0.2 migrates it"
                        );
                        admission_refusals += 1;
                    }
                }
                assert_eq!(
                    format!("{:?}", store.list().expect("list")),
                    before,
                    "{name}: refused, yet changed"
                );
                assert_eq!(export_bytes(&store, &id), bytes, "{name}");
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    eprintln!("migrated {migrated} (messages compared for {compared}); refused: {refused:#?}");
    assert_eq!(
        (
            migrated,
            refused.values().sum::<usize>() - admission_refusals,
            admission_refusals
        ),
        (97, dsh_refusals.len(), 2)
    );
    assert!(
        compared >= 40,
        "only {compared} migrated sessions had V0 messages to compare"
    );
}

#[test]
fn case_24_a_refused_migration_leaves_the_store_unchanged() {
    let (_dir, store) = temp_store();
    let log = concat!(
        r#"{"type":"session","version":0,"id":"r","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
        "\n",
        r#"{"type":"turn/start","seq":0,"time":2,"data":{"turn":1}}"#,
        "\n",
        r#"{"type":"mode/set","seq":1,"time":3,"data":{"mode":"x"}}"#,
        "\n",
    );
    import_bytes(&store, "r", log.as_bytes(), false).expect("import");
    let before = format!("{:?}", store.list().expect("list"));
    let e = store
        .migrate("r", &MigrateOptions::default())
        .expect_err("refused");
    assert_eq!(
        e.to_string(),
        "session \"r\": migration refused: session \"r\" contains unsupported legacy mode/set event at seq 1; source v0 artifact remains unchanged"
    );
    assert_eq!(format!("{:?}", store.list().expect("list")), before);
    assert_eq!(export_bytes(&store, "r"), log.as_bytes());
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
}

#[test]
fn case_21_the_v2_surface_before_its_first_step_is_refused() {
    let Some(fx) = fixtures() else { return };
    let name = "zsagi1368+deepseek-harness-zDSH__packages__experimental__webworker-runtime__tests__fixtures__vfs-example__home__sessions__--dsh-workspace--__preview-follow-up-builder__session.v2.jsonl";
    let bytes = std::fs::read(fx.join("dsh-later").join(name)).expect("fixture");
    let (_dir, store) = temp_store();
    let id = import_bytes(&store, name, &bytes, false)
        .expect("import")
        .id;
    let e = store
        .migrate(&id, &MigrateOptions { dry_run: true })
        .expect_err("refused");
    assert!(
        e.to_string().ends_with("format v2 surface before first step cannot acquire a system head without changing chronology; source v2 artifact remains unchanged"),
        "{e}"
    );
    assert_eq!(export_bytes(&store, &id), bytes);
}

#[test]
fn case_28_a_zstd_successor_is_a_header_frame_and_one_body_frame() {
    let (_dir, store) = temp_store();
    let plain = concat!(
        r#"{"type":"session","version":0,"id":"z","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
        "\n",
        r#"{"type":"turn/start","seq":0,"time":2,"data":{"turn":1}}"#,
        "\n",
        r#"{"type":"step/start","seq":1,"time":3,"data":{"turn":1,"step":1}}"#,
        "\n",
        r#"{"type":"request/header","seq":2,"time":4,"data":{"header":{"config":{"provider":"p","model":"m"},"system":"S"},"reason":"initial"}}"#,
        "\n",
        r#"{"type":"step/end","seq":3,"time":5,"data":{"turn":1,"step":1}}"#,
        "\n",
        r#"{"type":"turn/end","seq":4,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        "\n",
    );
    let zstd = frame_per_line(plain.as_bytes());
    store
        .import_zstd("z", &zstd, &Default::default())
        .expect("import");
    let dry = store
        .migrate("z", &MigrateOptions { dry_run: true })
        .expect("dry run");
    assert!(!dry.published);
    assert_eq!(
        store.list().expect("list")[0].format,
        0,
        "a dry run publishes nothing"
    );
    let report = store
        .migrate("z", &MigrateOptions::default())
        .expect("migrate");
    assert_eq!((report.source_events, report.events), (5, 7));
    assert_eq!(store.list().expect("list")[0].format, 4);
    let mut v4 = Vec::new();
    store.export("z", None, &mut v4).expect("export");
    let frames = sessionlog::codec::format::zstd::read_frames(&v4).expect("frames");
    assert_eq!(frames.frames.len(), 2, "header frame + one body frame");
    let mut v0 = Vec::new();
    store
        .export_generation("z", 0, None, &mut v0)
        .expect("generation 0");
    assert_eq!(v0, zstd);
    let messages = store.messages_at("z", None).expect("messages");
    assert_eq!(
        messages.iter().map(stringify).collect::<Vec<_>>(),
        [
            r#"{"id":"v2-to-v3-system-c4f204c2020ba1df8e0c8520d8e49f83feff486cf7bcd6c6450d16dec822e646","role":"system","source":{"kind":"system-prompt"},"content":[{"type":"text","text":"S"}]}"#
        ]
    );
    let again = store
        .migrate("z", &MigrateOptions::default())
        .expect_err("current");
    assert!(
        again
            .to_string()
            .contains("already in the current format v4"),
        "{again}"
    );
}

/// Generated V0 sessions (chunked streams, tool rounds, replacements, compactions, torn tails)
/// migrate, and the V4 successor's messages are the V0 session's in DSH 0.2's model; or, where
/// the generator regenerated an assistant message over another (a V0 replacement citing chunks
/// an earlier message already claimed), DSH's V1→V2 refusal leaves the session unchanged.
#[test]
fn generated_v0_sessions_migrate_to_the_same_messages() {
    let opts = sessionlog_harness::gen::GenOptions {
        sessions: 16,
        events_per_session: 1500,
        seed: 41,
        ..Default::default()
    };
    let (_dir, store) = temp_store();
    let mut sessions = Vec::new();
    for i in 0..opts.sessions {
        let bytes = sessionlog_harness::gen::session_bytes(i, &opts);
        let id = import_bytes(&store, "gen", &bytes, false)
            .expect("import")
            .id;
        let messages: Vec<String> = store
            .messages_at(&id, None)
            .expect("V0 messages")
            .iter()
            .map(|m| stringify(&v0_message_in_v4_model(m)))
            .collect();
        sessions.push((id, bytes, messages));
    }
    let outcomes = store
        .migrate_all(&MigrateOptions::default(), &mut |_| {})
        .expect("migrate all");
    let mut migrated = 0;
    assert_eq!(outcomes.len(), sessions.len());
    for (id, bytes, want) in &sessions {
        let outcome = outcomes.iter().find(|o| match o {
            MigrationOutcome::Migrated(r) => &r.id == id,
            MigrationOutcome::Refused(i, _) | MigrationOutcome::Current(i) => i == id,
        });
        match outcome.unwrap_or_else(|| panic!("no outcome for {id}")) {
            MigrationOutcome::Migrated(_) => {
                migrated += 1;
                assert_eq!(messages_without_system_prompt(&store, id), *want, "{id}");
                let mut v0 = Vec::new();
                store
                    .export_generation(id, 0, None, &mut v0)
                    .expect("generation 0");
                assert_eq!(&v0, bytes, "{id}");
            }
            MigrationOutcome::Refused(_, reason) => {
                assert!(
                    reason.contains("chunk references are not one complete ordered attempt"),
                    "{id}: {reason}"
                );
                assert_eq!(&export_bytes(&store, id), bytes, "{id}");
            }
            MigrationOutcome::Current(_) => panic!("{id} was V0"),
        }
    }
    assert!(
        migrated >= 8,
        "only {migrated} of {} migrated",
        sessions.len()
    );
    let problems = store.verify(&[]).expect("verify").problems;
    assert!(problems.is_empty(), "{problems:?}");
}

/// Case 23 in the store: a V3 parent whose direct child (`origin:"subagent"`, naming it as
/// `parentSession`) is stored beside it, with no catalog entry, gets the child's
/// `subagent/catalog` fact appended after its last event, from the child's own descriptor.
#[test]
fn case_23_the_catalog_is_backfilled_from_children_in_the_store() {
    let (_dir, store) = temp_store();
    let parent = concat!(
        r#"{"type":"session","version":3,"id":"parent","createdAt":1,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#,
        "\n",
        r#"{"type":"turn/start","data":{"turn":1},"seq":0,"time":5}"#,
        "\n",
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}},"seq":1,"time":9}"#,
        "\n",
    );
    let child = concat!(
        r#"{"type":"session","version":4,"id":"child","createdAt":7,"cwd":"/w","parentSession":"parent","isSeeded":false,"origin":"subagent","delegationDepth":1}"#,
        "\n",
        r#"{"type":"subagent/descriptor","data":{"version":3,"mode":"one-shot","provider":"spawn","label":"Look"},"seq":0,"time":8}"#,
        "\n",
    );
    import_bytes(&store, "parent", parent.as_bytes(), false).expect("import parent");
    import_bytes(&store, "child", child.as_bytes(), false).expect("import child");
    store
        .migrate("parent", &MigrateOptions::default())
        .expect("migrate");
    let events = crate::fixtures::all_events(&store, "parent");
    assert_eq!(
        stringify(events.last().expect("events")),
        r#"{"type":"subagent/catalog","seq":2,"time":9,"data":{"version":0,"childId":"child","childCreatedAt":7,"mode":"one-shot","label":"Look"}}"#
    );
    let mut v3 = Vec::new();
    store
        .export_generation("parent", 3, None, &mut v3)
        .expect("generation 3");
    assert_eq!(v3, parent.as_bytes());
}

/// A fork family, in both encodings: the parent is refused while its fork reads its prefix;
/// `migrate --all` takes the fork first (it becomes a whole V4 log of its own, its V0 file kept
/// as generation 0), then the parent. Both answer the same messages as before, in the V4 model.
#[test]
fn a_fork_family_migrates_forks_first() {
    let opts = sessionlog_harness::gen::GenOptions {
        events_per_session: 1500,
        torn_fraction: 0.0,
        seed: 5,
        ..Default::default()
    };
    let parent = (0..16)
        .map(|i| sessionlog_harness::gen::session_bytes(i, &opts))
        .find(|bytes| {
            let (_d, probe) = temp_store();
            let id = import_bytes(&probe, "probe", bytes, false)
                .expect("probe")
                .id;
            probe
                .migrate(&id, &MigrateOptions { dry_run: true })
                .is_ok()
        })
        .expect("a generated session DSH can migrate");
    for zstd in [false, true] {
        let (_dir, store) = temp_store();
        let id = if zstd {
            let frames = frame_per_line(&parent);
            store
                .import_zstd("parent", &frames, &Default::default())
                .expect("import")
                .id
        } else {
            import_bytes(&store, "parent", &parent, false)
                .expect("import")
                .id
        };
        let events = crate::fixtures::all_events(&store, &id);
        let boundary = events
            .iter()
            .position(|e| {
                e.as_object().and_then(|o| o.get("type")) == Some(&Value::from("turn/end"))
            })
            .expect("a turn/end") as u64;
        store.fork(&id, Some(boundary), "child").expect("fork");
        let mut child_file = Vec::new();
        store
            .export("child", None, &mut child_file)
            .expect("export");
        let messages = |store: &Store, id: &str| -> Vec<String> {
            store
                .messages_at(id, None)
                .expect("messages")
                .iter()
                .map(|m| stringify(&v0_message_in_v4_model(m)))
                .collect()
        };
        let want = [messages(&store, &id), messages(&store, "child")];
        let refused = store
            .migrate(&id, &MigrateOptions::default())
            .expect_err("parent first");
        assert!(
            refused
                .to_string()
                .contains("the fork \"child\" reads its prefix"),
            "{refused}"
        );
        let outcomes = store
            .migrate_all(&MigrateOptions::default(), &mut |_| {})
            .expect("migrate all");
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o, MigrationOutcome::Migrated(_))),
            "{outcomes:?}"
        );
        assert_eq!(
            [
                messages_without_system_prompt(&store, &id),
                messages_without_system_prompt(&store, "child")
            ],
            want
        );
        let mut v0 = Vec::new();
        store
            .export_generation("child", 0, None, &mut v0)
            .expect("generation 0");
        assert_eq!(v0, child_file, "zstd: {zstd}");
        let problems = store.verify(&[]).expect("verify").problems;
        assert!(problems.is_empty(), "{problems:?}");
    }
}

/// A store opened with `V0Reads::Migrated` answers a V0 session's views in DSH 0.2's model (the
/// in-memory successor), exactly as the published successor answers them once migrated.
#[test]
fn v0_reads_can_be_served_through_migration() {
    let Some(fx) = fixtures() else { return };
    let name = "examples__acp-agent__tests__snapshots__hook-cc-posttool-context__session.jsonl";
    let bytes = prepared(&std::fs::read(fx.join("dsh").join(name)).expect("fixture"));
    let dir = tempfile::tempdir().expect("temp dir");
    let options = sessionlog::engine::Options {
        durability: sessionlog::engine::Durability::Buffered,
        v0_reads: sessionlog::engine::V0Reads::Migrated,
        ..Default::default()
    };
    let store = Store::open(dir.path().join("db"), options).expect("open");
    let id = import_bytes(&store, name, &bytes, false)
        .expect("import")
        .id;
    let views = |store: &Store| {
        let messages = store.messages_at(&id, None).expect("messages");
        let surface = store.surface_at(&id, None).expect("surface").to_json();
        let usage = store.state_at(&id, "tokenUsage", None).expect("usage");
        (
            messages.iter().map(stringify).collect::<Vec<_>>(),
            surface,
            stringify(&usage),
        )
    };
    let read = views(&store);
    assert!(
        read.0.iter().any(|m| m.contains(r#""role":"tool""#)),
        "{:?}",
        read.0
    );
    store
        .migrate(&id, &MigrateOptions::default())
        .expect("migrate");
    assert_eq!(views(&store), read);
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]
        /// A fixture log with lines dropped, duplicated or swapped: the migration either
        /// publishes a successor the store verifies (generation 0 byte-exact) or is refused with
        /// the store unchanged; nothing else happens.
        #[test]
        fn a_damaged_log_is_migrated_or_refused_cleanly(
            pick in 0usize..64,
            edits in proptest::collection::vec((0u8..3, any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..4),
        ) {
            let Some(fx) = fixtures() else { return Ok(()) };
            let names: Vec<&str> = include_str!("data/migrate-dsh-0.2.sha256")
                .lines()
                .filter_map(|l| l.split(' ').next())
                .collect();
            let name = names[pick % names.len()];
            let bytes = prepared(&std::fs::read(fx.join("dsh").join(name)).expect("fixture"));
            let mut lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
            for (op, a, b) in &edits {
                if lines.len() < 3 {
                    break;
                }
                let (i, j) = (1 + a.index(lines.len() - 1), 1 + b.index(lines.len() - 1));
                match op {
                    0 => { lines.remove(i); }
                    1 => lines.insert(i, lines[j]),
                    _ => lines.swap(i, j),
                }
            }
            let damaged = lines.concat();
            let (_dir, store) = temp_store();
            let Ok(report) = import_bytes(&store, name, &damaged, false) else { return Ok(()) };
            let before = format!("{:?}", store.list().expect("list"));
            match store.migrate(&report.id, &MigrateOptions::default()) {
                Ok(_) => {
                    let mut v0 = Vec::new();
                    store.export_generation(&report.id, 0, None, &mut v0).expect("generation 0");
                    prop_assert_eq!(v0, damaged);
                }
                Err(Error::Migration { reason, .. }) => {
                    prop_assert!(reason.ends_with("remains unchanged"), "{}", reason);
                    prop_assert_eq!(format!("{:?}", store.list().expect("list")), before);
                    prop_assert_eq!(export_bytes(&store, &report.id), damaged);
                }
                Err(e) => prop_assert!(false, "{name}: {e}"),
            }
            let problems = store.verify(&[]).expect("verify").problems;
            prop_assert!(problems.is_empty(), "{:?}", problems);
        }
    }
}
