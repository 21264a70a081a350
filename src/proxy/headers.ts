import { CREDENTIAL_HEADERS } from '../egress/presets.js';

/**
 * Header hygiene between caller, sidecar and app. Identity reaches the app
 * only through headers the sidecar itself sets; anything a caller could use
 * to impersonate an agent, re-route, or change the method is dropped.
 */
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization',
  'te', 'trailer', 'transfer-encoding', 'upgrade',
  // Node answers 100-continue itself; undici refuses to send Expect.
  'expect',
]);
/** End-to-end headers a caller may not remove by naming them in Connection. */
const NOT_DROPPABLE = new Set(['host', 'content-type', 'content-length', 'content-encoding', 'authorization', 'x-request-id']);
const METHOD_OVERRIDES = new Set(['x-http-method-override', 'x-http-method', 'x-method-override']);
const SIDECAR_OWNED = new Set(['forwarded', 'x-request-id', 'content-length']);

export interface Identity {
  agentId: string;
  agentName: string;
  capability: string;
}

function connectionListed(raw: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'connection') continue;
    for (const t of raw[i + 1]!.split(',')) {
      const name = t.trim().toLowerCase();
      if (name && !NOT_DROPPABLE.has(name) && !name.startsWith('x-agent-')) out.add(name);
    }
  }
  return out;
}

/**
 * Builds the upstream request's header list (flat name/value pairs, order
 * kept). `bodyLength` is set when the body was buffered; a streamed body keeps
 * the caller's Content-Length.
 */
export function upstreamRequestHeaders(
  raw: readonly string[],
  opts: {
    tokenHeader?: string; identity?: Identity; requestId: string; bodyLength?: number;
    /** Egress: the provider key to set; every key header the agent's SDK sent, and its Host, are dropped. */
    credential?: [name: string, value: string];
    /** Egress pass-through: only the Host is dropped (the provider's own is used); the caller's headers go as sent. */
    dropHost?: boolean;
  },
): string[] {
  const listed = connectionListed(raw);
  const credential = opts.credential;
  const token = opts.tokenHeader?.toLowerCase();
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    // CGI-style servers read "X_Agent_Id" as X-Agent-Id: like nginx, never forward names with "_".
    if (lower.includes('_')) continue;
    if (HOP_BY_HOP.has(lower) || listed.has(lower) || METHOD_OVERRIDES.has(lower)) continue;
    if (lower === token || lower.startsWith('x-agent-') || lower.startsWith('x-forwarded-')) continue;
    if (credential && (lower === 'host' || CREDENTIAL_HEADERS.includes(lower) || lower === credential[0].toLowerCase())) continue;
    if (opts.dropHost && lower === 'host') continue;
    if (SIDECAR_OWNED.has(lower) && !(lower === 'content-length' && opts.bodyLength === undefined)) continue;
    out.push(name, raw[i + 1]!);
  }
  if (opts.bodyLength !== undefined && opts.bodyLength > 0) out.push('content-length', String(opts.bodyLength));
  out.push('x-request-id', opts.requestId);
  if (credential) out.push(credential[0], credential[1]);
  if (opts.identity) {
    out.push('x-agent-id', opts.identity.agentId, 'x-agent-name', opts.identity.agentName, 'x-agent-capability', opts.identity.capability);
  }
  return out;
}

/** Drops hop-by-hop headers from the app's response. */
export function downstreamResponseHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const listed = new Set<string>();
  const conn = headers.connection;
  for (const v of Array.isArray(conn) ? conn : conn ? [conn] : []) {
    for (const t of v.split(',')) listed.add(t.trim().toLowerCase());
  }
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** Singleton headers that must not appear twice: a second copy would be read differently by sidecar and app. */
const SINGLETONS = ['host', 'content-type', 'content-length', 'content-encoding'];

export function repeatedSingleton(raw: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (!SINGLETONS.includes(lower)) continue;
    if (seen.has(lower)) return lower;
    seen.add(lower);
  }
  return undefined;
}
