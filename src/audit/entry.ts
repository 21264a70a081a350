import { randomBytes } from 'node:crypto';

/** One audited decision: a call (success, denied, error) or an approval event. The audit fields of the agents-chain spec (../shared/seeds/002_9af9aaa6cc5deb37.txt) plus HTTP ones. */
export interface AuditEntry {
  id: string;
  agentId: string | null;
  agentName: string | null;
  capability: string | null;
  /** Redacted arguments. */
  args: unknown;
  result: 'success' | 'denied' | 'error';
  denialReason?: string;
  jti: string | null;
  /** Unix ms. */
  timestamp: number;
  durationMs: number;
  method: string;
  path: string;
  status: number;
  upstreamStatus?: number;
  /** Response body bytes relayed (for a stream, counted when it ended). */
  responseBytes?: number;
  requestId: string;
  /** The request it came as, when that is not the one recorded (`/capability/execute`). */
  via?: string;
  permission?: 'not_required' | 'approved' | 'constraint_violated' | 'denied' | 'expired';
  /** For approval events: what happened (created, approved, denied, expired, wrong_code). */
  event?: string;
}

/**
 * An entry's JSON without `args` and without its closing brace (`{"id":...`),
 * so that the sealer can write args after it. Built field by field (this runs
 * on every call, and JSON.stringify of the whole object cost more);
 * always ASCII: any other character is written as a \u escape. (`result` and
 * `permission` are the sidecar's own words, written as they are.)
 * `JSON.parse(entryHead(e) + '}')` equals `e` without its args.
 */
export function entryHead(e: AuditEntry): string {
  let out = `{"id":${str(e.id)},"agentId":${str(e.agentId)},"agentName":${str(e.agentName)},"capability":${str(e.capability)},"result":"${e.result}"`;
  if (e.denialReason !== undefined) out += `,"denialReason":${str(e.denialReason)}`;
  out += `,"jti":${str(e.jti)},"timestamp":${num(e.timestamp)},"durationMs":${num(e.durationMs)},"method":${str(e.method)},"path":${str(e.path)},"status":${num(e.status)}`;
  if (e.upstreamStatus !== undefined) out += `,"upstreamStatus":${num(e.upstreamStatus)}`;
  if (e.responseBytes !== undefined) out += `,"responseBytes":${num(e.responseBytes)}`;
  out += `,"requestId":${str(e.requestId)}`;
  if (e.via !== undefined) out += `,"via":${str(e.via)}`;
  if (e.permission !== undefined) out += `,"permission":"${e.permission}"`;
  if (e.event !== undefined) out += `,"event":${str(e.event)}`;
  return out;
}

/** Printable ASCII other than quote and backslash: a JSON string as it stands. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** A missing value (null, or undefined in an entry read back from a store) is written as null. */
function str(v: string | null | undefined): string {
  if (v === null || v === undefined) return 'null';
  return PLAIN.test(v) ? `"${v}"` : asciiJson(v);
}

function num(n: number): string {
  return Number.isFinite(n) ? String(n) : 'null';
}

/** JSON.stringify, with every non-ASCII character escaped (the same value, in ASCII). */
export function asciiJson(value: unknown): string {
  return (JSON.stringify(value) ?? 'null').replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * Entry ids are RFC 9562 UUIDv8: 74 random bits drawn when the process starts,
 * then a 48-bit counter. Unique across pods and restarts for any practical
 * number of processes, at the cost of a counter increment instead of 16
 * random bytes per call.
 */
let idPrefix = '';
let idCounter = 0;
export function newEntryId(): string {
  if (idPrefix === '' || idCounter >= 2 ** 48) {
    const r = randomBytes(10).toString('hex'); // 80 bits, 74 kept
    const variant = (8 | (parseInt(r[15]!, 16) & 3)).toString(16);
    idPrefix = `${r.slice(0, 8)}-${r.slice(8, 12)}-8${r.slice(12, 15)}-${variant}${r.slice(16, 19)}-`;
    idCounter = 0;
  }
  return idPrefix + (idCounter++).toString(16).padStart(12, '0');
}
