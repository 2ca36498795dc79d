//! The providers the simulator speaks for, and the journal of every request they received.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A provider API served by the simulator. The OpenAI-compatible ones share one dialect but are
/// mounted (and journaled, and faulted) separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Stripe,
    Resend,
    Twilio,
    Openai,
    Groq,
    Mistral,
    Ollama,
    Anthropic,
    Gemini,
    Cohere,
}

impl Provider {
    pub const ALL: [Provider; 10] = [
        Provider::Stripe,
        Provider::Resend,
        Provider::Twilio,
        Provider::Openai,
        Provider::Groq,
        Provider::Mistral,
        Provider::Ollama,
        Provider::Anthropic,
        Provider::Gemini,
        Provider::Cohere,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Provider::Stripe => "stripe",
            Provider::Resend => "resend",
            Provider::Twilio => "twilio",
            Provider::Openai => "openai",
            Provider::Groq => "groq",
            Provider::Mistral => "mistral",
            Provider::Ollama => "ollama",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Cohere => "cohere",
        }
    }

    pub fn from_name(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// One request as the simulator received it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalEntry {
    /// Position in the journal, from 1.
    pub seq: u64,
    pub provider: Provider,
    pub method: String,
    pub path: String,
    /// The raw query string ("" when none).
    pub query: String,
    /// Header names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body as text (invalid UTF-8 replaced).
    pub body: String,
    pub received_at: String,
}

impl JournalEntry {
    /// The first value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The body parsed as form pairs, in order, repeated keys kept.
    pub fn form(&self) -> Vec<(String, String)> {
        serde_urlencoded::from_str(&self.body).unwrap_or_default()
    }

    /// The first value of a form field of the body.
    pub fn form_value(&self, key: &str) -> Option<String> {
        self.form()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// The first value of a query parameter.
    pub fn query_value(&self, key: &str) -> Option<String> {
        serde_urlencoded::from_str::<Vec<(String, String)>>(&self.query)
            .unwrap_or_default()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}
