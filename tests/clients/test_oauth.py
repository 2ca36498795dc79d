"""The token endpoint through an OAuth 2.0 client library (authlib), as an application that
signs its users in with the password grant uses it (RFC 6749 §4.3)."""

import pytest
import requests
from authlib.integrations.requests_client import OAuth2Session, OAuthError


def session() -> OAuth2Session:
    # A public client: no client secret, the id sent in the body (RFC 6749 §2.3.1 "none").
    return OAuth2Session(client_id="keel-tests", token_endpoint_auth_method="none")


@pytest.mark.parametrize("prefix", ["/auth", "/api/v1/auth"])
def test_the_password_grant_gets_a_usable_token(base_url, new_user, prefix):
    email, password, _ = new_user
    client = session()
    token = client.fetch_token(
        f"{base_url}{prefix}/token", username=email, password=password, grant_type="password"
    )
    assert token["token_type"] == "bearer"
    assert token["expires_in"] > 0
    assert "expires_at" in token  # authlib computed it from expires_in
    me = client.get(f"{base_url}/auth/me", timeout=30)
    assert me.status_code == 200, me.text
    assert me.json()["email"] == email


def test_a_confidential_client_with_basic_auth_gets_a_token_too(base_url, new_user):
    email, password, _ = new_user
    client = OAuth2Session(
        client_id="keel-tests", client_secret="s3cret", token_endpoint_auth_method="client_secret_basic"
    )
    token = client.fetch_token(f"{base_url}/auth/token", username=email, password=password)
    assert requests.get(
        f"{base_url}/auth/me", headers={"Authorization": f"Bearer {token['access_token']}"}, timeout=30
    ).ok


def test_a_wrong_password_raises_the_librarys_oauth_error(base_url, new_user):
    email, _, _ = new_user
    client = session()
    with pytest.raises(OAuthError) as raised:
        client.fetch_token(f"{base_url}/auth/token", username=email, password="wrong-password")
    assert raised.value.error == "invalid_grant"
    assert raised.value.description == "Incorrect email or password"
    assert not client.token  # nothing was stored as a token


def test_an_unknown_user_raises_invalid_grant(base_url):
    with pytest.raises(OAuthError) as raised:
        session().fetch_token(
            f"{base_url}/auth/token", username="nobody@example.com", password="password123"
        )
    assert raised.value.error == "invalid_grant"


def test_the_client_credentials_grant_never_issues_a_token(base_url, new_user):
    email, password, _ = new_user
    client = OAuth2Session(client_id=email, client_secret=password)
    with pytest.raises(OAuthError) as raised:
        client.fetch_token(f"{base_url}/auth/token", grant_type="client_credentials")
    assert raised.value.error == "unsupported_grant_type"
    # Nor with the user's credentials in the form.
    with pytest.raises(OAuthError) as raised:
        session().fetch_token(
            f"{base_url}/auth/token", grant_type="client_credentials", username=email, password=password
        )
    assert raised.value.error == "unsupported_grant_type"


def test_answers_keep_the_spec_detail_and_tokens_are_not_cached(base_url, new_user):
    email, password, _ = new_user
    ok = requests.post(f"{base_url}/auth/token", data={"username": email, "password": password}, timeout=30)
    assert ok.headers["Cache-Control"] == "no-store"
    assert ok.headers["Pragma"] == "no-cache"
    refused = requests.post(
        f"{base_url}/auth/token", data={"username": email, "password": "nope-nope"}, timeout=30
    )
    assert refused.status_code == 401
    assert refused.json()["detail"] == "Incorrect email or password"
    missing = requests.post(f"{base_url}/auth/token", data={"username": email}, timeout=30)
    assert missing.status_code == 422
    assert missing.json()["error"] == "invalid_request"
    assert missing.json()["detail"] == [{"field": "password", "message": "Field required"}]
