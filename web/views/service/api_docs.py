"""`/openapi.json`: the OpenAPI 3.1 document of every route, its bodies and answers from the types
the service validates and builds them as (never a hand-kept copy); `/docs`: it as a page."""

from __future__ import annotations

import functools
from typing import Any

import aiohttp_jinja2
import orjson
from aiohttp import web

from web.appkeys import DERIVED, SETTINGS
from web.monitors.memory import address
from web.schemas.openapi_answers import described
from web.schemas.openapi_bodies import Schema
from web.schemas.openapi_operations import OPERATIONS


def _path(resource: Any) -> str:
    """The route's path as OpenAPI writes it: `{n:\\d{1,6}}` becomes `{n}`."""
    info = resource.get_info()
    if "formatter" in info:
        return str(info["formatter"])
    return str(info.get("path") or resource.canonical)


def document(app: web.Application) -> Schema:
    routes = [
        (route.method, route.resource.name, _path(route.resource))
        for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD"
        if route.resource.name not in (None, "static")
    ]
    paths, components = described(routes, OPERATIONS, app[SETTINGS])
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ChatTTS Online",
            "version": "1",
            "description": "Text to speech over HTTP: jobs, their audio, events and subtitles.",
        },
        "paths": paths,
        "components": {"schemas": components},
    }


async def openapi_json(request: web.Request) -> web.Response:
    return web.Response(body=await _document_bytes(request), content_type="application/json")


async def api_docs(request: web.Request) -> web.StreamResponse:
    derived = request.app[DERIVED]
    page = derived.kept("docs.html")
    if page is None:  # made once: the routes and settings do not change while the app runs
        doc = orjson.loads(await _document_bytes(request))
        operations = [
            {"method": method.upper(), "path": path, **op}
            for path, methods in doc["paths"].items()
            for method, op in methods.items()
        ]
        web_settings = request.app[SETTINGS].web  # this process's own address in the example
        base = web_settings.public_url.rstrip("/") or f"localhost:{web_settings.port}"
        context = {"operations": operations, "base": base}
        page = aiohttp_jinja2.render_string("docs.html", request, context).encode()
        derived.put("docs.html", page)
    return web.Response(body=page, content_type="text/html", charset="utf-8")


def _dumped(app: web.Application) -> bytes:
    return orjson.dumps(document(app))


async def _document_bytes(request: web.Request) -> bytes:
    app = request.app
    build = functools.partial(_dumped, app)
    return await app[DERIVED].get("openapi.json", build, address(request))
