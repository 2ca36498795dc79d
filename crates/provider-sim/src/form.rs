//! Form bodies: Stripe's bracketed keys (`a[b][0][c]=v`) into nested JSON, and flat pairs.

use serde_json::{Map, Value};

/// Form pairs in order (repeated keys kept, `+` read as a space as browsers and servers do).
pub fn pairs(body: &[u8]) -> Vec<(String, String)> {
    serde_urlencoded::from_bytes(body).unwrap_or_default()
}

/// Parses `a[b][0][c]=v` pairs into nested objects; objects whose keys are all indexes become
/// arrays (in index order). Every leaf stays a string, as Stripe receives it.
pub fn nested(body: &[u8]) -> Value {
    let mut root = Map::new();
    for (key, value) in pairs(body) {
        let path = split_key(&key);
        insert(&mut root, &path, value);
    }
    arrays(Value::Object(root))
}

/// The most `[...]` levels of a key that are read; deeper ones are ignored like text after a
/// closing bracket (the nesting is walked recursively, so it must be bounded).
const MAX_KEY_DEPTH: usize = 32;

fn split_key(key: &str) -> Vec<String> {
    let (head, mut rest) = match key.find('[') {
        Some(i) => (&key[..i], &key[i..]),
        None => (key, ""),
    };
    let mut path = vec![head.to_owned()];
    while path.len() <= MAX_KEY_DEPTH
        && let Some(stripped) = rest.strip_prefix('[')
    {
        let Some(end) = stripped.find(']') else { break };
        path.push(stripped[..end].to_owned());
        rest = &stripped[end + 1..];
    }
    path
}

fn insert(map: &mut Map<String, Value>, path: &[String], value: String) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        map.insert(first.clone(), Value::String(value));
        return;
    }
    let entry = map
        .entry(first.clone())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    if let Value::Object(child) = entry {
        insert(child, rest, value);
    }
}

fn arrays(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let indexed = !map.is_empty() && map.keys().all(|k| k.parse::<usize>().is_ok());
            if indexed {
                let mut items: Vec<(usize, Value)> = map
                    .into_iter()
                    .map(|(k, v)| (k.parse().unwrap_or(0), arrays(v)))
                    .collect();
                items.sort_by_key(|(i, _)| *i);
                Value::Array(items.into_iter().map(|(_, v)| v).collect())
            } else {
                Value::Object(map.into_iter().map(|(k, v)| (k, arrays(v))).collect())
            }
        }
        other => other,
    }
}

/// A string leaf at a `/`-separated path (`line_items/0/price`).
pub fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value
        .pointer(&format!("/{pointer}"))
        .and_then(Value::as_str)
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn bracketed_keys_nest_and_indexes_become_arrays() {
        let body = "mode=payment&line_items[0][price_data][currency]=usd\
            &line_items[0][price_data][product_data][name]=T-shirt&line_items[0][quantity]=2\
            &line_items[1][price]=price_x&metadata[user_id]=42&success_url=http%3A%2F%2Fa%2Fok%3Fs%3D%7BCHECKOUT_SESSION_ID%7D";
        let value = super::nested(body.as_bytes());
        assert_eq!(
            value,
            json!({
                "mode": "payment",
                "line_items": [
                    {"price_data": {"currency": "usd", "product_data": {"name": "T-shirt"}}, "quantity": "2"},
                    {"price": "price_x"}
                ],
                "metadata": {"user_id": "42"},
                "success_url": "http://a/ok?s={CHECKOUT_SESSION_ID}"
            })
        );
        assert_eq!(super::str_at(&value, "line_items/1/price"), Some("price_x"));
    }

    #[test]
    fn plus_is_a_space_and_encoded_plus_is_a_plus() {
        let pairs = super::pairs(b"To=%2B15551234567&From=+15557654321");
        assert_eq!(pairs[0].1, "+15551234567");
        assert_eq!(pairs[1].1, " 15557654321");
    }

    #[test]
    fn deeply_bracketed_keys_do_not_exhaust_the_stack() {
        // A 600 KB key overflowed the stack (the simulator takes bodies up to 16 MB).
        let body = format!("a{}=v", "[x]".repeat(200_000));
        let value = super::nested(body.as_bytes());
        let path = format!("a{}", "/x".repeat(super::MAX_KEY_DEPTH));
        assert_eq!(super::str_at(&value, &path), Some("v"));
    }
}
