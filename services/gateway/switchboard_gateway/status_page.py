"""``GET /``: the address ``switchboard up`` prints as ready. A static page (no data, so no
token needed) that says the gateway runs, where its APIs and the token are, and links the
WebChat page."""

from __future__ import annotations

from fastapi.responses import HTMLResponse

PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Switchboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 40em; margin: 3em auto">
<h1>Switchboard is running</h1>
<p>This gateway answers these APIs, each with the gateway token as a bearer token
(<code>Authorization: Bearer &lt;token&gt;</code>); <code>switchboard up</code> keeps it in
<code>$SB_HOME/gateway-token</code> unless <code>SB_GATEWAY_TOKEN</code> is set.</p>
<ul>
<li><code>/v1/chat/completions</code>, <code>/v1/models</code>: the OpenAI-compatible API</li>
<li><code>/api/sessions</code>, <code>/api/sessions/{key}/messages</code>, <code>/history</code>,
<code>/events</code>: sessions</li>
<li><code>/tools/invoke</code>, <code>/api/approvals</code>, <code>/api/pairing</code>: tools,
approvals and DM pairing</li>
</ul>
<p>Chat in the browser: <a href="/webchat">WebChat</a> (it asks for the token once).</p>
<p>Health: <a href="/healthz">/healthz</a>, readiness: <a href="/readyz">/readyz</a>.</p>
</body>
</html>
"""


async def page() -> HTMLResponse:
    return HTMLResponse(PAGE)
