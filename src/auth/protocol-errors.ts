/**
 * Refusals in the Agent Auth Protocol's words (`tokenProfile: agent-auth-v1`):
 * the body its clients read, `{error, message, ...}`, with the protocol's code
 * for each sidecar code that has one, and violations in the protocol's shape
 * (`{field, constraint: {op: value}, actual}`). The sidecar's own code stays in
 * `agents_chain_code`; audit and metrics keep the sidecar's codes. Pure.
 */
import { denialBody, type ConstraintViolation, type Denial, type DenialCode } from '../errors.js';

/** The sidecar codes the protocol names differently. Any other code is answered as it is. */
const PROTOCOL_CODES: Partial<Record<DenialCode, string>> = {
  token_missing: 'unauthorized',
  token_invalid: 'invalid_jwt',
  token_expired: 'invalid_jwt',
  token_replayed: 'jti_replay',
  capability_denied: 'capability_not_granted',
  unknown_route: 'capability_not_found',
  invalid_body: 'invalid_request',
  invalid_query: 'invalid_request',
  invalid_path: 'invalid_request',
  invalid_header: 'invalid_request',
  unsupported_media_type: 'invalid_request',
  too_many_query_parameters: 'invalid_request',
  too_many_streams: 'rate_limited',
  access_request_limit: 'rate_limited',
  replay_store_unavailable: 'internal_error',
  internal_error: 'internal_error',
  upstream_unavailable: 'internal_error',
};

/** Seconds a rate-limited caller is told to wait, where the sidecar set no Retry-After of its own. */
export const RATE_LIMIT_RETRY_SECONDS = 5;

export interface ProtocolViolation {
  field: string;
  constraint: Record<string, unknown>;
  actual?: unknown;
  message: string;
}

/** The protocol's code for a sidecar code. */
export function protocolCode(code: DenialCode): string {
  return PROTOCOL_CODES[code] ?? code;
}

/** A violation as the protocol writes it: the operator (exact as eq) and its value under `constraint`. */
export function protocolViolation(v: ConstraintViolation): ProtocolViolation {
  const op = v.constraint === 'exact' ? 'eq' : v.constraint;
  return { field: v.field, constraint: { [op]: v.expected }, ...(v.absent ? {} : { actual: v.actual }), message: v.message };
}

/** The body, and the headers a protocol client expects (Retry-After on rate_limited). */
export function presentProtocolDenial(denial: Denial): { body: Record<string, unknown>; headers?: Record<string, string> } {
  const { error, violations, ...rest } = denialBody(denial);
  const code = protocolCode(error);
  const body: Record<string, unknown> = { error: code, ...rest, agents_chain_code: error };
  if (violations) body.violations = violations.map(protocolViolation);
  const headers = code === 'rate_limited' && !denial.extra?.headers?.['retry-after'] ? { 'retry-after': String(RATE_LIMIT_RETRY_SECONDS) } : undefined;
  return headers ? { body, headers } : { body };
}
