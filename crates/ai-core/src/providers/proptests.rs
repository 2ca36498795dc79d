//! Properties of the streamed-reply readers of the four dialects: any bytes, cut anywhere, end in
//! a whole reply or one error; a valid stream gives the same reply however it is cut.

use std::time::Duration;

use futures_util::{StreamExt, stream};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::json;

use super::wire::{Decode, Ending, read_body};
use super::{ProviderError, StreamItem, anthropic, cohere, gemini, openai};

/// `cases` per property, or `PROPTEST_CASES` when set; nothing is written into the source tree
/// (a failure prints its input).
fn config(cases: u32) -> Config {
    let default = Config::default();
    Config {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            default.cases
        } else {
            cases
        },
        failure_persistence: None,
        ..default
    }
}

#[derive(Debug, Clone, Copy)]
enum Dialect {
    OpenAi,
    Anthropic,
    Gemini,
    Cohere,
}

impl Dialect {
    fn reader(self) -> (Decode, Ending) {
        match self {
            Dialect::OpenAi => (openai::decode, Ending::Marker),
            Dialect::Anthropic => (anthropic::decode, Ending::Marker),
            Dialect::Gemini => (gemini::decode, Ending::EofAfterStopReason),
            Dialect::Cohere => (cohere::decode, Ending::Marker),
        }
    }

    /// A well-formed stream carrying `texts`, its events separated by `eol`.
    fn valid_stream(self, texts: &[String], eol: &str) -> Vec<u8> {
        let mut events: Vec<(Option<&str>, serde_json::Value)> = Vec::new();
        let mut data_lines: Vec<String> = Vec::new();
        match self {
            Dialect::OpenAi => {
                for text in texts {
                    events.push((
                        None,
                        json!({"model": "m-1", "choices": [{"delta": {"content": text}}]}),
                    ));
                }
                events.push((
                    None,
                    json!({"model": "m-1", "choices": [{"delta": {}, "finish_reason": "stop"}]}),
                ));
                events.push((
                    None,
                    json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}),
                ));
                data_lines.push("[DONE]".to_owned());
            }
            Dialect::Anthropic => {
                events.push((
                    Some("message_start"),
                    json!({"type": "message_start", "message": {"model": "m-1", "usage": {"input_tokens": 3}}}),
                ));
                events.push((Some("ping"), json!({"type": "ping"})));
                for text in texts {
                    events.push((
                        Some("content_block_delta"),
                        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
                    ));
                }
                events.push((
                    Some("message_delta"),
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
                ));
                events.push((Some("message_stop"), json!({"type": "message_stop"})));
            }
            Dialect::Gemini => {
                for text in texts {
                    events.push((
                        None,
                        json!({"candidates": [{"content": {"parts": [{"text": text}]}}], "modelVersion": "m-1"}),
                    ));
                }
                events.push((
                    None,
                    json!({"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}],
                           "modelVersion": "m-1",
                           "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 5}}),
                ));
            }
            Dialect::Cohere => {
                events.push((
                    Some("message-start"),
                    json!({"type": "message-start", "delta": {"message": {"content": []}}}),
                ));
                for text in texts {
                    events.push((
                        Some("content-delta"),
                        json!({"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": text}}}}),
                    ));
                }
                events.push((
                    Some("message-end"),
                    json!({"type": "message-end", "delta": {"finish_reason": "COMPLETE",
                           "usage": {"billed_units": {"input_tokens": 3.0, "output_tokens": 5.0}}}}),
                ));
            }
        }
        let mut out = format!(": a comment{eol}{eol}");
        for (name, data) in events {
            if let Some(name) = name {
                out.push_str(&format!("event: {name}{eol}"));
            }
            out.push_str(&format!("data: {data}{eol}{eol}"));
        }
        for data in data_lines {
            out.push_str(&format!("data: {data}{eol}{eol}"));
        }
        out.into_bytes()
    }
}

fn dialect() -> impl Strategy<Value = Dialect> {
    prop_oneof![
        Just(Dialect::OpenAi),
        Just(Dialect::Anthropic),
        Just(Dialect::Gemini),
        Just(Dialect::Cohere),
    ]
}

/// `bytes` cut at the given places (empty chunks included, as a network may deliver).
fn cut(bytes: &[u8], cuts: &[prop::sample::Index]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut chunks = Vec::with_capacity(at.len() + 1);
    let mut start = 0;
    for end in at {
        chunks.push(bytes[start..end].to_vec());
        start = end;
    }
    chunks.push(bytes[start..].to_vec());
    chunks
}

