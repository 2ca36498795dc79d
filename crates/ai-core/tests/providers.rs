//! The chat model clients against the provider simulator over real HTTP: each dialect's exact
//! request, whole and streamed replies, the providers' own error messages, timeouts, unreachable
//! hosts and broken streams.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use ai_core::providers::{
    self, ChatMessage, ChatModel, ChatRequest, ChatStream, Completion, Dialect, Endpoint,
    ProviderError, Role, StreamItem, Usage,
};
use futures_util::StreamExt;
use provider_sim::{Fault, FaultAction, JournalEntry, Provider, ProviderSim, SimConfig, SimHandle};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

const KEY: &str = "sim-ai-key";
const MODEL: &str = "test-model";
const TIMEOUT: Duration = Duration::from_secs(10);
/// A generous bound on anything that should end by itself.
const PATIENCE: Duration = Duration::from_secs(30);

/// One provider as the simulator mounts it.
#[derive(Clone, Copy)]
struct Case {
    provider: Provider,
    dialect: Dialect,
    /// The base URL's path on the simulator.
    base: &'static str,
    keyed: bool,
    stop: &'static str,
    stop_at_max_tokens: &'static str,
}

const OPENAI: Case = Case {
    provider: Provider::Openai,
    dialect: Dialect::OpenAi,
    base: "openai/v1",
    keyed: true,
    stop: "stop",
    stop_at_max_tokens: "length",
};
const GROQ: Case = Case {
    provider: Provider::Groq,
    base: "groq/openai/v1",
    ..OPENAI
};
const MISTRAL: Case = Case {
    provider: Provider::Mistral,
    base: "mistral/v1",
    ..OPENAI
};
const OLLAMA: Case = Case {
    provider: Provider::Ollama,
    base: "ollama/v1",
    keyed: false,
    ..OPENAI
};
const ANTHROPIC: Case = Case {
    provider: Provider::Anthropic,
    dialect: Dialect::Anthropic,
    base: "anthropic/v1",
    keyed: true,
    stop: "end_turn",
    stop_at_max_tokens: "max_tokens",
};
const GEMINI: Case = Case {
    provider: Provider::Gemini,
    dialect: Dialect::Gemini,
    base: "gemini/v1beta",
    keyed: true,
    stop: "STOP",
    stop_at_max_tokens: "MAX_TOKENS",
};
const COHERE: Case = Case {
    provider: Provider::Cohere,
    dialect: Dialect::Cohere,
    base: "cohere/v2",
    keyed: true,
    stop: "COMPLETE",
    stop_at_max_tokens: "MAX_TOKENS",
};

const ALL: [Case; 7] = [OPENAI, GROQ, MISTRAL, OLLAMA, ANTHROPIC, GEMINI, COHERE];
/// One provider per dialect.
const DIALECTS: [Case; 4] = [OPENAI, ANTHROPIC, GEMINI, COHERE];

fn sim() -> SimHandle {
    ProviderSim::start(SimConfig {
        ai_api_key: Some(KEY.to_owned()),
        ..SimConfig::default()
    })
    .unwrap()
}

fn http() -> kernel::http_client::HttpClient {
    kernel::http_client::HttpClientSettings::default()
        .build()
        .unwrap()
}

fn endpoint(sim: &SimHandle, case: Case) -> Endpoint {
    Endpoint {
        dialect: case.dialect,
        base_url: format!("{}/{}", sim.base_url(), case.base),
        api_key: case.keyed.then(|| KEY.to_owned()),
        timeout: TIMEOUT,
    }
}

fn model(endpoint: Endpoint) -> Arc<dyn ChatModel> {
    providers::client(http(), endpoint)
}

/// A conversation with a system prompt and an earlier exchange; the reply echoes the last
/// message (three words, so three deltas; nine words in all).
fn request() -> ChatRequest {
    ChatRequest {
        model: MODEL.to_owned(),
        system: Some("Be brief.".to_owned()),
        messages: vec![
            ChatMessage {
                role: Role::User,
                content: "Earlier question".to_owned(),
            },
            ChatMessage {
                role: Role::Assistant,
                content: "Earlier answer".to_owned(),
            },
            ChatMessage {
                role: Role::User,
                content: "Hello simulated world".to_owned(),
            },
        ],
        temperature: 0.7,
        max_tokens: 64,
    }
}

