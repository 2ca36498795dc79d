"""Twilio status callbacks signed by Twilio's own SDK (the `twilio` package's
`RequestValidator.compute_signature`) are accepted in every form Twilio signs them.

Twilio signs the URL it calls sometimes with the scheme's default port (`:443`, `:80`) and
sometimes without. The stack's server listens at `http://127.0.0.1:<port>`, a URL with a port of
its own, so these tests start a second `keel serve` on the same database whose `PUBLIC_BASE_URL`
has no port (`http://127.0.0.1`, as behind a proxy) and that also knows a SharedKey (Twilio's
HMAC-SHA256 signatures, announced by `X-Twilio-Webhooks-Signature-Settings`).
"""

import os
import pathlib
import socket
import subprocess
import time
import uuid

import pytest
import requests
from twilio.request_validator import RequestValidator

PATH = "/api/v1/comms/webhooks/twilio/status"
PORTLESS_BASE = "http://127.0.0.1"
SHARED_KEY_ID = "webhooks_sharedkey_keeltest"
SHARED_KEY_SECRET = "shared-key-secret-of-the-client-tests"
SETTINGS_HEADER = "X-Twilio-Webhooks-Signature-Settings"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def keel_binary() -> pathlib.Path:
    """The `keel` run.sh started: FUZZ_BIN_DIR, else the cargo target directory's debug build."""
    if os.environ.get("FUZZ_BIN_DIR"):
        folder = pathlib.Path(os.environ["FUZZ_BIN_DIR"])
    else:
        target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", "target"))
        folder = (target if target.is_absolute() else ROOT / target) / "debug"
    binary = folder / "keel"
    assert binary.is_file(), f"no keel binary at {binary}"
    return binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def portless():
    """A second server on the stack's database and settings: PUBLIC_BASE_URL without a port, and
    one SharedKey. Yields the address it really listens at."""
    work = pathlib.Path(os.environ["KEEL_WORK_DIR"])
    port = free_port()
    env = dict(
        os.environ,
        PORT=str(port),
        PUBLIC_BASE_URL=PORTLESS_BASE,
        TWILIO_WEBHOOK_SHARED_KEYS=f"{SHARED_KEY_ID}={SHARED_KEY_SECRET}",
    )
    log_path = work / f"keel-portless-{port}.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [str(keel_binary()), "serve"], cwd=work, env=env, stdout=log, stderr=log
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if requests.get(f"{url}/health/ready", timeout=1).ok:
                    break
            except requests.ConnectionError:
                pass
            assert server.poll() is None, log_path.read_text(errors="replace")
            time.sleep(0.1)
        else:
            pytest.fail(f"the second server did not start: {log_path.read_text(errors='replace')}")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "panic" not in log_path.read_text(errors="replace").lower()


def auth_token_validator(settings) -> RequestValidator:
    return RequestValidator(settings["TWILIO_AUTH_TOKEN"])


def post_callback(server_url, params, signature, query="", settings_header=None):
    headers = {"X-Twilio-Signature": signature}
    if settings_header is not None:
        headers[SETTINGS_HEADER] = settings_header
    return requests.post(f"{server_url}{PATH}{query}", data=params, headers=headers, timeout=30)


def unknown_message() -> dict:
    """A callback for a message Keel never sent: verified, then answered 200 `applied: false`."""
    sid = "SM" + uuid.uuid4().hex
    return {
        "MessageSid": sid,
        "SmsSid": sid,
        "MessageStatus": "delivered",
        "SmsStatus": "delivered",
    }


def assert_accepted(answer):
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"applied": False}


def assert_refused(answer):
    assert answer.status_code == 403, answer.text
    assert answer.json() == {"detail": "Invalid signature"}


def test_the_url_as_configured_with_its_own_port(base_url, settings):
    """The stack's server: PUBLIC_BASE_URL has a port, which is signed as it is."""
    validator = auth_token_validator(settings)
    params = unknown_message()
    assert_accepted(
        post_callback(base_url, params, validator.compute_signature(base_url + PATH, params))
    )
    query = "?attempt=1&note=a%20b"
    signature = validator.compute_signature(base_url + PATH + query, params)
    assert_accepted(post_callback(base_url, params, signature, query))
    # The SDK would also take the URL without its port; Twilio calls the URL it was given, so a
    # port that is not the default stays.
    portless_url = base_url.rsplit(":", 1)[0] + PATH
    assert_refused(
        post_callback(base_url, params, validator.compute_signature(portless_url, params))
    )


def test_both_forms_of_the_default_port_and_the_query_as_called(portless, settings):
    validator = auth_token_validator(settings)
    params = unknown_message()
    for signed_base in [PORTLESS_BASE, PORTLESS_BASE + ":80"]:
        for query in ["", "?attempt=2&name=%27Keel%27"]:
            signature = validator.compute_signature(signed_base + PATH + query, params)
            # The SDK's own check agrees with Keel's.
            assert validator.validate(PORTLESS_BASE + PATH + query, params, signature)
            assert_accepted(post_callback(portless, params, signature, query))


