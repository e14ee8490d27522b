#!/usr/bin/env node
// A real OpenID provider (the npm package oidc-provider, 9.x) for Aether's OAuth tests: the
// authorization server an MCP client registers with, is sent to for a code, and gets a JWT
// access token from; Aether, as the resource server, checks those tokens against its /jwks.
//
// usage:
//   node oidc_issuer.mjs [--port N] [--resource URL]... [--scopes "a b c"] [--ttl SECONDS]
//     --port      listen on 127.0.0.1:N; 0 (the default) picks a free port
//     --resource  a resource (RFC 8707) tokens may be minted for; repeatable. The first is
//                 the default for requests that name none. http://other.example/mcp is always
//                 allowed too, so a test can mint a token for another audience; any other
//                 resource is refused (invalid_target).
//     --scopes    the resource scopes (default "mcp:tools mcp:read mcp:write"); the provider
//                 also supports openid and offline_access
//     --ttl       access token lifetime in seconds (default 300)
//     --console-redirect  a redirect URI of the public client `aether-console` (authorization
//                 code + PKCE, no secret): Aether's console signing people in; repeatable
//     --groups    the `groups` claim of the account alice (default "aether-admins")
// Once listening it prints one line to stdout, {"issuer": "http://127.0.0.1:PORT", "port": PORT};
// everything else goes to stderr. Exits on SIGTERM.
//
// What it serves (issuer http://127.0.0.1:PORT):
//   /.well-known/openid-configuration   discovery (also at /.well-known/oauth-authorization-server)
//   /jwks                               the one RS256 signing key
//   /reg                                open dynamic client registration (public clients welcome)
//   /auth                               authorization code + PKCE S256 (required); every request
//                                       logs in "alice" and grants what it asks, with no person:
//                                       following its redirects ends at redirect_uri?code=…&state=…
//   /token                              authorization_code, refresh_token, client_credentials;
//                                       access tokens are JWTs (typ at+jwt, aud = the resource,
//                                       scope = the granted resource scopes)
//   POST /test/rotate                   replace the signing key (the old one leaves /jwks);
//                                       answers {"kid": "<new kid>"}
// Confidential clients are pre-registered: aether-tests, aether-tests-other and
// aether-tests-short (tokens of one second), secret aether-tests-secret (grant
// client_credentials, basic auth or client_secret_post), so a test can mint a token with
//   POST /token grant_type=client_credentials&scope=mcp:tools&resource=URL
//
// environment:
//   AETHER_NPM  the npm folder oidc-provider is installed in (default
//               ~/.cache/aether-peers/npm): this file is outside it, so a bare import would
//               not resolve
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

// stdout carries the one JSON line; oidc-provider prints its notices with console.info.
console.log = console.info = (...args) => console.error(...args);

const OTHER_RESOURCE = 'http://other.example/mcp';
const ACCOUNT = 'alice';
const OIDC_SCOPES = ['openid', 'offline_access', 'profile', 'groups'];

function options() {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      resource: { type: 'string', multiple: true, default: [] },
      scopes: { type: 'string', default: 'mcp:tools mcp:read mcp:write' },
      ttl: { type: 'string', default: '300' },
      'console-redirect': { type: 'string', multiple: true, default: [] },
      groups: { type: 'string', default: 'aether-admins' },
    },
  });
  return {
    port: Number(values.port),
    resources: values.resource,
    scopes: values.scopes.split(/\s+/).filter(Boolean),
    ttl: Number(values.ttl),
    consoleRedirects: values['console-redirect'],
    groups: values.groups.split(/\s+/).filter(Boolean),
  };
}

// oidc-provider is ESM-only and has no CommonJS entry, so import its entry file by URL.
async function loadOidcProvider() {
  const npm = process.env.AETHER_NPM || path.join(os.homedir(), '.cache/aether-peers/npm');
  const dir = path.join(npm, 'node_modules/oidc-provider');
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  let entry = pkg.exports?.['.'] ?? pkg.exports ?? pkg.main ?? 'index.js';
  if (typeof entry === 'object') entry = entry.import ?? entry.default;
  return import(pathToFileURL(path.join(dir, entry)).href);
}

// A fresh RS256 signing key, as the private JWK the provider's keystore takes.
function signingKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = crypto.randomBytes(12).toString('base64url');
  return { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
}

// How long an access token for `client` lives.
let ttlFor = () => 300;

