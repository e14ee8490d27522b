#!/usr/bin/env python3
"""Aether's tests log in to Aether the way an MCP client does, with the official MCP Python
SDK's OAuth client (`mcp.client.auth.OAuthClientProvider`, 2.3.0), with no person and no
browser: on the server's 401 the SDK discovers the protected resource and its authorization
server, registers itself, and sends the user to the authorization URL; here that URL is
fetched and its redirects followed until they reach our redirect_uri with the code (the
authorization server must complete its interactions on its own, as tests/peers/oidc_issuer.mjs
does). The SDK then redeems the code (PKCE) and retries with the token.

With --consent, the authorization server is Aether's own (`[auth] builtin`): its authorization
URL answers a consent page, whose form is posted as a person would (signing in with a console
account and allowing), from the server's own origin.

usage:
  oauth_client.py URL [--scope "s1 s2"] [--call TOOL JSON_ARGS] [--consent NAME:PASSWORD]
                      [--client-metadata-url URL]
      URL    the MCP server (Streamable HTTP)
      --scope  the scope in the client metadata. mcp 2.3.0 overwrites it on every 401 with the
               scope it selects itself (the WWW-Authenticate `scope`, else the protected resource
               metadata's scopes_supported, else the authorization server's, else none; plus
               offline_access when the authorization server supports it), so it reaches the
               server only if the SDK starts a login without a 401
      --call   call TOOL with JSON_ARGS after listing the tools
      --consent  sign in on the consent page as NAME with PASSWORD and allow
      --client-metadata-url  the client's id: its metadata document's https URL (the SDK uses
               it when the authorization server supports client ID metadata documents,
               instead of registering)
Prints one JSON object: {"tools": [names], "result": {...} or null, "isError": bool,
"access_token": "<the token the SDK obtained>", "refresh_token": ..., "client_id": ...}.
Exit 0 on success, 1 when the call returned isError, 2 on any failure (the error on stderr).
"""
import argparse
import asyncio
import html
import json
import re
import sys
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

# Nothing listens here: the redirect to it is caught before it is followed.
REDIRECT_URI = "http://127.0.0.1:33418/callback"
MAX_REDIRECTS = 20


class MemoryStorage:
    """The SDK's TokenStorage, in memory: this process logs in afresh each run."""

    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class HeadlessBrowser:
    """Stands in for the user's browser: `redirect_handler` follows the authorization URL's
    redirects (keeping cookies, as a browser would) until one points at REDIRECT_URI, and keeps
    that redirect's code, state and iss; `callback_handler` hands them to the SDK."""

    def __init__(self, consent: str | None = None):
        self.result: AuthorizationCodeResult | None = None
        self.consent = consent

    async def redirect_handler(self, authorization_url: str) -> None:
        url = authorization_url
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as http:
            for _ in range(MAX_REDIRECTS):
                response = await http.get(url)
                if self.consent and response.status_code == 200 and "<form" in response.text:
                    response = await self.allow(http, url, response.text)
                location = response.headers.get("location")
                if not response.is_redirect or not location:
                    raise RuntimeError(f"authorization stopped at {url}: HTTP {response.status_code} "
                                       f"{response.text[:500]}")
                url = urljoin(url, location)
                if url.startswith(REDIRECT_URI):
                    self.result = callback_result(url)
                    return
        raise RuntimeError(f"authorization did not reach {REDIRECT_URI} in {MAX_REDIRECTS} redirects")

    async def allow(self, http, url: str, page: str):
        """Posts the consent page's form: its hidden fields, the account, and "allow"."""
        name, _, password = self.consent.partition(":")
        form = {html.unescape(k): html.unescape(v)
                for k, v in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page)}
        form.update({"name": name, "password": password, "decision": "allow"})
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
        action = urljoin(url, re.search(r'<form method="post" action="([^"]+)"', page).group(1))
        response = await http.post(action, data=form, headers={"origin": origin})
        if not response.is_redirect:
            raise RuntimeError(f"consent refused: HTTP {response.status_code} {response.text[:500]}")
        return response

    async def callback_handler(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise RuntimeError("no authorization response")
        return self.result


def callback_result(url: str) -> AuthorizationCodeResult:
    """The authorization response in the redirect to REDIRECT_URI, or its error."""
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    if "error" in query:
        raise RuntimeError(f"authorization refused: {query['error']}: {query.get('error_description', '')}")
    return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


def oauth(url: str, scope: str | None, storage: MemoryStorage, consent: str | None = None,
          metadata_url: str | None = None) -> OAuthClientProvider:
    """The SDK's OAuth client for URL: a public client (PKCE, no secret) that registers itself,
    or names itself by its metadata document's URL."""
    browser = HeadlessBrowser(consent)
    metadata = OAuthClientMetadata(
        client_name="aether-tests oauth_client.py",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )
    return OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
        client_metadata_url=metadata_url,
    )


async def run(url: str, scope: str | None, call: list[str] | None, consent: str | None = None,
              metadata_url: str | None = None) -> int:
    storage = MemoryStorage()
    auth = oauth(url, scope, storage, consent, metadata_url)
    http = httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=300))
    async with http, Client(streamable_http_client(url, http_client=http), cache=None) as c:
        tools = await c.list_tools()
        result = await c.call_tool(call[0], json.loads(call[1])) if call else None
    print(json.dumps({
        "tools": [t.name for t in tools.tools],
        "result": json.loads(result.model_dump_json(exclude_none=True, by_alias=True)) if result else None,
        "isError": bool(result and result.is_error),
        "access_token": storage.tokens.access_token if storage.tokens else None,
        "refresh_token": storage.tokens.refresh_token if storage.tokens else None,
        "client_id": storage.client_info.client_id if storage.client_info else None,
    }))
    return 1 if result and result.is_error else 0


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("url")
    parser.add_argument("--scope")
    parser.add_argument("--call", nargs=2, metavar=("TOOL", "JSON_ARGS"))
    parser.add_argument("--consent")
    parser.add_argument("--client-metadata-url")
    return parser.parse_args()


if __name__ == "__main__":
    args = arguments()
    try:
        sys.exit(asyncio.run(run(args.url, args.scope, args.call, args.consent, args.client_metadata_url)))
    except Exception as e:  # the test reads stderr; the exit code says "failed"
        print(f"oauth_client failed: {e!r}", file=sys.stderr)
        sys.exit(2)
