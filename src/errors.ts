import type { Constraints } from './policy/types.js';
import { describeRule } from './context/describe.js';

/**
 * The denial catalogue: every code the sidecar answers with, on the agent
 * port, the admin listener and the raw socket, and what each means. Codes are
 * stable API (clients, dashboards and alerts key on them); the HTTP status,
 * the audit outcome and the guidance a model reads live here and nowhere else.
 * `satisfies` makes the compiler check every entry has every fact.
 */
export interface DenialFacts {
  readonly status: number;
  /** In the audit trail and metrics: `denied` (the caller's fault or the policy's no), `error` (the sidecar or a dependency failed). */
  readonly outcome: 'denied' | 'error';
  /** Where the code is answered: `call` (agent port, counted per capability), `admin` (the admin listener), `socket` (before HTTP parsing finished). */
  readonly where: 'call' | 'admin' | 'socket';
  /** Plain, actionable next steps for a model (constraint-aware envelope). */
  readonly guidance: Guidance;
}

/** What the guidance may mention: the capability, its limits, whether request_permission is served. */
export interface GuidanceContext {
  capability: string;
  activeConstraints?: Constraints;
  requestPermission: boolean;
  /** The call was an MCP tool call (this tool name): guidance speaks of tools, not HTTP endpoints. */
  mcpTool?: string;
  /** The `aud` this service's tokens carry when it is not the capability (agent-auth-v1: the issuer). */
  serviceAudience?: string;
}

/** The aud a token for `capability` (or a sidecar endpoint's `audience`) carries here. */
function audFor(ctx: GuidanceContext, audience: string): string {
  return ctx.serviceAudience ?? audience;
}

type Guidance = (denial: Denial, ctx: GuidanceContext) => string;

const malformed: Guidance = (d) => `The request was malformed: ${d.message}. Fix it and retry with a new token.`;
const unverified: Guidance = (d, ctx) =>
  `The sidecar could not verify who you are (${d.message}). Send "Authorization: Bearer <agent+jwt>" signed with your registered key, with aud "${audFor(ctx, ctx.capability)}".`;
const unavailable: Guidance = (d) => `The service could not handle the call right now (${d.message}). Retry later with a new token.`;
const asSaid: Guidance = (d) => d.message;

const call = (status: number, guidance: Guidance = asSaid, outcome: DenialFacts['outcome'] = 'denied') =>
  ({ status, outcome, where: 'call', guidance }) as const;
const failure = (status: number, guidance: Guidance = unavailable) => call(status, guidance, 'error');
const admin = (status: number) => ({ status, outcome: 'denied', where: 'admin', guidance: asSaid }) as const;
const socket = (status: number) => ({ status, outcome: 'denied', where: 'socket', guidance: malformed }) as const;

