"""`/tts`: ChatTTS-ui's API, as pyVideoTrans and bots call it: `GET` or `POST`, fields in the query
string or a form, an answer once the audio is made.

The call becomes one interactive job (a WAV, seeded with `text_seed` as ChatTTS-ui seeds it). Its
answer is ChatTTS-ui's: `{"code": 0, "msg": "ok", "audio_files": [...], "filename", "url"}`,
or with `wav=1` the WAV itself; errors are `{"code": 1, "msg": ...}` with HTTP 200, which its
clients read. `url` is absolute; `filename` is the file's path on this machine when the audio
store is a directory and the caller is on this machine (pyVideoTrans reads it from disk when the
server is on localhost), else the file's name.
"""

from __future__ import annotations

import ipaddress

from aiohttp import web

from web.appkeys import FORWARDED_TLS, QUEUE, SETTINGS
from web.errors import ApiError, json_response
from web.intake.bodies import FORM, MULTIPART, form_fields
from web.intake.door import Policy, admit, who
from web.intake.submissions import check_voice
from web.middlewares.origin import origin_allowed
from web.replies.sending import holding, send_bytes
from web.replies.waiting import succeeded
from web.schemas.chatttsui import DEFAULT_VOICE, FIELDS, answer, failure, tts_call

# The most bytes one character of text takes in a form: 4 in UTF-8, each sent as %XX.
_BYTES_PER_CHAR = 12
_OTHER_FIELDS = 8 * 1024  # the other fields together, and the form's own framing
# One interactive job, answered once it is made.
_TTS = Policy(hold=True, priority="high")


async def tts(request: web.Request) -> web.StreamResponse:
    try:
        return await _tts(request)
    except ApiError as exc:
        return json_response(failure(exc.message), headers=exc.headers)


async def _spoken_voice(app: web.Application, voice: str, client: str) -> str:
    """The voice, or ChatTTS-ui's default seed for a name that is not one here: ChatTTS-ui
    speaks any voice that is no seed or saved speaker in its default (pyVideoTrans' settings
    test sends `boy1`)."""
    try:
        await check_voice(app[QUEUE], voice, client)
    except ApiError:
        return DEFAULT_VOICE
    return voice


async def _tts(request: web.Request) -> web.StreamResponse:
    app = request.app
    if request.method == "GET" and not _own_page_or_no_page(request):
        raise ApiError(
            403,
            "a page of another site cannot make this server speak through its visitors' "
            "browsers; call /tts from a program, or add the site to CHATTTS_ALLOWED_ORIGINS",
            code="origin_not_allowed",
        )
    call, by = tts_call(await _fields(request)), who(request)
    call.job["voice"] = await _spoken_voice(app, call.job["voice"], by.client)
    async with admit(app, by, call.job, _TTS) as admitted:  # held while it is made
        job_id = admitted.job_id
        finished = await succeeded(request, job_id, admitted.cursor)
    if finished is None:
        return web.Response(status=499, headers={"X-Job-Id": job_id})
    if call.wav:
        with holding(request, int(finished.get("audio_size") or 0)):
            data = await app[QUEUE].stored.file(job_id)
            if data is None:
                raise ApiError(404, "the audio expired", code="audio_expired")
            headers = {"Content-Type": "audio/x-wav", "X-Job-Id": job_id}
            return await send_bytes(request, data, headers)
    url = _origin(request) + str(app.router["job_audio"].url_for(job_id=job_id))
    # The file's path on this machine, for a caller on this machine only (pyVideoTrans reads
    # it from disk): a remote caller learns nothing of the server's directories.
    local = await app[QUEUE].stored.local_path(job_id) if _on_this_machine(request) else None
    filename = local or f"tts-{job_id}.wav"
    made_s = float(finished.get("finished_at") or 0) - float(finished.get("created_at") or 0)
    body = answer(filename, url, max(0.0, made_s), float(finished.get("duration_s") or 0))
    return json_response(body, headers={"X-Job-Id": job_id})


async def _fields(request: web.Request) -> dict[str, str]:
    """The form's fields overlaid with the query string's (ChatTTS-ui reads the query string
    first); a JSON body is not read, as ChatTTS-ui reads none. The form goes through the one
    reader, bounded a few KB above the longest text it may carry."""
    fields: dict[str, str] = {}
    if request.method == "POST" and request.content_type in (FORM, MULTIPART):
        limit = request.app[SETTINGS].limits.max_text_chars * _BYTES_PER_CHAR + _OTHER_FIELDS
        fields.update(await form_fields(request, limit, len(FIELDS) * 2))
    fields.update((k, v) for k, v in request.query.items() if v.strip())
    return fields


def _own_page_or_no_page(request: web.Request) -> bool:
    """A GET that makes a job: not from a page elsewhere (an `<img src>` sends no Origin, but
    every current browser sends Sec-Fetch-Site)."""
    site = request.headers.get("Sec-Fetch-Site", "none")
    return site in ("none", "same-origin") or (
        "Origin" in request.headers and origin_allowed(request)
    )


def _on_this_machine(request: web.Request) -> bool:
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False


def _origin(request: web.Request) -> str:
    """This server as its caller reached it (the configured public URL first)."""
    public = request.app[SETTINGS].web.public_url
    if public:
        return public.rstrip("/")
    scheme = "https" if request.get(FORWARDED_TLS, request.secure) else "http"
    return f"{scheme}://{request.host}"
