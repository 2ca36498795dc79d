//! Cohere v2 chat, streamed as named events.

use serde_json::{Value, json};

use super::{echo, error, named_frame, text_of};
use crate::journal::Provider;
use crate::state::Reply;

pub fn chat(request: &Value) -> Result<Reply, Reply> {
    let bad = |message: &str| error(Provider::Cohere, 400, None, message);
    request["model"]
        .as_str()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("invalid request: model must be specified"))?;
    let messages = request["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("invalid request: messages must not be empty"))?;
    let turns: Vec<(String, String)> = messages
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_owned(),
                text_of(&m["content"]),
            )
        })
        .collect();
    let reply = echo(&turns, request["max_tokens"].as_u64());
    let id = crate::ids::uuid();
    let finish = if reply.truncated {
        "MAX_TOKENS"
    } else {
        "COMPLETE"
    };
    let usage = json!({
        "billed_units": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
        "tokens": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    });
    if request["stream"] != true {
        return Ok(Reply::json(
            200,
            json!({
                "id": id,
                "finish_reason": finish,
                "message": {"role": "assistant", "content": [{"type": "text", "text": reply.text}]},
                "usage": usage,
            }),
        ));
    }
    let mut frames = vec![
        named_frame(
            "message-start",
            &json!({"id": id, "type": "message-start", "delta": {"message": {
                "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": [],
            }}}),
        ),
        named_frame(
            "content-start",
            &json!({"type": "content-start", "index": 0, "delta": {"message": {"content": {"type": "text", "text": ""}}}}),
        ),
    ];
    for piece in &reply.chunks {
        frames.push(named_frame(
            "content-delta",
            &json!({"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": piece}}}}),
        ));
    }
    frames.push(named_frame(
        "content-end",
        &json!({"type": "content-end", "index": 0}),
    ));
    frames.push(named_frame(
        "message-end",
        &json!({"type": "message-end", "delta": {"finish_reason": finish, "usage": usage}}),
    ));
    Ok(Reply::events(frames))
}
