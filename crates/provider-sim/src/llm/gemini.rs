//! Gemini `models/{model}:generateContent` and `:streamGenerateContent` (`?alt=sse`: CRLF
//! framing, no `[DONE]`, the last chunk carries `finishReason` and the usage).

use actix_web::HttpRequest;
use serde_json::{Value, json};

use super::{echo, error, query_value, text_of};
use crate::journal::Provider;
use crate::state::Reply;

pub fn chat(req: &HttpRequest, request: &Value) -> Result<Reply, Reply> {
    let path = req.path();
    let target = path.rsplit_once("models/").map_or("", |(_, t)| t);
    let (model, method) = target.split_once(':').unwrap_or((target, ""));
    let stream = match method {
        "generateContent" => false,
        "streamGenerateContent" => true,
        _ => {
            return Err(error(
                Provider::Gemini,
                404,
                None,
                &format!("Method not found: {path}"),
            ));
        }
    };
    let bad = |message: &str| error(Provider::Gemini, 400, None, message);
    let contents = request["contents"]
        .as_array()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| bad("* GenerateContentRequest.contents: contents is not specified"))?;
    let mut turns = vec![(
        "system".to_owned(),
        text_of(&request["systemInstruction"]["parts"]),
    )];
    for content in contents {
        let role = content["role"].as_str().unwrap_or("user");
        if role != "user" && role != "model" {
            return Err(bad(&format!(
                "Please use a valid role: user, model. Got: {role}"
            )));
        }
        turns.push((role.to_owned(), text_of(&content["parts"])));
    }
    let reply = echo(
        &turns,
        request["generationConfig"]["maxOutputTokens"].as_u64(),
    );
    let finish = if reply.truncated {
        "MAX_TOKENS"
    } else {
        "STOP"
    };
    let usage = json!({
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": reply.output_tokens,
        "totalTokenCount": reply.input_tokens + reply.output_tokens,
    });
    let response = |text: &str, last: bool| {
        let mut candidate =
            json!({"content": {"role": "model", "parts": [{"text": text}]}, "index": 0});
        let mut body = json!({"candidates": [candidate.clone()], "modelVersion": model});
        if last {
            candidate["finishReason"] = json!(finish);
            body["candidates"] = json!([candidate]);
            body["usageMetadata"] = usage.clone();
        } else {
            body["usageMetadata"] = json!({"promptTokenCount": reply.input_tokens});
        }
        body
    };
    if !stream {
        return Ok(Reply::json(200, response(&reply.text, true)));
    }
    let n = reply.chunks.len();
    let chunks: Vec<Value> = reply
        .chunks
        .iter()
        .enumerate()
        .map(|(i, piece)| response(piece, i + 1 == n))
        .collect();
    if query_value(req, "alt").as_deref() == Some("sse") {
        Ok(Reply::events(
            chunks
                .iter()
                .map(|c| format!("data: {c}\r\n\r\n"))
                .collect(),
        ))
    } else {
        // Without alt=sse the stream is one JSON array of the same responses.
        Ok(Reply::json(200, Value::Array(chunks)))
    }
}