export const DENIALS = {
  // request shape
  invalid_path: call(400, malformed),
  invalid_query: call(400, malformed),
  invalid_header: call(400, malformed),
  invalid_body: call(400, malformed),
  /** More query pairs than --max-query-params: some parsers stop reading early (Node's querystring and qs at 1000). */
  too_many_query_parameters: call(400, malformed),
  body_too_large: call(413, malformed),
  /** More request headers than --max-headers (or a header block over Node's size limit, on the socket). */
  too_many_headers: call(431, malformed),
  unsupported_media_type: call(415, malformed),
  unknown_route: call(404),
  // MCP messages (the mcp: section)
  /** A tool, prompt or resource the policy does not declare for this MCP server. */
  unknown_tool: call(404, (d) => `${d.message}. Call only the tools tools/list shows you.`),
  /** A JSON-RPC batch (an array): removed from MCP in 2025-06-18, refused whole. */
  batch_refused: call(400, malformed),
  /** A JSON-RPC method the sidecar cannot classify (it might run something unchecked). */
  unknown_mcp_method: call(400),
  /** An agent holds as many MCP server streams (GET) open as it may (each holds a connection to the server). */
  too_many_streams: call(429, (d) => `${d.message}. Close a stream you no longer read, then retry.`),
  /** An Mcp-Session-Id this sidecar did not see the calling agent open (another agent's, ended, or from before a restart). */
  session_not_found: call(
    404,
    () => 'Your MCP session is not known here (it ended, expired, or was opened by someone else). Start a new session with initialize.',
  ),
  // token (the verification table of ../shared/seeds/002_9af9aaa6cc5deb37.txt)
  token_missing: call(401, unverified),
  token_invalid: call(401, unverified),
  agent_not_found: call(401, unverified),
  /** agent-auth-v1 only: the agent a host registered was revoked (told only to a caller whose token its key verifies). */
  agent_revoked: call(403, () => 'This agent has been revoked by its host. Register a new agent to continue.'),
  token_expired: call(401, () => 'Your token has expired. Mint a fresh token for every call (lifetime at most 60 seconds) and retry.'),
  /** The token names another request (htm, htu or ath): it was minted for a different method, URI or body. */
  request_binding_mismatch: call(401, (d) => `${d.message}. Mint a token bound to this exact request (method, URL, body) and retry.`),
  token_replayed: call(401, () => 'Each token is single-use. Mint a new token (a new jti) for this call and retry.'),
  /** The shared replay store lost its data: tokens issued before the loss was detected are refused for one window. */
  replay_window_reset: call(
    401,
    () =>
      'The service lost its record of recently used tokens, so tokens issued before that moment (or within 30 seconds after it) are refused for up to two minutes. Wait a few seconds, mint a new token (new jti, current iat) and retry; new tokens pass again about 30 seconds after the loss was found.',
  ),
  capability_denied: call(
    403,
    (d, ctx) => `You may not call ${ctx.capability}: ${d.message}. Retrying will not help; an operator must grant you this capability.`,
  ),
  constraint_violated: call(403, violationGuidance),
  /** Requested constraints with an operator the sidecar does not know (the Agent Auth Protocol's 400; `operators` lists them). */
  unknown_constraint_operator: call(400),
  // registration (host tokens)
  host_not_found: call(401),
  agent_limit_reached: call(403),
  /** A public key that is not a safe Ed25519 key (small order, non-canonical, malformed). */
  invalid_agent_key: call(400),
  /** A registration without a valid proof that the caller holds the agent's private key. */
  proof_invalid: call(401),
  /** POST /agent/rotate-key for an agent the policy lists: its key is changed in the policy, not by a host. */
  key_managed_by_policy: call(409),
  // request_permission
  not_found: call(404),
  approval_not_needed: call(409, (_d, ctx) =>
    ctx.mcpTool !== undefined
      ? `This call is within your limits: call the tool directly.`
      : `This call is within your limits: call ${ctx.capability} directly, with a token whose aud is "${audFor(ctx, ctx.capability)}".`,
  ),
  access_request_limit: call(503, () => 'Too many approval requests are waiting for a human right now. Retry later, or fit the call to your limits.'),
  /** The sidecar is shutting down while a caller waits for a human: the request stays pending at its status URL. */
  shutting_down: failure(503),
  // dependencies
  /** More calls in flight than --max-in-flight: refused at once with Retry-After rather than queued. */
  overloaded: failure(503, () => 'The service is handling as many calls as it can. Wait for the Retry-After seconds, then retry with a new token.'),
  replay_store_unavailable: failure(503),
  audit_unavailable: failure(503, asSaid),
  upstream_unavailable: failure(502),
  internal_error: failure(500),
  /** Never sent: the client hung up mid-request (nginx's 499); recorded in the audit trail. */
  client_closed_request: failure(499, asSaid),
  // the admin listener
  admin_disabled: admin(403),
  unauthorized: admin(401),
  already_resolved: admin(409),
  invalid_code: admin(403),
  too_many_attempts: admin(429),
  invalid_scope: admin(400),
  // the socket, before a request was parsed
  request_timeout: socket(408),
  invalid_request: socket(400),
} as const satisfies Record<string, DenialFacts>;

export type DenialCode = keyof typeof DENIALS;
/** The codes answered on the agent port (what metrics label denials with). */
export type CallDenialCode = { [C in DenialCode]: (typeof DENIALS)[C]['where'] extends 'call' ? C : never }[DenialCode];