fn expected(case: Case) -> Completion {
    Completion {
        content: "Hello simulated world".to_owned(),
        model: MODEL.to_owned(),
        usage: Usage {
            input_tokens: Some(9),
            output_tokens: Some(3),
        },
        stop_reason: Some(case.stop.to_owned()),
    }
}

/// The body each dialect must send for [`request`].
fn expected_body(dialect: Dialect, stream: bool) -> Value {
    let turns = json!([
        {"role": "user", "content": "Earlier question"},
        {"role": "assistant", "content": "Earlier answer"},
        {"role": "user", "content": "Hello simulated world"},
    ]);
    let with_system = || {
        let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
        messages.extend(turns.as_array().unwrap().iter().cloned());
        messages
    };
    match dialect {
        Dialect::OpenAi => {
            let mut body = json!({"model": MODEL, "messages": with_system(), "temperature": 0.7,
                "max_tokens": 64, "stream": stream});
            if stream {
                body["stream_options"] = json!({"include_usage": true});
            }
            body
        }
        Dialect::Anthropic => {
            let mut body = json!({"model": MODEL, "max_tokens": 64, "system": "Be brief.",
                "messages": turns, "temperature": 0.7});
            if stream {
                body["stream"] = json!(true);
            }
            body
        }
        Dialect::Gemini => json!({
            "contents": [
                {"role": "user", "parts": [{"text": "Earlier question"}]},
                {"role": "model", "parts": [{"text": "Earlier answer"}]},
                {"role": "user", "parts": [{"text": "Hello simulated world"}]},
            ],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "generationConfig": {"temperature": 0.7, "maxOutputTokens": 64},
        }),
        Dialect::Cohere => {
            let mut body = json!({"model": MODEL, "messages": with_system(), "temperature": 0.7,
                "max_tokens": 64});
            if stream {
                body["stream"] = json!(true);
            }
            body
        }
    }
}

