/**
 * Every denial the sidecar can answer with. Codes are stable API: clients,
 * dashboards and alerts key on them. The HTTP status of each lives here and
 * nowhere else.
 */
export const DENIAL_STATUS = {
  // request shape
  invalid_path: 400,
  invalid_query: 400,
  invalid_header: 400,
  invalid_body: 400,
  /** More query pairs than --max-query-params: some parsers stop reading early (Node's querystring and qs at 1000). */
  too_many_query_parameters: 400,
  body_too_large: 413,
  /** More request headers than --max-headers: an app with a header-count limit would not see them all. */
  too_many_headers: 431,
  unsupported_media_type: 415,
  unknown_route: 404,
  // token (the seed's verification table)
  token_missing: 401,
  token_invalid: 401,
  agent_not_found: 401,
  token_expired: 401,
  token_replayed: 401,
  /** The shared replay store lost its data: tokens issued before the loss was detected are refused for one window. */
  replay_window_reset: 401,
  capability_denied: 403,
  constraint_violated: 403,
  // registration (host tokens)
  host_not_found: 401,
  agent_limit_reached: 403,
  /** A public key that is not a safe Ed25519 key (small order, non-canonical, malformed). */
  invalid_agent_key: 400,
  /** A registration without a valid proof that the caller holds the agent's private key. */
  proof_invalid: 401,
  // request_permission
  not_found: 404,
  approval_not_needed: 409,
  access_request_limit: 503,
  // dependencies
  replay_store_unavailable: 503,
  audit_unavailable: 503,
  upstream_unavailable: 502,
  internal_error: 500,
  // never sent: the client hung up mid-request (nginx's 499); recorded in the audit trail
  client_closed_request: 499,
} as const satisfies Record<string, number>;

export type DenialCode = keyof typeof DENIAL_STATUS;

export interface ConstraintViolation {
  field: string;
  constraint: 'max' | 'min' | 'in' | 'not_in' | 'exact';
  expected: unknown;
  actual: unknown;
  message: string;
  /** The call did not contain the field at all (`actual` is then null): never the same as a JSON null. */
  absent?: true;
}

/** A typed refusal: what a pipeline stage returns instead of continuing. */
export interface Denial {
  readonly denied: true;
  readonly code: DenialCode;
  readonly message: string;
  readonly violations?: ConstraintViolation[];
  /** The registered agent the token names (`sub`), when the denial came after step 3; unproven before step 6. */
  readonly agentId?: string;
}

export function deny(code: DenialCode, message: string, violations?: ConstraintViolation[]): Denial {
  return violations ? { denied: true, code, message, violations } : { denied: true, code, message };
}

export function isDenial(v: unknown): v is Denial {
  return typeof v === 'object' && v !== null && (v as Denial).denied === true;
}

export function statusOf(code: DenialCode): number {
  return DENIAL_STATUS[code];
}

/** The JSON body every denial is answered with. */
export function denialBody(d: Denial): { error: DenialCode; message: string; violations?: ConstraintViolation[] } {
  return d.violations ? { error: d.code, message: d.message, violations: d.violations } : { error: d.code, message: d.message };
}
