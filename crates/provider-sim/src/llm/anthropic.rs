//! Anthropic messages, streamed as named events.

use actix_web::HttpRequest;
use serde_json::{Value, json};

use super::{echo, error, header, named_frame, text_of};
use crate::journal::Provider;
use crate::state::Reply;

pub fn chat(req: &HttpRequest, request: &Value) -> Result<Reply, Reply> {
    let bad = |message: &str| error(Provider::Anthropic, 400, None, message);
    if header(req, "anthropic-version").is_none() {
        return Err(bad("anthropic-version: header is required"));
    }
    let model = request["model"]
        .as_str()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("model: Field required"))?;
    let max_tokens = request["max_tokens"]
        .as_u64()
        .ok_or_else(|| bad("max_tokens: Field required"))?;
    let messages = request["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("messages: Field required"))?;
    let mut turns = vec![("system".to_owned(), text_of(&request["system"]))];
    for m in messages {
        let role = m["role"].as_str().unwrap_or("");
        if role != "user" && role != "assistant" {
            return Err(bad(&format!(
                "messages: Unexpected role \"{role}\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role."
            )));
        }
        turns.push((role.to_owned(), text_of(&m["content"])));
    }
    let reply = echo(&turns, Some(max_tokens));
    let id = format!("msg_{}", crate::ids::stripe(""));
    let stop_reason = if reply.truncated {
        "max_tokens"
    } else {
        "end_turn"
    };
    if request["stream"] != true {
        return Ok(Reply::json(
            200,
            json!({
                "id": id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": reply.text}],
                "stop_reason": stop_reason,
                "stop_sequence": null,
                "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
            }),
        ));
    }
    let mut frames = vec![
        named_frame(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1},
            }}),
        ),
        named_frame(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        named_frame("ping", &json!({"type": "ping"})),
    ];
    for piece in &reply.chunks {
        frames.push(named_frame(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    frames.push(named_frame(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    frames.push(named_frame(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": reply.output_tokens}}),
    ));
    frames.push(named_frame(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    Ok(Reply::events(frames))
}
