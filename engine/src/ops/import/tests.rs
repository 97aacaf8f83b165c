//! The indexing reader against the full parser: every log imported through both lands the same
//! records in every column family, the same session metadata (its import time aside) and the
//! same report or error. Over DSH's fixtures (every version, both encodings) and generated V0
//! logs mixing the events the reader builds in part with adversarial variants of them.

use super::{ImportOptions, Landing};
use crate::layout::keys::{ALL_CFS, CF_SESSIONS};
use crate::store::Store;
use crate::test_support::{empty, fixture_logs};

/// Two stores: one imported through the indexing reader, one through the full parser.
struct Pair {
    _dirs: [tempfile::TempDir; 2],
    indexed: Store,
    full: Store,
    ids: Vec<Vec<u8>>,
}

impl Pair {
    fn new() -> Self {
        let (a, indexed) = empty();
        let (b, full) = empty();
        Pair {
            _dirs: [a, b],
            indexed,
            full,
            ids: Vec::new(),
        }
    }

    /// Import through both (`import` lands one log in a store with the landing given) and
    /// compare the outcomes. `false` when the id was already imported (a fresh pair is needed).
    fn import(
        &mut self,
        label: &str,
        import: impl Fn(&Store, Landing) -> crate::Result<super::ImportReport>,
    ) -> bool {
        let indexed = import(&self.indexed, Landing::default());
        let full = import(
            &self.full,
            Landing {
                full_parse: true,
                ..Landing::default()
            },
        );
        let shown = |r: &crate::Result<super::ImportReport>| match r {
            Ok(report) => format!("ok {report:?}"),
            Err(e) => format!("error {e}"),
        };
        assert_eq!(shown(&indexed), shown(&full), "{label}: outcome");
        match indexed {
            Ok(report) => self.ids.push(report.id.into_bytes()),
            Err(crate::Error::DuplicateSession { .. }) => return false,
            Err(_) => {}
        }
        true
    }

    /// Every record of both stores, and every imported session's metadata, are the same.
    fn check(&self, label: &str) {
        for cf in ALL_CFS {
            let (a, b) = (records(&self.indexed, cf), records(&self.full, cf));
            assert_eq!(a.len(), b.len(), "{label}: {cf} record count");
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(x.0, y.0, "{label}: {cf} keys");
                // Session records hold the import time; their metadata is compared below.
                if cf != CF_SESSIONS {
                    assert!(x.1 == y.1, "{label}: {cf} value at key {:?}", x.0);
                }
            }
        }
        for id in &self.ids {
            let meta = |store: &Store| {
                store.meta(id).expect("meta").map(|mut m| {
                    m.imported_at_ms = 0;
                    m
                })
            };
            assert_eq!(
                meta(&self.indexed),
                meta(&self.full),
                "{label}: metadata of {}",
                String::from_utf8_lossy(id)
            );
        }
    }
}

fn records(store: &Store, cf: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it = store.iter_all(cf).expect("iterator");
    it.seek_to_first();
    while let (Some(k), Some(v)) = (it.key(), it.value()) {
        out.push((k.to_vec(), v.to_vec()));
        it.next();
    }
    it.status().expect("scan");
    out
}