/// The request's path, query and credentials as the dialect sends them.
fn assert_sent(entry: &JournalEntry, case: Case, stream: bool) {
    let label = case.provider.name();
    assert_eq!(entry.method, "POST", "{label}");
    let (path, query) = match case.dialect {
        Dialect::OpenAi => (format!("/{}/chat/completions", case.base), ""),
        Dialect::Anthropic => (format!("/{}/messages", case.base), ""),
        Dialect::Gemini if stream => (
            format!("/{}/models/{MODEL}:streamGenerateContent", case.base),
            "alt=sse",
        ),
        Dialect::Gemini => (format!("/{}/models/{MODEL}:generateContent", case.base), ""),
        Dialect::Cohere => (format!("/{}/chat", case.base), ""),
    };
    assert_eq!(
        (entry.path.as_str(), entry.query.as_str()),
        (path.as_str(), query),
        "{label}"
    );
    let bearer = format!("Bearer {KEY}");
    match case.dialect {
        Dialect::OpenAi | Dialect::Cohere => assert_eq!(
            entry.header("authorization"),
            case.keyed.then_some(bearer.as_str()),
            "{label}"
        ),
        Dialect::Anthropic => {
            assert_eq!(entry.header("x-api-key"), Some(KEY));
            assert_eq!(entry.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(entry.header("authorization"), None);
        }
        Dialect::Gemini => {
            assert_eq!(entry.header("x-goog-api-key"), Some(KEY));
            assert_eq!(entry.header("authorization"), None);
        }
    }
    assert!(
        entry
            .header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{label}"
    );
    assert_eq!(entry.json(), expected_body(case.dialect, stream), "{label}");
}

/// Everything a stream yields, checking that it ends by itself right after its one `Final` or
/// `Err`.
struct Drained {
    deltas: Vec<String>,
    end: Result<Completion, ProviderError>,
}

async fn drain(mut stream: ChatStream) -> Drained {
    let mut deltas = Vec::new();
    let end = tokio::time::timeout(PATIENCE, async {
        loop {
            match stream.next().await {
                Some(Ok(StreamItem::Delta(text))) => {
                    assert!(!text.is_empty());
                    deltas.push(text);
                }
                Some(Ok(StreamItem::Final(completion))) => break Ok(completion),
                Some(Err(e)) => break Err(e),
                None => panic!("the stream ended without Final or Err"),
            }
        }
    })
    .await
    .expect("the stream did not end");
    assert!(stream.next().await.is_none(), "items after the end");
    Drained { deltas, end }
}

async fn stream_error(model: &dyn ChatModel) -> (Vec<String>, String) {
    let drained = drain(model.stream(&request()).await.unwrap()).await;
    let error = drained.end.expect_err("a short reply instead of an error");
    (drained.deltas, error.message)
}

// ----- replies

#[tokio::test]
async fn complete_sends_the_dialects_exact_request_and_reads_the_reply() {
    let sim = sim();
    for (i, case) in ALL.into_iter().enumerate() {
        let mut endpoint = endpoint(&sim, case);
        if i % 2 == 0 {
            endpoint.base_url.push('/');
        }
        let reply = model(endpoint).complete(&request()).await.unwrap();
        assert_eq!(reply, expected(case), "{}", case.provider.name());
        let journal = sim.journal_for(case.provider);
        assert_eq!(journal.len(), 1, "{}", case.provider.name());
        assert_sent(&journal[0], case, false);
    }
}

#[tokio::test]
async fn complete_reports_the_stop_reason_at_max_tokens() {
    let sim = sim();
    for case in DIALECTS {
        let request = ChatRequest {
            max_tokens: 2,
            ..request()
        };
        let reply = model(endpoint(&sim, case))
            .complete(&request)
            .await
            .unwrap();
        assert_eq!(
            (reply.content.as_str(), reply.stop_reason.as_deref()),
            ("Hello simulated", Some(case.stop_at_max_tokens)),
            "{}",
            case.provider.name()
        );
    }
}

#[tokio::test]
async fn streams_pass_each_delta_on_then_one_final_reply() {
    let sim = sim();
    for (i, case) in ALL.into_iter().enumerate() {
        let mut endpoint = endpoint(&sim, case);
        if i % 2 == 1 {
            endpoint.base_url.push('/');
        }
        let drained = drain(model(endpoint).stream(&request()).await.unwrap()).await;
        let label = case.provider.name();
        assert_eq!(drained.deltas, ["Hello ", "simulated ", "world"], "{label}");
        let reply = drained.end.unwrap();
        assert_eq!(reply.content, drained.deltas.concat(), "{label}");
        assert_eq!(reply, expected(case), "{label}");
        let journal = sim.journal_for(case.provider);
        assert_eq!(journal.len(), 1, "{label}");
        assert_sent(&journal[0], case, true);
    }
}

#[tokio::test]
async fn a_system_prompt_is_left_out_when_there_is_none() {
    let sim = sim();
    let request = ChatRequest {
        system: None,
        ..request()
    };
    for case in DIALECTS {
        model(endpoint(&sim, case))
            .complete(&request)
            .await
            .unwrap();
        let body = sim.journal_for(case.provider)[0].json();
        let text = body.to_string();
        assert!(!text.contains("Be brief."), "{text}");
        assert!(!text.contains("\"system\""), "{text}");
        assert!(body.get("systemInstruction").is_none(), "{text}");
    }
}

#[tokio::test]
async fn a_stream_longer_than_the_timeout_is_not_cut_while_chunks_keep_coming() {
    let sim = sim();
    sim.set_chunk_delay(Duration::from_millis(100));
    let words = "one two three four five six seven eight nine ten eleven twelve";
    let request = ChatRequest {
        messages: vec![ChatMessage {
            role: Role::User,
            content: words.to_owned(),
        }],
        ..request()
    };
    for case in DIALECTS {
        let endpoint = Endpoint {
            timeout: Duration::from_secs(1),
            ..endpoint(&sim, case)
        };
        let drained = drain(model(endpoint).stream(&request).await.unwrap()).await;
        assert_eq!(drained.deltas.len(), 12, "{}", case.provider.name());
        assert_eq!(drained.end.unwrap().content, words);
    }
}

// ----- the providers' errors

#[tokio::test]
async fn a_wrong_key_is_the_providers_own_message() {
    let sim = sim();
    for (case, message) in [
        (
            OPENAI,
            "Incorrect API key provided. You can find your API key in your account settings.",
        ),
        (
            MISTRAL,
            "Incorrect API key provided. You can find your API key in your account settings.",
        ),
        (ANTHROPIC, "invalid x-api-key"),
        (GEMINI, "API key not valid. Please pass a valid API key."),
        (COHERE, "invalid api token"),
    ] {
        let endpoint = Endpoint {
            api_key: Some("wrong".to_owned()),
            ..endpoint(&sim, case)
        };
        let model = model(endpoint);
        let error = model.complete(&request()).await.unwrap_err();
        assert_eq!(error.message, message, "{}", case.provider.name());
        let error = model.stream(&request()).await.err().unwrap();
        assert_eq!(error.message, message, "{}", case.provider.name());
    }
}

#[tokio::test]
async fn rate_limits_and_server_errors_carry_the_providers_message() {
    let sim = sim();
    for case in ALL {
        let model = model(endpoint(&sim, case));
        let label = case.provider.name();
        sim.push_fault(
            case.provider,
            Fault::status(429).message("Slow down, please.").times(2),
        );
        let error = model.complete(&request()).await.unwrap_err();
        assert_eq!(error.message, "Slow down, please.", "{label}");
        let error = model.stream(&request()).await.err().unwrap();
        assert_eq!(error.message, "Slow down, please.", "{label}");

        sim.push_fault(case.provider, Fault::status(500));
        let error = model.complete(&request()).await.unwrap_err();
        assert_eq!(
            error.message, "The server had an error while processing your request.",
            "{label}"
        );
    }
}

#[tokio::test]
async fn an_answer_that_is_not_the_dialects_json_cannot_be_read() {
    let sim = sim();
    for case in DIALECTS {
        let model = model(endpoint(&sim, case));
        for action in [FaultAction::Malformed, FaultAction::Truncate] {
            sim.push_fault(case.provider, Fault::action(action));
            let error = model.complete(&request()).await.unwrap_err();
            assert!(
                error
                    .message
                    .starts_with("the provider's answer could not be read: "),
                "{}: {}",
                case.provider.name(),
                error.message
            );
        }
    }
}

// ----- transport

#[tokio::test]
async fn no_answer_within_the_timeout() {
    let sim = sim();
    for case in DIALECTS {
        let endpoint = Endpoint {
            timeout: Duration::from_millis(300),
            ..endpoint(&sim, case)
        };
        let model = model(endpoint);
        let label = case.provider.name();

        // Half an answer, then silence.
        sim.push_fault(case.provider, Fault::action(FaultAction::Stall));
        let error = model.complete(&request()).await.unwrap_err();
        assert_eq!(
            error.message, "no answer within 0.3 s (AI_TIMEOUT_SECONDS)",
            "{label}"
        );

        // No head at all.
        sim.push_fault(case.provider, Fault::default().delay_ms(60_000));
        let error = model.stream(&request()).await.err().unwrap();
        assert_eq!(
            error.message, "no answer within 0.3 s (AI_TIMEOUT_SECONDS)",
            "{label}"
        );

        // A stream that stops sending: the chunks that came are passed on first.
        sim.push_fault(case.provider, Fault::action(FaultAction::Stall));
        let (deltas, message) = stream_error(model.as_ref()).await;
        assert!(!deltas.is_empty(), "{label}");
        assert_eq!(
            message, "no new chunk within 0.3 s (AI_TIMEOUT_SECONDS)",
            "{label}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_host_is_named() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    for case in DIALECTS {
        let model = model(Endpoint {
            dialect: case.dialect,
            base_url: format!("http://127.0.0.1:{port}/v1"),
            api_key: Some(KEY.to_owned()),
            timeout: TIMEOUT,
        });
        let error = model.complete(&request()).await.unwrap_err();
        assert_eq!(error.message, "cannot connect to 127.0.0.1");
        let error = model.stream(&request()).await.err().unwrap();
        assert_eq!(error.message, "cannot connect to 127.0.0.1");
    }
}

#[tokio::test]
async fn a_connection_closed_without_an_answer_is_an_error() {
    let sim = sim();
    for case in DIALECTS {
        let model = model(endpoint(&sim, case));
        sim.push_fault(case.provider, Fault::action(FaultAction::Drop).times(2));
        let error = model.complete(&request()).await.unwrap_err();
        assert!(
            error.message.starts_with("request failed: "),
            "{}",
            error.message
        );
        let error = model.stream(&request()).await.err().unwrap();
        assert!(
            error.message.starts_with("request failed: "),
            "{}",
            error.message
        );
    }
}

// ----- broken streams

#[tokio::test]
async fn a_stream_cut_before_its_end_marker_is_an_error_not_a_short_reply() {
    let sim = sim();
    for case in ALL {
        sim.push_fault(case.provider, Fault::action(FaultAction::Truncate));
        let (_, message) = stream_error(model(endpoint(&sim, case)).as_ref()).await;
        assert_eq!(
            message,
            "the stream ended before the provider's end marker",
            "{}",
            case.provider.name()
        );
    }
}

#[tokio::test]
async fn a_stream_whose_connection_breaks_is_an_error() {
    let sim = sim();
    for case in DIALECTS {
        sim.push_fault(case.provider, Fault::action(FaultAction::Disconnect));
        let (_, message) = stream_error(model(endpoint(&sim, case)).as_ref()).await;
        assert!(
            message.starts_with("the stream broke off: "),
            "{}: {message}",
            case.provider.name()
        );
    }
}

#[tokio::test]
async fn a_malformed_chunk_is_an_error_and_ends_the_stream() {
    let sim = sim();
    for case in ALL {
        sim.push_fault(case.provider, Fault::action(FaultAction::Malformed));
        let (_, message) = stream_error(model(endpoint(&sim, case)).as_ref()).await;
        assert!(
            message.starts_with("a chunk of the provider's stream could not be read: "),
            "{}: {message}",
            case.provider.name()
        );
    }
}

// ----- what the simulator cannot send: a bare server for one request

/// Serves one request: a 200 event stream of `events`, then the end of the body (`end`) or
/// nothing more until the client closes the connection, which the receiver then reports.
async fn bare_server(events: &'static str, end: bool) -> (String, oneshot::Receiver<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (closed_tx, closed_rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await;
        let mut answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n",
            events.len()
        );
        if end {
            answer.push_str("0\r\n\r\n");
        }
        socket.write_all(answer.as_bytes()).await.unwrap();
        if end {
            let _ = socket.shutdown().await;
        }
        let mut buf = [0u8; 1024];
        while let Ok(n) = socket.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
        let _ = closed_tx.send(());
    });
    (base_url, closed_rx)
}

