//! Twilio's signatures: the SDK's own vectors, each accepted form and the refused ones.

use super::*;

const PATH: &str = "/api/v1/comms/webhooks/twilio/status";

fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

fn status_fields() -> Vec<(String, String)> {
    fields(&[
        ("MessageSid", "SM1"),
        ("MessageStatus", "delivered"),
        ("To", "+15005550010"),
    ])
}

/// Base64 HMAC over `data`, as Twilio makes it.
fn sign(algorithm: TwilioAlgorithm, key: &str, data: &str) -> String {
    let bytes = match algorithm {
        TwilioAlgorithm::HmacSha1 => {
            let mut mac =
                HmacSha1::new_from_slice(key.as_bytes()).unwrap_or_else(|_| unreachable!());
            mac.update(data.as_bytes());
            mac.finalize().into_bytes().to_vec()
        }
        TwilioAlgorithm::HmacSha256 => {
            let mut mac =
                HmacSha256::new_from_slice(key.as_bytes()).unwrap_or_else(|_| unreachable!());
            mac.update(data.as_bytes());
            mac.finalize().into_bytes().to_vec()
        }
    };
    BASE64.encode(bytes)
}

/// A signature over `url` and the status fields.
fn signed(algorithm: TwilioAlgorithm, key: &str, url: &str) -> String {
    sign(
        algorithm,
        key,
        &format!("{url}MessageSidSM1MessageStatusdeliveredTo+15005550010"),
    )
}

fn request<'a>(
    base: &'a str,
    params: &'a [(String, String)],
    signature: Option<&'a str>,
    settings: Option<&'a str>,
) -> TwilioRequest<'a> {
    TwilioRequest {
        base: Some(base),
        path_and_query: PATH,
        body: TwilioBody::Form(params),
        signature,
        signature_settings: settings,
    }
}

fn token_only() -> TwilioKeys<'static> {
    TwilioKeys {
        auth_token: Some("token"),
        shared_keys: &[],
    }
}

/// Signatures computed by twilio-python 9.13.0 (`RequestValidator("12345")
/// .compute_signature(url, params[, "HMAC_SHA256"])`, the SDK's own test request).
#[test]
fn signatures_made_by_twilios_sdk_verify() {
    let params = fields(&[
        ("CallSid", "CA1234567890ABCDE"),
        ("Caller", "+12349013030"),
        ("Digits", "1234"),
        ("From", "+12349013030"),
        ("To", "+18005551212"),
    ]);
    let path = "/myapp.php?foo=1&bar=2";
    let cases = [
        (TwilioAlgorithm::HmacSha1, "0/KCTR6DLpKmkAf8muzZqo1nDgQ="),
        (TwilioAlgorithm::HmacSha1, "EpDEmp1PyjDYp77YxYU3GILBWzE="), // over `:443`
        (
            TwilioAlgorithm::HmacSha256,
            "Rmm4Vzj+Ky7JGoWXMCsZDZuHDszLr9xvdbvitrDr4/M=",
        ),
        (
            TwilioAlgorithm::HmacSha256,
            "k/FwuRLuWJkSSsMO/AmN5FRqLY6/KIqn+IMzQ2jlu9w=",
        ), // `:443`
    ];
    for base in ["https://mycompany.com", "https://mycompany.com:443"] {
        let urls = twilio_urls(base, path);
        for (algorithm, signature) in cases {
            let body = TwilioBody::Form(&params);
            assert!(
                twilio_valid(b"12345", algorithm, &urls, body, signature),
                "{base} {signature}"
            );
        }
    }
    // Each algorithm's signature is only its own.
    let urls = twilio_urls("https://mycompany.com", path);
    let sha256 = cases[2].1;
    let body = TwilioBody::Form(&params);
    assert!(!twilio_valid(
        b"12345",
        TwilioAlgorithm::HmacSha1,
        &urls,
        body,
        sha256
    ));
}

