"""The OpenAPI document as tools read it: openapi-spec-validator finds it valid OpenAPI 3.1, and
a client generated from it by openapi-python-client works against the server."""

import importlib
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests
from openapi_spec_validator import OpenAPIV31SpecValidator


@pytest.fixture(scope="module")
def document(base_url) -> dict:
    answer = requests.get(f"{base_url}/openapi.json", timeout=30)
    answer.raise_for_status()
    return answer.json()


def test_the_document_is_valid_openapi_3_1(document):
    assert document["openapi"].startswith("3.1")
    errors = [error.message for error in OpenAPIV31SpecValidator(document).iter_errors()]
    assert errors == []


def test_no_two_templates_are_the_same_path(document):
    shapes = {}
    for path in document["paths"]:
        shape = "/".join("{}" if s.startswith("{") else s for s in path.split("/"))
        assert shape not in shapes, f"{path} and {shapes[shape]} are one path to OpenAPI 3.1"
        shapes[shape] = path


@pytest.fixture(scope="module")
def client_package(base_url, tmp_path_factory):
    """A Python client generated from the served document, importable as `keel_client`."""
    out = tmp_path_factory.mktemp("generated")
    spec = out / "openapi.json"
    spec.write_bytes(requests.get(f"{base_url}/openapi.json", timeout=30).content)
    config = out / "config.yaml"
    config.write_text("package_name_override: keel_client\npost_hooks: []\n")
    subprocess.run(
        [
            str(Path(sys.executable).with_name("openapi-python-client")),
            "generate",
            "--path",
            str(spec),
            "--config",
            str(config),
            "--output-path",
            str(out / "keel_client"),
            "--meta",
            "none",
        ],
        check=True,
        cwd=out,
    )
    sys.path.insert(0, str(out))
    importlib.invalidate_caches()
    yield importlib.import_module("keel_client")
    sys.path.remove(str(out))


def module(package, name):
    return importlib.import_module(f"{package.__name__}.{name}")


def find_operation(package, function):
    """The generated module of an operation, whatever tag folder it was put in."""
    api = Path(package.__file__).parent / "api"
    for candidate in api.glob(f"*/{function}.py"):
        return importlib.import_module(f"{package.__name__}.api.{candidate.parent.name}.{function}")
    raise AssertionError(f"no generated operation {function} under {api}")


def test_a_generated_client_registers_logs_in_blogs_and_texts(base_url, client_package, admin_token):
    keel = client_package
    models = module(keel, "models")
    anonymous = keel.Client(base_url=base_url, raise_on_unexpected_status=True)

    email = f"gen-{uuid.uuid4().hex[:10]}@example.com"
    register = find_operation(keel, "register")
    created = register.sync(client=anonymous, body=models.AuthUserCreate(email=email, password="password123"))
    assert created.email == email

    token_op = find_operation(keel, "token")
    token = token_op.sync(client=anonymous, body=models.AuthLoginForm(username=email, password="password123"))
    assert token.token_type == "bearer" and token.expires_in > 0

    user = keel.AuthenticatedClient(base_url=base_url, token=token.access_token, raise_on_unexpected_status=True)
    me = find_operation(keel, "me").sync(client=user)
    assert me.email == email

    # The blog, as the administrator (any active user may write at the default protection).
    admin = keel.AuthenticatedClient(base_url=base_url, token=admin_token, raise_on_unexpected_status=True)
    slug = f"generated-{uuid.uuid4().hex[:8]}"
    post = find_operation(keel, "create_post").sync(
        client=admin, body=models.BlogBlogPostCreate(title="Generated", slug=slug, content="Hello *there*")
    )
    assert post.status == "draft"
    published = find_operation(keel, "publish_post").sync(client=admin, post_id=post.id)
    assert published.status == "published"
    fetched = find_operation(keel, "get_post").sync(client=anonymous, post=slug)
    assert fetched.id == post.id and fetched.title == "Generated"

    # An SMS through provider-sim's Twilio.
    sms = find_operation(keel, "send_sms").sync(
        client=user, body=models.CommsSmsSendRequest(to="+15005550010", body="Hello from a generated client")
    )
    assert sms.status == "sent" and sms.segments == 1