#[test]
fn the_indexing_reader_imports_every_fixture_as_the_full_parser_does() {
    let Some(logs) = fixture_logs() else {
        return;
    };
    let mut pair = Pair::new();
    for path in &logs {
        let label = path.display().to_string();
        let import = |store: &Store, landing| {
            store.land_path(path, &ImportOptions::default(), landing, &mut |_| {})
        };
        if !pair.import(&label, import) {
            pair.check("fixtures");
            pair = Pair::new();
            assert!(pair.import(&label, import), "{label}: imported twice");
        }
    }
    pair.check("fixtures");
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One body line at `seq` (`{seq}` and `{time}` in the templates), chosen by `rng`: the event
/// types the indexing reader builds in part, their adversarial variants, and the events
/// around them that the folds read in full.
fn line(rng: &mut Rng, seq: u64) -> Vec<u8> {
    const TEMPLATES: &[&str] = &[
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"hello \"world\" \u00e9"}}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"turn":1,"step":2,"chunk":{"type":"usage","usage":{"inputTokens":12,"outputTokens":3,"cacheReadTokens":1e400}}}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"turn":1,"step":2,"chunk":{"type":"us\u0061ge","usage":{"inputTokens":7}}}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"turn":1,"step":1,"chunk":{"type":"usage","type":"text-delta","usage":{"inputTokens":9}}}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"chunk":{"usage":{"inputTokens":4},"type":"usage"},"step":3,"turn":1}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"turn":1,"turn":2,"step":1,"chunk":{"type":"usage","usage":{"outputTokens":5}}}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"t\u0075rn":1,"step":1,"chunk":{"type":"usage","usage":{"outputTokens":5}}}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"0":1,"turn":1,"step":1,"chunk":{"type":"usage","usage":{"outputTokens":5}}}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"turn":1,"step":1,"chunk":"usage"}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"turn":1,"step":1,"chunk":{"1":2,"type":"usage","usage":{"inputTokens":3}}}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":[1,2]}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time}}"#,
        r#"{"type":"assistant\/chunk","seq":{seq},"time":{time},"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"\ud800 lone"}}}"#,
        r#"{"type":"assistant/chunk","type":"turn/end","seq":{seq},"time":{time},"data":{"turn":1}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"ignorable":true,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","text":"x"}}}"#,
        r#"{"type":"assistant/message","seq":{seq},"time":{time},"surfaceOp":"append","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"done"}]},"usage":{"inputTokens":100,"outputTokens":20}}}"#,
        r#"{"type":"assistant/message","seq":{seq},"time":{time},"surfaceOp":"append","sourceEventSeqs":[0,[1,2]],"data":{"turn":1,"step":1,"usage":{"inputTokens":100,"outputTokens":20}}}"#,
        r#"{"type":"assistant/message","seq":{seq},"time":{time},"surfaceOp":{"op":"replace","start":0,"end":0},"data":{"turn":1,"step":1,"usage":{"inputTokens":1}}}"#,
        r#"{"type":"assistant/message","seq":{seq},"time":{time},"data":{"turn":1,"step":1,"usage":null}}"#,
        r#"{"type":"tool/call","seq":{seq},"time":{time},"data":{"turn":1,"step":1,"id":"call_1","name":"read","arguments":"{\"path\":\"a\"}"}}"#,
        r#"{"type":"tool/call","seq":{seq},"time":{time},"surfaceOp":"append","data":{"id":"call_2"}}"#,
        r#"{"type":"tool/result","seq":{seq},"time":{time},"surfaceOp":"append","data":{"message":{"role":"tool","content":[{"type":"text","text":"out","content":"x"}]}}}"#,
        r#"{"type":"user/message","seq":{seq},"time":{time},"surfaceOp":"append","data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"}}"#,
        r#"{"type":"turn/start","seq":{seq},"time":{time},"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":{seq},"time":{time},"data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","seq":{seq},"time":{time},"data":{"turn":1,"reason":"stop"}}"#,
        r#"{"type":"request/header","seq":{seq},"time":{time},"data":{"reason":"fallback","header":{}}}"#,
        r#"{"type":"future/thing","seq":{seq},"time":{time},"data":{}}"#,
        r#"{"type":"assistant/chunk","seq":{gap},"time":{time},"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"gap"}}}"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"torn"#,
        r#"{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"a"}}} x"#,
        r#"null"#,
    ];
    // The last four templates break the log (a seq gap, a torn or trailing record, `null`):
    // one line in ten at most, so most logs commit a long run first.
    let defects = 4;
    let pick = if rng.below(10) == 0 {
        TEMPLATES.len() - defects + rng.below(defects as u64) as usize
    } else {
        rng.below((TEMPLATES.len() - defects) as u64) as usize
    };
    let template = TEMPLATES[pick];
    let mut text = template
        .replace("{seq}", &seq.to_string())
        .replace("{gap}", &(seq + 2).to_string())
        .replace("{time}", &(1_789_000_000_000 + seq).to_string())
        .into_bytes();
    match rng.below(200) {
        // Bytes that are not UTF-8, inside a string or outside one.
        0 => {
            if let Some(at) = text.windows(2).position(|w| w == b"\"}") {
                text.insert(at, 0xff);
            }
        }
        1 => text.push(0xfe),
        // Nesting past JSON.parse's depth limit, and just within it.
        2 => {
            let depth = if rng.below(2) == 0 { 1001 } else { 990 };
            let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            if let Some(at) = text.windows(7).position(|w| w == b"\"turn\":") {
                let inner = format!("\"deep\":{deep},");
                text.splice(at..at, inner.into_bytes());
            }
        }
        _ => {}
    }
    text
}

#[test]
fn the_indexing_reader_imports_generated_logs_as_the_full_parser_does() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut pair = Pair::new();
    for log in 0..400u64 {
        let id = format!("00000000-0000-4000-8000-{log:012}");
        let mut bytes = format!(
            r#"{{"type":"session","version":0,"id":"{id}","createdAt":1789000001000,"cwd":"/w"}}"#
        )
        .into_bytes();
        bytes.push(b'\n');
        let lines = rng.below(40);
        for seq in 0..lines {
            bytes.extend(line(&mut rng, seq));
            bytes.push(b'\n');
        }
        if rng.below(4) == 0 {
            bytes.extend(line(&mut rng, lines));
        }
        let label = format!("generated log {log}: {}", String::from_utf8_lossy(&bytes));
        let import = |store: &Store, landing| {
            store.land_jsonl(
                &id,
                &bytes[..],
                &ImportOptions::default(),
                landing,
                &mut |_| {},
            )
        };
        assert!(pair.import(&label, import), "{label}: id reused");
        if log % 100 == 99 {
            pair.check("generated logs");
        }
    }
    pair.check("generated logs");
}