def test_wrong_signatures_are_refused(portless, settings):
    validator = auth_token_validator(settings)
    params = unknown_message()
    url = PORTLESS_BASE + PATH
    wrong_token = RequestValidator("0" * 32).compute_signature(url, params)
    assert_refused(post_callback(portless, params, wrong_token))
    tampered = dict(params, MessageStatus="failed")
    assert_refused(post_callback(portless, tampered, validator.compute_signature(url, params)))
    for other in [
        "http://127.0.0.1:8080",
        "http://127.0.0.1:443",
        "https://127.0.0.1",
        "http://localhost",
    ]:
        signature = validator.compute_signature(other + PATH, params)
        assert_refused(post_callback(portless, params, signature))
    # The query is part of what is signed.
    signature = validator.compute_signature(url, params)
    assert_refused(post_callback(portless, params, signature, "?attempt=2"))
    answer = requests.post(portless + PATH, data=params, timeout=30)
    assert_refused(answer)


def test_shared_key_signatures_name_their_key_and_algorithm(portless, settings):
    shared = RequestValidator(SHARED_KEY_SECRET)
    params = unknown_message()
    header = f"key={SHARED_KEY_ID},algorithm=HMAC_SHA256"
    for signed_base in [PORTLESS_BASE, PORTLESS_BASE + ":80"]:
        signature = shared.compute_signature(signed_base + PATH, params, "HMAC_SHA256")
        assert_accepted(post_callback(portless, params, signature, settings_header=header))
    sha1 = shared.compute_signature(PORTLESS_BASE + PATH, params, "HMAC_SHA1")
    assert_accepted(
        post_callback(
            portless, params, sha1, settings_header=f"key={SHARED_KEY_ID},algorithm=HMAC_SHA1"
        )
    )
    # Another key, another algorithm than the header names, or the auth token's signature.
    signature = shared.compute_signature(PORTLESS_BASE + PATH, params, "HMAC_SHA256")
    assert_refused(
        post_callback(
            portless,
            params,
            signature,
            settings_header="key=webhooks_sharedkey_other,algorithm=HMAC_SHA256",
        )
    )
    assert_refused(
        post_callback(
            portless, params, signature, settings_header=f"key={SHARED_KEY_ID},algorithm=HMAC_SHA1"
        )
    )
    assert_refused(post_callback(portless, params, signature))
    token_signed = auth_token_validator(settings).compute_signature(PORTLESS_BASE + PATH, params)
    assert_refused(post_callback(portless, params, token_signed, settings_header=header))


def test_a_shared_key_signature_needs_the_setting(base_url, settings):
    """The stack's server has no TWILIO_WEBHOOK_SHARED_KEYS: 503 naming it."""
    if os.environ.get("TWILIO_WEBHOOK_SHARED_KEYS"):
        pytest.skip("the stack's server has TWILIO_WEBHOOK_SHARED_KEYS")
    params = unknown_message()
    signature = RequestValidator(SHARED_KEY_SECRET).compute_signature(
        base_url + PATH, params, "HMAC_SHA256"
    )
    answer = post_callback(
        base_url, params, signature, settings_header=f"key={SHARED_KEY_ID},algorithm=HMAC_SHA256"
    )
    assert answer.status_code == 503, answer.text
    assert answer.json() == {
        "detail": "Twilio webhooks not configured: TWILIO_WEBHOOK_SHARED_KEYS is not set"
    }


def test_a_sent_sms_moves_to_delivered_through_signed_callbacks(
    portless, settings, new_user, admin_token
):
    """An SMS sent through the portless server: the simulator's own callbacks go to port 80, where
    nothing listens, so only the callbacks posted here move it."""
    _, _, token = new_user
    answer = requests.post(
        f"{portless}/api/v1/comms/sms/send",
        json={"to": "+15005550010", "body": "Signed by the SDK"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    sid = answer.json()["sid"]
    listed = requests.get(
        f"{portless}/api/v1/comms/messages",
        params={"channel": "sms", "page_size": 100},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert listed.status_code == 200, listed.text
    (message_id,) = [m["id"] for m in listed.json()["messages"] if m["provider_id"] == sid]

    def logged_status() -> str:
        answer = requests.get(
            f"{portless}/api/v1/comms/messages/{message_id}",
            headers={"Authorization": f"Bearer {admin_token}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["status"]

    assert logged_status() == "queued"
    fields = {
        "MessageSid": sid,
        "SmsSid": sid,
        "AccountSid": settings["TWILIO_ACCOUNT_SID"],
        "From": settings.get("TWILIO_PHONE_NUMBER", "+15005550006"),
        "To": "+15005550010",
        "ApiVersion": "2010-04-01",
    }
    # `sent`, signed by the auth token over the URL with `:80`.
    sent = dict(fields, MessageStatus="sent", SmsStatus="sent")
    signature = auth_token_validator(settings).compute_signature(f"{PORTLESS_BASE}:80{PATH}", sent)
    answer = post_callback(portless, sent, signature)
    assert (answer.status_code, answer.json()) == (200, {"applied": True}), answer.text
    assert logged_status() == "sent"
    # `delivered`, signed by the SharedKey with HMAC-SHA256 over the URL with a query string.
    delivered = dict(fields, MessageStatus="delivered", SmsStatus="delivered")
    query = "?attempt=1"
    signature = RequestValidator(SHARED_KEY_SECRET).compute_signature(
        PORTLESS_BASE + PATH + query, delivered, "HMAC_SHA256"
    )
    header = f"key={SHARED_KEY_ID},algorithm=HMAC_SHA256"
    answer = post_callback(portless, delivered, signature, query, settings_header=header)
    assert (answer.status_code, answer.json()) == (200, {"applied": True}), answer.text
    assert logged_status() == "delivered"
