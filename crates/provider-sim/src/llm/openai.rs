//! OpenAI-compatible chat completions (OpenAI, Groq, Mistral, Ollama's OpenAI endpoint).

use serde_json::{Value, json};

use super::{data_frame, echo, error, text_of};
use crate::journal::Provider;
use crate::state::{Reply, now};

pub fn chat(provider: Provider, request: &Value) -> Result<Reply, Reply> {
    let model = request["model"]
        .as_str()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| error(provider, 400, None, "you must provide a model parameter"))?;
    let messages = request["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| error(provider, 400, None, "'messages' must be a non-empty array"))?;
    let turns: Vec<(String, String)> = messages
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_owned(),
                text_of(&m["content"]),
            )
        })
        .collect();
    let max_tokens = request["max_completion_tokens"]
        .as_u64()
        .or_else(|| request["max_tokens"].as_u64());
    let reply = echo(&turns, max_tokens);
    let id = format!("chatcmpl-{}", crate::ids::stripe(""));
    let created = now();
    let finish = if reply.truncated { "length" } else { "stop" };
    let usage = json!({
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    });
    if request["stream"] != true {
        return Ok(Reply::json(
            200,
            json!({
                "id": id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text, "refusal": null},
                    "logprobs": null,
                    "finish_reason": finish,
                }],
                "usage": usage,
            }),
        ));
    }
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        })
    };
    let mut frames = vec![data_frame(&chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ))];
    for piece in &reply.chunks {
        frames.push(data_frame(&chunk(json!({ "content": piece }), Value::Null)));
    }
    let mut last = chunk(json!({}), json!(finish));
    if provider == Provider::Groq {
        last["x_groq"] = json!({"id": format!("req_{}", crate::ids::stripe("")), "usage": usage});
    }
    frames.push(data_frame(&last));
    if request["stream_options"]["include_usage"] == true {
        let mut usage_chunk = chunk(json!({}), Value::Null);
        usage_chunk["choices"] = json!([]);
        usage_chunk["usage"] = usage;
        frames.push(data_frame(&usage_chunk));
    }
    frames.push("data: [DONE]\n\n".to_owned());
    Ok(Reply::events(frames))
}
