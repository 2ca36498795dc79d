//! The few HTML pages the simulator serves (checkout, outbox, index).

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A complete page around `body` (already HTML).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>\
         body{{font-family:system-ui,sans-serif;max-width:56rem;margin:2rem auto;padding:0 1rem;color:#222}}\
         table{{border-collapse:collapse;width:100%;margin-bottom:2rem}}\
         th,td{{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top}}\
         button{{font-size:1rem;padding:.5rem 1.5rem;margin-right:.5rem}}\
         .pay{{background:#2a7;color:#fff;border:0}}.fail{{background:#c33;color:#fff;border:0}}\
         pre{{white-space:pre-wrap;margin:0}}\
         </style></head><body>{body}</body></html>\n",
        title = escape(title)
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_markup() {
        assert_eq!(
            super::escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
