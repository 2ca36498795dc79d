"""Shared fixtures of the client-library tests: the running server (started by run.sh), the
settings provider-sim printed for it, and accounts with their bearer tokens."""

import os
import uuid

import pytest
import requests


@pytest.fixture(scope="session")
def base_url() -> str:
    return os.environ["KEEL_BASE_URL"]


@pytest.fixture(scope="session")
def sim_url() -> str:
    return os.environ["SIM_BASE_URL"]


@pytest.fixture(scope="session")
def settings() -> dict:
    """The server's .env: the settings that point it at provider-sim (keys, secrets, bases)."""
    values = {}
    with open(os.environ["KEEL_ENV_FILE"], encoding="utf-8") as env:
        for line in env:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                values[key] = value
    return values


PASSWORD = "password123"


def login(base_url: str, email: str, password: str = PASSWORD) -> str:
    answer = requests.post(
        f"{base_url}/auth/token", data={"username": email, "password": password}, timeout=30
    )
    answer.raise_for_status()
    return answer.json()["access_token"]


@pytest.fixture
def new_user(base_url):
    """A freshly registered user: (email, password, bearer token)."""
    email = f"user-{uuid.uuid4().hex[:12]}@example.com"
    answer = requests.post(
        f"{base_url}/auth/register", json={"email": email, "password": PASSWORD}, timeout=30
    )
    assert answer.status_code == 201, answer.text
    return email, PASSWORD, login(base_url, email)


@pytest.fixture(scope="session")
def admin_token(base_url) -> str:
    """The administrator run.sh created."""
    return login(base_url, "admin@example.com")