/// Reads a request's head and its `content-length` body.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "the request ended early");
        received.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some(at) = text.find("\r\n\r\n") {
            let length: usize = text[..at]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if received.len() >= at + 4 + length {
                return;
            }
        }
    }
}

fn bare(dialect: Dialect, base_url: String) -> Arc<dyn ChatModel> {
    model(Endpoint {
        dialect,
        base_url,
        api_key: Some(KEY.to_owned()),
        timeout: TIMEOUT,
    })
}

#[tokio::test]
async fn an_error_event_in_a_stream_is_the_providers_message() {
    let events = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3}}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n\
        event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let (base_url, _) = bare_server(events, true).await;
    let (deltas, message) = stream_error(bare(Dialect::Anthropic, base_url).as_ref()).await;
    assert_eq!(
        (deltas, message.as_str()),
        (vec!["Hi".to_owned()], "Overloaded")
    );

    let events = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
        data: {\"error\":{\"message\":\"The model is overloaded.\",\"type\":\"server_error\"}}\n\n";
    let (base_url, _) = bare_server(events, true).await;
    let (_, message) = stream_error(bare(Dialect::OpenAi, base_url).as_ref()).await;
    assert_eq!(message, "The model is overloaded.");
}

#[tokio::test]
async fn a_finish_reason_is_not_the_end_of_an_openai_stream() {
    let events = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
        data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    let (base_url, _) = bare_server(events, true).await;
    let (_, message) = stream_error(bare(Dialect::OpenAi, base_url).as_ref()).await;
    assert_eq!(message, "the stream ended before the provider's end marker");

    // The usage may come after the finish reason, in a chunk without choices.
    let events = "data: {\"model\":\"m-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
        data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
        data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1}}\n\n\
        data: [DONE]\n\n";
    let (base_url, _) = bare_server(events, true).await;
    let drained = drain(
        bare(Dialect::OpenAi, base_url)
            .stream(&request())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        drained.end.unwrap(),
        Completion {
            content: "Hi".to_owned(),
            model: "m-1".to_owned(),
            usage: Usage {
                input_tokens: Some(4),
                output_tokens: Some(1)
            },
            stop_reason: Some("stop".to_owned()),
        }
    );
}

/// The simulator does not record closed streams: the bare server sees the connection close.
#[tokio::test]
async fn dropping_a_stream_closes_the_provider_request() {
    let events = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello \"}}]}\n\n";
    let (base_url, closed) = bare_server(events, false).await;
    let model = bare(Dialect::OpenAi, base_url);
    let mut stream = model.stream(&request()).await.unwrap();
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        StreamItem::Delta("Hello ".to_owned())
    );
    drop(stream);
    tokio::time::timeout(PATIENCE, closed)
        .await
        .expect("the connection stayed open after the stream was dropped")
        .unwrap();
}
