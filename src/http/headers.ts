import { CREDENTIAL_HEADERS } from '../egress/presets.js';
import { familyNames, forwardableName, inDroppedFamily } from './header-families.js';

/**
 * Header hygiene between caller, sidecar and app. Identity reaches the app
 * only through headers the sidecar itself sets; anything a caller could use
 * to impersonate an agent, re-route, or change the method is dropped (the
 * families are data, in header-families.ts).
 */
const HOP_BY_HOP = new Set(familyNames('hop-by-hop'));
/** End-to-end headers a caller may not remove by naming them in Connection. */
const NOT_DROPPABLE = new Set(['host', 'content-type', 'content-length', 'content-encoding', 'authorization', 'x-request-id']);

/**
 * Caller headers accepted by default. Apache httpd, gunicorn and Python's
 * http.client refuse more than 100 header lines; the sidecar adds at most 8
 * of its own (request id, identity, client address, length, the pool's
 * Connection, Agent-Permission), so 90 keeps what it forwards under theirs.
 */
export const DEFAULT_MAX_HEADERS = 90;

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
 * Builds the upstream request's header list (flat name/value pairs). The
 * sidecar's own headers come first, so an app that reads only its first N
 * headers (Node's maxHeadersCount) still sees them; the caller's follow in
 * order. `bodyLength` is set when the body was buffered; a streamed body
 * keeps the caller's Content-Length.
 */
export function upstreamRequestHeaders(
  raw: readonly string[],
  opts: {
    tokenHeader?: string;
    identity?: Identity;
    requestId: string;
    bodyLength?: number;
    /** Egress: the provider key to set; every key header the agent's SDK sent, and its Host, are dropped. */
    credential?: [name: string, value: string];
    /** Egress pass-through: only the Host is dropped (the provider's own is used); the caller's headers go as sent. */
    dropHost?: boolean;
    /** The caller's address as the sidecar's socket saw it, sent as X-Forwarded-For (ingress only). */
    clientAddress?: string;
  },
): string[] {
  const listed = connectionListed(raw);
  const credential = opts.credential;
  const token = opts.tokenHeader?.toLowerCase();
  const out: string[] = ['x-request-id', opts.requestId];
  if (opts.identity) {
    out.push('x-agent-id', opts.identity.agentId, 'x-agent-name', opts.identity.agentName, 'x-agent-capability', opts.identity.capability);
  }
  if (opts.clientAddress) out.push('x-forwarded-for', plainAddress(opts.clientAddress));
  if (credential) out.push(credential[0], credential[1]);
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // CGI-style servers read "X_Agent_Id" and "X-Agent.Id" as X-Agent-Id: like Apache httpd, only [A-Za-z0-9-] names pass.
    if (!forwardableName(name)) continue;
    const lower = name.toLowerCase();
    if (inDroppedFamily(lower) || listed.has(lower) || lower === token) continue;
    if (credential && (lower === 'host' || CREDENTIAL_HEADERS.includes(lower) || lower === credential[0].toLowerCase())) continue;
    if (opts.dropHost && lower === 'host') continue;
    if (lower === 'content-length' && opts.bodyLength !== undefined) continue;
    out.push(name, raw[i + 1]!);
  }
  if (opts.bodyLength !== undefined && opts.bodyLength > 0) out.push('content-length', String(opts.bodyLength));
  return out;
}

/** "::ffff:10.1.2.3" (an IPv4 peer on a dual-stack socket) is 10.1.2.3. */
function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

/** More caller headers than `max` are refused, not truncated (an app with a count limit drops the tail silently). */
export function tooManyHeaders(raw: readonly string[], max: number): boolean {
  return raw.length / 2 > max;
}

/**
 * Response headers that would send the agent around the sidecar: Alt-Svc advertises another endpoint
 * (HTTP/3 over UDP, which capture does not redirect) straight to the app.
 */
const AROUND_THE_SIDECAR = new Set(['alt-svc']);

/** Drops hop-by-hop headers, and those that point the client around the sidecar, from the app's response. */
export function downstreamResponseHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const listed = new Set<string>();
  const conn = headers.connection;
  for (const v of Array.isArray(conn) ? conn : conn ? [conn] : []) {
    for (const t of v.split(',')) listed.add(t.trim().toLowerCase());
  }
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || AROUND_THE_SIDECAR.has(name) || listed.has(name)) continue;
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