function configuration(opts, errors, jwk, cookieKeys) {
  ttlFor = (client) => (client?.clientId === 'aether-tests-short' ? 1 : opts.ttl);
  const allowed = new Set([...opts.resources, OTHER_RESOURCE]);
  const allScopes = [...OIDC_SCOPES, ...opts.scopes];
  return {
    jwks: { keys: [jwk] },
    cookies: { keys: cookieKeys },
    // Every scope a client may register for or request: a client's registered `scope` may only
    // hold these. The resource scopes are also each resource server's (below).
    scopes: allScopes,
    claims: { openid: ['sub'], profile: ['preferred_username', 'name'], groups: ['groups'] },
    // The ID token carries the claims its scopes ask for (Aether's console reads the groups
    // there), though an access token is issued too.
    conformIdTokenClaims: false,
    responseTypes: ['code'],
    pkce: { required: () => true },
    clientBasedCORS: () => true,
    async findAccount(_ctx, sub) {
      return {
        accountId: sub,
        async claims() {
          return { sub, preferred_username: sub, name: sub, groups: opts.groups };
        },
      };
    },
    // (ttlFor: one second for aether-tests-short's tokens, --ttl for everyone else's.)
    // Clients for minting tokens directly (client_credentials): `aether-tests` and
    // `aether-tests-other` (another subject), whose tokens live --ttl seconds, and
    // `aether-tests-short`, whose tokens live one second.
    clients: ['aether-tests', 'aether-tests-other', 'aether-tests-short'].map((client_id) => ({
      client_id,
      client_secret: 'aether-tests-secret',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      scope: allScopes.join(' '),
      token_endpoint_auth_method: 'client_secret_basic', // client_secret_post is accepted too
    })).concat(opts.consoleRedirects.length ? [{
      client_id: 'aether-console',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: opts.consoleRedirects,
      scope: 'openid profile groups',
      token_endpoint_auth_method: 'none',
    }] : []),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    ttl: {
      AccessToken: () => opts.ttl,
      ClientCredentials: (_ctx, _token, client) => ttlFor(client),
      // The rest fixed, so the provider does not print notices about their defaults.
      AuthorizationCode: 60,
      Grant: 3600,
      IdToken: 3600,
      Interaction: 600,
      RefreshToken: 24 * 3600,
      Session: 3600,
    },
    features: {
      devInteractions: { enabled: false }, // the interactions below answer instead of a form
      registration: { enabled: true }, // open: no initial access token
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // No resource in the request: the first --resource. Several granted: prefer it too.
        async defaultResource(_ctx, _client, oneOf) {
          if (oneOf) return oneOf.includes(opts.resources[0]) ? opts.resources[0] : oneOf[0];
          return opts.resources[0];
        },
        // A token request without `resource` gets the resource the authorization granted.
        async useGrantedResource() {
          return true;
        },
        async getResourceServerInfo(_ctx, resource, client) {
          if (!allowed.has(resource)) throw new errors.InvalidTarget(`unknown resource ${resource}`);
          return {
            scope: opts.scopes.join(' '),
            audience: resource,
            accessTokenTTL: ttlFor(client),
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  };
}

// The provider (a Koa app) behind the HTTP server; /test/rotate replaces it with one holding a
// new key. Clients, grants and sessions live in the memory adapter, which both share.
function makeProvider(Provider, errors, issuer, opts, jwk, cookieKeys) {
  const provider = new Provider(issuer, configuration(opts, errors, jwk, cookieKeys));
  provider.on('server_error', (_ctx, err) => console.error('oidc server_error:', err));
  return { provider, kid: jwk.kid, handle: provider.callback() };
}

// Completes an interaction with no person: the login prompt logs in alice; the consent prompt
// grants exactly what the provider reports missing (OIDC scopes, resource scopes per resource).
async function interaction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  console.error(`interaction ${details.uid}: ${prompt.name} (${[...prompt.reasons].join(', ')})`);
  if (prompt.name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: ACCOUNT } });
    return;
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session?.accountId ?? ACCOUNT, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } });
}

function send(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function main() {
  const opts = options();
  const { default: Provider, errors } = await loadOidcProvider();
  const cookieKeys = [crypto.randomBytes(32).toString('base64url')];
  let current;

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    console.error(`${req.method} ${req.url}`);
    try {
      if (req.method === 'POST' && url.pathname === '/test/rotate') {
        current = makeProvider(Provider, errors, current.provider.issuer, opts, signingKey(), cookieKeys);
        console.error(`rotated the signing key: kid ${current.kid}`);
        send(res, 200, { kid: current.kid });
      } else if (req.method === 'GET' && /^\/interaction\/[^/]+$/.test(url.pathname)) {
        await interaction(current.provider, req, res);
      } else {
        current.handle(req, res);
      }
    } catch (err) {
      console.error(`${req.method} ${url.pathname} failed:`, err);
      if (!res.headersSent) send(res, 500, { error: 'server_error', error_description: String(err) });
    }
  });

  server.listen(opts.port, '127.0.0.1', () => {
    const { port } = server.address();
    const issuer = `http://127.0.0.1:${port}`;
    current = makeProvider(Provider, errors, issuer, opts, signingKey(), cookieKeys);
    console.error(`oidc issuer ${issuer}: resources ${JSON.stringify(opts.resources)}, `
      + `scopes ${opts.scopes.join(' ')}, ttl ${opts.ttl}s, kid ${current.kid}`);
    process.stdout.write(`${JSON.stringify({ issuer, port })}\n`);
  });

  process.on('SIGTERM', () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  });
}

main().catch((err) => {
  console.error('oidc_issuer failed:', err);
  process.exit(2);
});