/// twilio-python 9.13.0: a JSON body signs the URL alone, its SHA-256 in `bodySHA256`.
#[test]
fn a_json_body_is_checked_against_its_body_sha256() {
    let body = br#"{"property": "value", "boolean": true}"#;
    let path =
        "/myapp.php?bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620";
    let urls = twilio_urls("https://mycompany.com", path);
    let signature = "y77kIzt2vzLz71DgmJGsen2scGs=";
    let sha1 = TwilioAlgorithm::HmacSha1;
    assert!(twilio_valid(
        b"12345",
        sha1,
        &urls,
        TwilioBody::Json(body),
        signature
    ));
    let changed = br#"{"property": "value", "boolean": false}"#;
    assert!(!twilio_valid(
        b"12345",
        sha1,
        &urls,
        TwilioBody::Json(changed),
        signature
    ));
    // Without `bodySHA256` a JSON body cannot be verified.
    let plain = twilio_urls("https://mycompany.com", "/myapp.php");
    let signature = sign(sha1, "12345", "https://mycompany.com/myapp.php");
    assert!(!twilio_valid(
        b"12345",
        sha1,
        &plain,
        TwilioBody::Json(body),
        &signature
    ));
    // A form body with a `bodySHA256` in the URL is an ordinary form.
    let params = fields(&[("A", "1")]);
    let signature = sign(sha1, "12345", &format!("{}A1", urls[0]));
    assert!(twilio_valid(
        b"12345",
        sha1,
        &urls,
        TwilioBody::Form(&params),
        &signature
    ));
}

/// twilio-python 9.13.0 signs a repeated field's distinct values once each, sorted
/// (`A=2&A=1&A=2&B=x` from a multi-valued form).
#[test]
fn repeated_fields_are_signed_once_per_distinct_value() {
    let params = fields(&[("A", "2"), ("A", "1"), ("A", "2"), ("B", "x")]);
    let urls = twilio_urls("https://mycompany.com", "/myapp.php");
    let signature = "pDNk2JoEjTdxGpbPvTc/Mofl4R4=";
    let body = TwilioBody::Form(&params);
    assert!(twilio_valid(
        b"12345",
        TwilioAlgorithm::HmacSha1,
        &urls,
        body,
        signature
    ));
}

#[test]
fn the_url_has_a_form_with_and_without_the_default_port() {
    let cases: [(&str, &[&str]); 9] = [
        (
            "https://k.example",
            &["https://k.example", "https://k.example:443"],
        ),
        (
            "http://k.example",
            &["http://k.example", "http://k.example:80"],
        ),
        (
            "https://k.example:443",
            &["https://k.example:443", "https://k.example"],
        ),
        (
            "http://k.example:80/keel",
            &["http://k.example:80/keel", "http://k.example/keel"],
        ),
        ("https://k.example:8443", &["https://k.example:8443"]),
        ("http://127.0.0.1:8000", &["http://127.0.0.1:8000"]),
        ("https://k.example:80", &["https://k.example:80"]),
        ("http://[::1]", &["http://[::1]", "http://[::1]:80"]),
        (
            "https://u:p@k.example",
            &["https://u:p@k.example", "https://u:p@k.example:443"],
        ),
    ];
    for (base, forms) in cases {
        let expected: Vec<String> = forms.iter().map(|form| format!("{form}{PATH}")).collect();
        assert_eq!(twilio_urls(base, PATH), expected, "{base}");
    }
}

