"""Query-string and body parsing for the JSON API: bad input is a 400 that says what is wrong.

Why a module: every endpoint takes numbers, id lists and booleans from strings typed by people
and fuzzers alike; one place decides what is accepted, so no endpoint can turn junk into a 500.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from tallyboard.json_numbers import dumps
from tallyboard.values import check_text

MAX_ID = 2**62


class BadRequest(Exception):
    """Raised by parsers; the app turns it into a 400 with the message."""


def integer(request: Request, name: str, default: int | None, lo: int = -MAX_ID, hi: int = MAX_ID) -> Any:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, not {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}")
    return value


def boolean(request: Request, name: str, default: bool = False) -> bool:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise BadRequest(f"{name} must be true or false, not {raw[:40]!r}")


def id_list(request: Request, name: str, most: int) -> list[int] | None:
    """A comma-separated list of run ids (None when absent)."""
    raw = request.query_params.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        ids = [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        raise BadRequest(f"{name} must be comma-separated integers") from None
    if not ids or len(ids) > most or any(abs(i) > MAX_ID for i in ids):
        raise BadRequest(f"{name} takes 1 to {most} ids")
    return list(dict.fromkeys(ids))


def text(request: Request, name: str, default: str = "", longest: int = 2000) -> str:
    raw = request.query_params.get(name, default)
    if len(raw) > longest:
        raise BadRequest(f"{name} is limited to {longest} characters")
    return storable(name, raw)


def storable(name: str, raw: str) -> str:
    """`raw` when a store can hold it: what a read looks for is sent to the database, whose driver
    raises on a NUL character (psycopg) or a lone surrogate (both) instead of finding nothing."""
    try:
        return check_text(name, raw)
    except ValueError as error:
        raise BadRequest(str(error)) from None


def path_id(request: Request, name: str) -> int:
    value = request.path_params[name]
    if abs(value) > MAX_ID:
        raise BadRequest(f"{name} is out of range")
    return value


async def json_object(request: Request) -> dict[str, Any]:
    if "application/json" not in request.headers.get("content-type", ""):
        raise BadRequest("send the body as application/json")
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not valid JSON") from None
    except RecursionError:
        raise BadRequest("the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    try:  # a lone surrogate (\ud800) is valid JSON but no text a database can store
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest("the body holds text that is not valid Unicode (a lone surrogate)") from None
    try:
        nul = any("\x00" in text for text in _texts(body))  # \u0000: PostgreSQL text cannot hold it
    except RecursionError:
        raise BadRequest("the body is nested too deeply") from None
    if nul:
        raise BadRequest("the body holds a NUL character (\\u0000), which no store holds")
    return body


def _texts(value: Any) -> Iterator[str]:
    """Every string of a parsed JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


class Json(JSONResponse):
    """JSONResponse that is standard JSON (non-finite numbers as json_numbers says) and compact."""

    def render(self, content: Any) -> bytes:
        return dumps(content, separators=(",", ":")).encode()
