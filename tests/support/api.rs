//! Small HTTP helpers over the API (accounts are made with `keel::testing::sign_up`).

use std::time::Duration;

use reqwest::Client;

/// A client whose requests give up after `timeout`: the bound a request may not pass.
pub fn client(timeout: Duration) -> Client {
    kernel::init_crypto();
    Client::builder()
        .timeout(timeout)
        .build()
        .expect("an HTTP client")
}

/// Server-sent events as `(event name, data)`.
pub type Events = Vec<(String, String)>;

/// Reads a `text/event-stream` answer to its end: its events, in order.
pub async fn read_events(mut response: reqwest::Response) -> Events {
    let mut text = String::new();
    while let Some(chunk) = response.chunk().await.expect("the stream reads to its end") {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    parse_events(&text)
}

/// Parses complete events out of SSE text (comments and partial events are left out).
pub fn parse_events(text: &str) -> Events {
    let text = text.replace("\r\n", "\n");
    let mut events = Vec::new();
    let blocks: Vec<&str> = text.split("\n\n").collect();
    // The last piece is unfinished (or empty).
    for block in &blocks[..blocks.len().saturating_sub(1)] {
        let mut name = String::from("message");
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                name = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
            }
        }
        if !data.is_empty() {
            events.push((name, data.join("\n")));
        }
    }
    events
}

#[cfg(test)]
mod tests {
    #[test]
    fn events_are_parsed() {
        let text = ": keep-alive\n\nevent: connect\ndata: {\"a\":1}\n\nevent: chunk\ndata: x\n\nevent: par";
        let events = super::parse_events(text);
        assert_eq!(
            events,
            vec![
                ("connect".to_owned(), "{\"a\":1}".to_owned()),
                ("chunk".to_owned(), "x".to_owned())
            ]
        );
    }
}