/** HTTP status per code answered on the agent port (kept for the package's users; DENIALS has every fact). */
export const DENIAL_STATUS = Object.fromEntries(
  Object.entries(DENIALS)
    .filter(([, f]) => f.where === 'call')
    .map(([code, f]) => [code, f.status]),
) as Readonly<Record<CallDenialCode, number>>;

export interface ConstraintViolation {
  field: string;
  constraint: 'max' | 'min' | 'in' | 'not_in' | 'exact';
  expected: unknown;
  actual: unknown;
  message: string;
  /** The call did not contain the field at all (`actual` is then null): never the same as a JSON null. */
  absent?: true;
}

/** A typed refusal: what a pipeline stage or an endpoint returns instead of continuing. */
export interface Denial {
  readonly denied: true;
  readonly code: DenialCode;
  readonly message: string;
  readonly violations?: ConstraintViolation[];
  /** The registered agent the token names (`sub`), when the denial came after step 3; unproven before step 6. */
  readonly agentId?: string;
  /** For the sidecar's own endpoints: the capability the refused call was about (request_permission), for the envelope. */
  readonly capability?: string;
  /** Extra members of the JSON body (a pending request's status URL), and extra response headers. */
  readonly extra?: { readonly body?: Readonly<Record<string, unknown>>; readonly headers?: Readonly<Record<string, string>> };
}

export function deny(code: DenialCode, message: string, violations?: ConstraintViolation[]): Denial {
  return violations ? { denied: true, code, message, violations } : { denied: true, code, message };
}

export function isDenial(v: unknown): v is Denial {
  return typeof v === 'object' && v !== null && (v as Denial).denied === true;
}

export function statusOf(code: DenialCode): number {
  return DENIALS[code].status;
}

/** `error` for a sidecar or dependency failure, `denied` for any other refusal. */
export function outcomeOf(code: DenialCode): DenialFacts['outcome'] {
  return DENIALS[code].outcome;
}

/** The plain JSON body of a denial (outside constraint-aware mode). */
export function denialBody(d: Denial): { error: DenialCode; message: string; violations?: ConstraintViolation[] } {
  const body = d.violations ? { error: d.code, message: d.message, violations: d.violations } : { error: d.code, message: d.message };
  return d.extra?.body ? { ...body, ...d.extra.body } : body;
}

export function guidanceFor(denial: Denial, ctx: GuidanceContext): string {
  return DENIALS[denial.code].guidance(denial, ctx);
}

export function violationDenial(violations: ConstraintViolation[]): Denial {
  const fields = [...new Set(violations.map((v) => v.field))].join(', ');
  return deny('constraint_violated', `arguments violate the grant's constraints (${fields})`, violations);
}

function violationGuidance(denial: Denial, ctx: GuidanceContext): string {
  const cap = ctx.capability;
  const lines = [`The call to ${cap} was refused because its arguments are outside your limits:`];
  for (const v of denial.violations ?? []) lines.push(`- ${v.message}.`);
  const allowed = Object.entries(ctx.activeConstraints ?? {}).map(([f, r]) => `${f} ${describeRule(r)}`);
  if (allowed.length) lines.push(`Allowed: ${allowed.join('; ')}.`);
  if (ctx.mcpTool !== undefined) {
    lines.push(
      ctx.requestPermission
        ? `If the user really needs these values, ask a human: call the tool "request_permission" with {"tool": "${ctx.mcpTool}", "arguments": <the same arguments>, "reason": "<why>"}. Otherwise change the arguments to fit the limits and call the tool again.`
        : 'Change the arguments to fit these limits and call the tool again. Approval requests are not available for this service.',
    );
    return lines.join('\n');
  }
  lines.push(
    ctx.requestPermission
      ? `If the user really needs these values, ask a human: POST /agent/request-permission with a token whose aud is "${audFor(ctx, 'request_permission')}" and the body {"capability": "${cap}", "args": <the same arguments>, "reason": "<why>"}. Otherwise change the arguments to fit the limits and call again with a new token.`
      : 'Change the arguments to fit these limits and call again with a new token. Approval requests are not available for this service.',
  );
  return lines.join('\n');
}
