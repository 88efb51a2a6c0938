"""An answer checked against the OpenAPI document: its status documented for its route, its
media type one of those documented, and a JSON body valid against the documented schema."""

from __future__ import annotations

from typing import Any

import orjson
from jsonschema import Draft202012Validator


def media_type(content_type: str) -> str:
    return content_type.partition(";")[0].strip().lower()


def check_answer(
    doc: dict[str, Any], method: str, route: str, status: int, content_type: str, body: bytes
) -> Any:
    """The answer as the document describes it (its JSON parsed, else None); AssertionError
    naming what contradicts it."""
    operation = doc["paths"][route][method.lower()]
    answers = operation["responses"]
    where = f"{method} {route} {status}"
    assert str(status) in answers, f"{where}: undocumented status (has {sorted(answers)})"
    content = answers[str(status)].get("content", {})
    if not content:
        assert not body, f"{where}: documented without a body, got {body[:200]!r}"
        return None
    documented = {media_type(name): media for name, media in content.items()}
    sent = media_type(content_type)
    assert sent in documented, f"{where}: {sent} is not one of {sorted(documented)}"
    schema = documented[sent].get("schema")
    if sent != "application/json" or schema is None:
        return None
    data = orjson.loads(body)
    validator = Draft202012Validator({**schema, "components": doc["components"]})
    problems = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)
    ]
    assert not problems, f"{where}: {problems[:5]} in {data}"
    return data