#[test]
fn the_auth_token_signs_either_form_with_or_without_a_query() {
    let params = status_fields();
    let sha1 = TwilioAlgorithm::HmacSha1;
    for (base, signed_over) in [
        ("https://k.example", "https://k.example"),
        ("https://k.example", "https://k.example:443"),
        ("https://k.example:443", "https://k.example"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://k.example", "http://k.example:80"),
    ] {
        for query in ["", "?attempt=2&x=%27a%20b%27"] {
            let path = format!("{PATH}{query}");
            let signature = signed(sha1, "token", &format!("{signed_over}{path}"));
            let mut request = request(base, &params, Some(&signature), None);
            request.path_and_query = &path;
            assert_eq!(
                twilio_verify(token_only(), &request),
                Ok(()),
                "{signed_over}{path}"
            );
        }
    }
}

#[test]
fn wrong_keys_fields_hosts_and_ports_are_refused() {
    let params = status_fields();
    let sha1 = TwilioAlgorithm::HmacSha1;
    let refused = |base: &str, signed_over: &str, key: &str, params: &[(String, String)]| {
        let signature = signed(sha1, key, &format!("{signed_over}{PATH}"));
        twilio_verify(token_only(), &request(base, params, Some(&signature), None))
            == Err(TwilioRefusal::BadSignature)
    };
    let base = "https://k.example";
    assert!(refused(base, base, "another-token", &params));
    let mut tampered = params.clone();
    tampered[1].1 = "failed".to_owned();
    assert!(refused(base, base, "token", &tampered));
    assert!(refused(base, base, "token", &params[..2]));
    assert!(refused(base, "https://other.example", "token", &params));
    assert!(refused(base, "https://other.example:443", "token", &params));
    // Ports that are not the scheme's default, or another scheme's.
    assert!(refused(base, "https://k.example:8443", "token", &params));
    assert!(refused(base, "https://k.example:80", "token", &params));
    assert!(refused(
        "http://k.example",
        "http://k.example:443",
        "token",
        &params
    ));
    assert!(refused(base, "http://k.example", "token", &params));
    // An explicit port stays (the SDK would also take the URL without it).
    assert!(refused(
        "http://127.0.0.1:8000",
        "http://127.0.0.1",
        "token",
        &params
    ));
    assert!(refused(
        "http://127.0.0.1:8000",
        "http://127.0.0.1:80",
        "token",
        &params
    ));
    // The query is signed as called.
    let signature = signed(sha1, "token", &format!("{base}{PATH}?attempt=2"));
    let request_without_query = request(base, &params, Some(&signature), None);
    assert_eq!(
        twilio_verify(token_only(), &request_without_query),
        Err(TwilioRefusal::BadSignature)
    );
    // No header, or not base64.
    for signature in [None, Some("not base64!"), Some("")] {
        assert_eq!(
            twilio_verify(token_only(), &request(base, &params, signature, None)),
            Err(TwilioRefusal::BadSignature)
        );
    }
    let no_token = TwilioKeys {
        auth_token: None,
        shared_keys: &[],
    };
    let signature = signed(sha1, "token", &format!("{base}{PATH}"));
    assert_eq!(
        twilio_verify(no_token, &request(base, &params, Some(&signature), None)),
        Err(TwilioRefusal::NotConfigured("TWILIO_AUTH_TOKEN"))
    );
    let no_base = TwilioRequest {
        base: None,
        ..request(base, &params, Some(&signature), None)
    };
    assert_eq!(
        twilio_verify(token_only(), &no_base),
        Err(TwilioRefusal::NotConfigured("PUBLIC_BASE_URL"))
    );
}

#[test]
fn a_json_body_gives_its_top_level_values_as_fields() {
    let raw = br#"{"MessageSid": "SM1", "ErrorCode": 30003, "Flag": true, "Nested": {"a": 1}, "No": null}"#;
    let fields = json_fields(raw).ok();
    let expected = [
        ("ErrorCode", "30003"),
        ("Flag", "true"),
        ("MessageSid", "SM1"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(
        fields.map(|mut f| {
            f.sort();
            f
        }),
        Some(expected)
    );
    assert!(json_fields(b"[1, 2]").is_err());
    assert!(json_fields(b"MessageSid=SM1").is_err());
}

#[test]
fn the_signature_settings_header_names_a_shared_key_and_its_algorithm() {
    let params = status_fields();
    let shared = [
        ("webhooks_sharedkey_old".to_owned(), "old-secret".to_owned()),
        ("webhooks_sharedkey_new".to_owned(), "new-secret".to_owned()),
    ];
    let keys = TwilioKeys {
        auth_token: Some("token"),
        shared_keys: &shared,
    };
    let base = "https://k.example";
    let check = |algorithm, key: &str, signed_over: &str, header: &str| {
        let signature = signed(algorithm, key, &format!("{signed_over}{PATH}"));
        twilio_verify(
            keys,
            &request(base, &params, Some(&signature), Some(header)),
        )
    };
    let (sha1, sha256) = (TwilioAlgorithm::HmacSha1, TwilioAlgorithm::HmacSha256);
    let new_256 = "key=webhooks_sharedkey_new,algorithm=HMAC_SHA256";
    assert_eq!(check(sha256, "new-secret", base, new_256), Ok(()));
    assert_eq!(
        check(sha256, "new-secret", "https://k.example:443", new_256),
        Ok(())
    );
    let old = " key = webhooks_sharedkey_old , algorithm = hmac_sha256 ";
    assert_eq!(check(sha256, "old-secret", base, old), Ok(()));
    assert_eq!(
        check(
            sha1,
            "new-secret",
            base,
            "key=webhooks_sharedkey_new,algorithm=HMAC_SHA1"
        ),
        Ok(())
    );
    assert_eq!(
        check(sha1, "new-secret", base, "key=webhooks_sharedkey_new"),
        Ok(())
    );
    let bad = Err(TwilioRefusal::BadSignature);
    // The header decides: the key it names, with the algorithm it names.
    assert_eq!(check(sha256, "old-secret", base, new_256), bad);
    assert_eq!(check(sha1, "new-secret", base, new_256), bad);
    assert_eq!(check(sha256, "token", base, new_256), bad);
    assert_eq!(check(sha1, "token", base, new_256), bad);
    assert_eq!(
        check(sha256, "new-secret", base, "algorithm=HMAC_SHA256"),
        bad
    );
    assert_eq!(
        check(
            sha256,
            "new-secret",
            base,
            "key=webhooks_sharedkey_x,algorithm=HMAC_SHA256"
        ),
        bad
    );
    assert_eq!(
        check(
            sha256,
            "new-secret",
            base,
            "key=webhooks_sharedkey_new,algorithm=HMAC_SHA512"
        ),
        bad
    );
    assert_eq!(
        check(sha256, "new-secret", "https://k.example:8443", new_256),
        bad
    );
    // Without the header, only the auth token with HMAC-SHA1.
    let signature = signed(sha256, "token", &format!("{base}{PATH}"));
    assert_eq!(
        twilio_verify(keys, &request(base, &params, Some(&signature), None)),
        bad
    );
    let signature = signed(sha1, "token", &format!("{base}{PATH}"));
    assert_eq!(
        twilio_verify(keys, &request(base, &params, Some(&signature), Some(" "))),
        Ok(())
    );
    // A shared-key signature with no shared key set.
    assert_eq!(
        twilio_verify(
            token_only(),
            &request(base, &params, Some(&signature), Some(new_256))
        ),
        Err(TwilioRefusal::NotConfigured("TWILIO_WEBHOOK_SHARED_KEYS"))
    );
}

#[test]
fn signature_settings_are_read_as_the_sdk_reads_them() {
    let settings = |key, algorithm| SignatureSettings { key, algorithm };
    let sha256 = Some(TwilioAlgorithm::HmacSha256);
    let sha1 = Some(TwilioAlgorithm::HmacSha1);
    let cases = [
        (
            "key=webhooks_sharedkey_1,algorithm=HMAC_SHA256",
            settings(Some("webhooks_sharedkey_1"), sha256),
        ),
        ("algorithm=hmac_sha256, key=k", settings(Some("k"), sha256)),
        ("key=k", settings(Some("k"), sha1)),
        ("key=k,algorithm=", settings(Some("k"), sha1)),
        ("key=,algorithm=HMAC_SHA1", settings(None, sha1)),
        ("key=k,algorithm=RSA", settings(Some("k"), None)),
        (
            "key=k,algorithm=HMAC_SHA256,algorithm=RSA",
            settings(Some("k"), sha256),
        ),
        ("nonsense", settings(None, sha1)),
    ];
    for (header, expected) in cases {
        assert_eq!(signature_settings(header), expected, "{header}");
    }
}
