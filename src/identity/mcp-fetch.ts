import { PERMISSION_TOOL, RESOURCE_METHODS } from '../mcp/message.js';
import { matchUriTemplate, parseUriTemplate, type UriTemplate } from '../mcp/uri-template.js';
import type { McpTarget } from '../policy/types.js';
import type { AgentSigner } from './client.js';

/** A sidecar lists a few hundred capabilities at most; a cursor loop past this is a broken list, not a big policy. */
const MAX_PAGES = 100;

/** One capability as GET /capability/list shows it (only what the audience needs). */
export interface McpCapability {
  name: string;
  mcp?: McpTarget;
}

export interface McpFetchOptions {
  /** From createAgentSigner: signer.sign(aud) mints a fresh token. */
  signer: AgentSigner;
  /** Where each message's capability comes from: default discovered once from GET <origin>/capability/list?limit=200 (follows next_cursor), no token needed. */
  capabilities?: McpCapability[];
  /** The underlying fetch (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** Default 'authorization' with a 'Bearer ' prefix; any other header name gets the bare token. */
  tokenHeader?: string;
  /**
   * Bind every token to its HTTP request (htm, htu, ath): `true` names the URL as called, `{ origin }` the
   * service's public origin instead (its issuer's, when the agent reaches the sidecar at another address).
   */
  bind?: boolean | { origin: string };
}

/** One MCP server's capabilities, by what a message names. */
interface ServerIndex {
  session?: string;
  tools: Map<string, string>;
  prompts: Map<string, string>;
  resources: { template: UriTemplate; capability: string }[];
}

type Index = Map<string, ServerIndex>;

/**
 * A fetch for the official MCP SDK's StreamableHTTPClientTransport({ fetch }):
 * every HTTP request gets one fresh single-use agent+jwt whose aud is the
 * capability its JSON-RPC message is checked as by the sidecar (tools/call the
 * tool's, prompts/get the prompt's, resources/* the matching template's,
 * everything else and the GET stream and DELETE the session's). A static
 * Authorization header cannot do this: tokens are single use.
 */
export function createMcpFetch(options: McpFetchOptions): typeof fetch {
  const base = options.fetch ?? globalThis.fetch;
  const header = options.tokenHeader ?? 'authorization';
  const bearer = header.toLowerCase() === 'authorization';
  const given = options.capabilities ? indexCapabilities(options.capabilities) : undefined;
  // Per origin, so one fetch serves several sidecars; a failed discovery is forgotten and retried by the next request.
  const discovered = new Map<string, Promise<Index>>();
  const indexFor = (origin: string): Promise<Index> => {
    if (given) return Promise.resolve(given);
    let found = discovered.get(origin);
    if (!found) {
      const attempt = discover(base, origin).then(indexCapabilities);
      attempt.catch(() => discovered.get(origin) === attempt && discovered.delete(origin));
      discovered.set(origin, (found = attempt));
    }
    return found;
  };

  const mcpFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : input);
    const server = (await indexFor(url.origin)).get(url.pathname);
    if (!server?.session) {
      throw new Error(`no MCP server at ${url.pathname}: the sidecar's /capability/list does not list an MCP server (a session capability) there`);
    }
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const bytes = method === 'POST' ? await bodyBytes(input, init) : undefined;
    const message = bytes === undefined ? undefined : parseMessage(bytes);
    // A body this fetch cannot read without consuming it (a stream, a Blob) cannot be hashed: binding it to none would be refused.
    if (options.bind && method === 'POST' && bytes === undefined && init?.body != null)
      throw new Error('createMcpFetch({ bind }) needs a string or byte body to bind');
    const bind = options.bind ? { method, url: typeof options.bind === 'object' ? new URL(url.pathname, options.bind.origin) : url, body: bytes } : undefined;
    const token = await options.signer.sign(audience(server, server.session, message), bind ? { bind } : undefined);
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    headers.set(header, bearer ? `Bearer ${token}` : token);
    return base(input, { ...init, headers });
  };
  return mcpFetch;
}