/// Everything the reader yields for a body arriving in `chunks`.
fn read(dialect: Dialect, chunks: Vec<Vec<u8>>) -> Vec<Result<StreamItem, ProviderError>> {
    let (decode, ending) = dialect.reader();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("a runtime: {e}"));
    runtime.block_on(async {
        let body = stream::iter(chunks.into_iter().map(Ok::<_, reqwest::Error>));
        read_body(body, Duration::from_secs(60), "requested", decode, ending)
            .collect()
            .await
    })
}

/// Deltas, then exactly one `Final` (holding the deltas joined) or one error.
fn well_ended(items: &[Result<StreamItem, ProviderError>]) -> Result<(), TestCaseError> {
    let Some((last, deltas)) = items.split_last() else {
        return Err(TestCaseError::fail("the stream yielded nothing"));
    };
    let mut text = String::new();
    for item in deltas {
        match item {
            Ok(StreamItem::Delta(delta)) => {
                prop_assert!(!delta.is_empty());
                text.push_str(delta);
            }
            other => return Err(TestCaseError::fail(format!("{other:?} before the end"))),
        }
    }
    match last {
        Ok(StreamItem::Final(reply)) => prop_assert_eq!(&reply.content, &text),
        Ok(StreamItem::Delta(_)) => return Err(TestCaseError::fail("no end after a delta")),
        Err(_) => {}
    }
    Ok(())
}

/// Bytes built from the pieces of event streams (fields, line ends, markers, JSON, a BOM,
/// broken UTF-8) and arbitrary bytes.
fn stream_like() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        proptest::sample::select(vec![
            "data: ",
            "data:",
            "event: ",
            "message_stop",
            "message-end",
            "content-delta",
            "content_block_delta",
            "error",
            "id: 1",
            "retry: 10",
            ": ping",
            "\n",
            "\r\n",
            "\r",
            "\n\n",
            "[DONE]",
            "{",
            "}",
            "\"",
            "{\"type\":\"message_stop\"}",
            "{\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}",
            "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]},\"finishReason\":\"STOP\"}]}",
            "{\"delta\":{\"message\":{\"content\":{\"text\":\"x\"}}}}",
            "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}",
            "{\"error\":{\"message\":\"boom\"}}",
            "\u{feff}",
            "é",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        Just(vec![0xff]),
        Just(vec![0xe2, 0x82]),
        proptest::collection::vec(any::<u8>(), 0..16),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

/// Reply text: any characters, those that need escaping in JSON and line ends included.
fn texts() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(
        prop_oneof![".{0,12}", "[\n\r\"\\\\ a\u{feff}é😀]{1,6}", "data: x\n\n",],
        0..8,
    )
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_bytes_cut_anywhere_end_in_a_reply_or_an_error(
        dialect in dialect(),
        bytes in stream_like(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        well_ended(&read(dialect, cut(&bytes, &cuts)))?;
    }

    #[test]
    fn a_valid_stream_reads_the_same_however_it_is_cut(
        dialect in dialect(),
        texts in texts(),
        crlf in any::<bool>(),
        bom in any::<bool>(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut bytes = if bom { "\u{feff}".as_bytes().to_vec() } else { Vec::new() };
        bytes.extend(dialect.valid_stream(&texts, if crlf { "\r\n" } else { "\n" }));
        let whole = read(dialect, vec![bytes.clone()]);
        let split = read(dialect, cut(&bytes, &cuts));
        well_ended(&whole)?;
        prop_assert_eq!(&split, &whole);
        match whole.last() {
            Some(Ok(StreamItem::Final(reply))) => {
                prop_assert_eq!(&reply.content, &texts.concat());
                prop_assert_eq!(reply.model.as_str(), match dialect {
                    Dialect::Cohere => "requested",
                    _ => "m-1",
                });
                prop_assert_eq!(reply.usage.output_tokens, Some(5));
                prop_assert!(reply.stop_reason.is_some());
            }
            other => return Err(TestCaseError::fail(format!("no reply: {other:?}"))),
        }
    }

    #[test]
    fn a_valid_stream_cut_short_is_an_error(
        dialect in dialect(),
        texts in texts(),
        keep in any::<prop::sample::Index>(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let bytes = dialect.valid_stream(&texts, "\n");
        // Anything short of the last event's closing blank line.
        let short = &bytes[..keep.index(bytes.len() - 1)];
        let items = read(dialect, cut(short, &cuts));
        well_ended(&items)?;
        prop_assert!(matches!(items.last(), Some(Err(_))), "{items:?}");
    }
}