/** The capability names the sidecar checks each message of each MCP path as. */
function indexCapabilities(capabilities: readonly McpCapability[]): Index {
  const index: Index = new Map();
  for (const { name, mcp } of capabilities) {
    if (!mcp || typeof mcp.path !== 'string') continue;
    let server = index.get(mcp.path);
    if (!server) index.set(mcp.path, (server = { tools: new Map(), prompts: new Map(), resources: [] }));
    if (mcp.kind === 'session') server.session = name;
    else if (mcp.kind === 'tool' && mcp.name !== undefined) server.tools.set(mcp.name, name);
    else if (mcp.kind === 'prompt' && mcp.name !== undefined) server.prompts.set(mcp.name, name);
    else if (mcp.kind === 'resource' && mcp.uri !== undefined) {
      const template = parseUriTemplate(mcp.uri);
      // The sidecar's policy check refuses a bad template, so one here is not the sidecar's: skip it.
      if (typeof template !== 'string') server.resources.push({ template, capability: name });
    }
  }
  return index;
}

/** Every page of GET <origin>/capability/list (public: no token). */
async function discover(base: typeof fetch, origin: string): Promise<McpCapability[]> {
  const all: McpCapability[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const url = new URL('/capability/list', origin);
    url.searchParams.set('limit', '200');
    if (cursor !== undefined) url.searchParams.set('cursor', cursor);
    const res = await base(url, { headers: { accept: 'application/json' } });
    if (!res.ok) throw new Error(`MCP capability discovery: GET ${url.href} answered ${res.status} ${(await res.text()).slice(0, 200)}`);
    const body = (await res.json()) as { capabilities?: unknown; next_cursor?: unknown };
    if (!Array.isArray(body.capabilities)) throw new Error(`MCP capability discovery: GET ${url.href} answered no "capabilities" array`);
    all.push(...(body.capabilities as McpCapability[]));
    if (typeof body.next_cursor !== 'string' || body.next_cursor === '' || body.next_cursor === cursor) return all;
    cursor = body.next_cursor;
  }
  throw new Error(`MCP capability discovery: ${origin}/capability/list gave more than ${MAX_PAGES} pages`);
}

/** The POST's body bytes, or undefined when it is a kind this fetch cannot read without consuming it (a stream). */
async function bodyBytes(input: string | URL | Request, init: RequestInit | undefined): Promise<Uint8Array | undefined> {
  let body: unknown = init?.body;
  if (body === undefined && input instanceof Request) body = await input.clone().arrayBuffer();
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  return undefined;
}

/** The JSON-RPC message, or undefined when the body is none the sidecar could read either (it refuses those itself). */
function parseMessage(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * What the sidecar checks the message as (src/mcp/message.ts readMessage).
 * A name no capability has becomes the aud itself: the sidecar reads the
 * message before the token and answers unknown_tool, which is what the
 * model should see, and the token is never spent.
 */
function audience(server: ServerIndex, session: string, message: unknown): string {
  // A batch is session traffic here; the sidecar refuses batches (batch_refused) before reading any token.
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return session;
  const { method, params } = message as { method?: unknown; params?: unknown };
  const p = (typeof params === 'object' && params !== null ? params : {}) as { name?: unknown; uri?: unknown };
  if (method === 'tools/call' && typeof p.name === 'string') {
    return p.name === PERMISSION_TOOL ? PERMISSION_TOOL : (server.tools.get(p.name) ?? p.name);
  }
  if (method === 'prompts/get' && typeof p.name === 'string') return server.prompts.get(p.name) ?? p.name;
  if (typeof method === 'string' && RESOURCE_METHODS.has(method) && typeof p.uri === 'string') {
    const uri = p.uri;
    return server.resources.find((r) => matchUriTemplate(r.template, uri) !== undefined)?.capability ?? uri;
  }
  return session;
}
