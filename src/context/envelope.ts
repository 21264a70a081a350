import type { Denial, DenialCode, ConstraintViolation } from '../errors.js';
import type { Constraints } from '../policy/types.js';
import { describeRule } from './describe.js';

/** The permission statuses of the context-awareness guide. */
export type PermissionStatus = 'not_required' | 'constraint_violated' | 'approved' | 'denied' | 'expired';

/** What a human granted through request_permission. */
export interface PermissionGrant {
  requestId: string;
  scope: 'once' | 'value';
  approvedAt: string;
  /** For scope=value: until when the approved values keep passing. */
  expiresAt?: string;
  /** For scope=value: the field values that now pass. */
  values?: Record<string, unknown>;
}

/** The ConstraintAwareResult envelope, as JSON. `error` carries the stable code of a denial. */
export interface ConstraintAwareResult {
  success: boolean;
  result?: unknown;
  permission: PermissionStatus;
  violations?: ConstraintViolation[];
  grant?: PermissionGrant;
  guidance: string;
  capability: string;
  activeConstraints?: Constraints;
  error?: DenialCode;
  /** For denied and expired requests: the human's reason, or why it ended. */
  reason?: string;
}

export interface EnvelopeContext {
  capability: string;
  activeConstraints?: Constraints;
  /** True when POST /agent/request-permission is served. */
  requestPermission: boolean;
}

export function denialEnvelope(denial: Denial, ctx: EnvelopeContext): ConstraintAwareResult {
  const violated = denial.code === 'constraint_violated';
  return {
    success: false,
    permission: violated ? 'constraint_violated' : 'denied',
    ...(denial.violations ? { violations: denial.violations } : {}),
    guidance: guidanceFor(denial, ctx),
    capability: ctx.capability,
    ...(ctx.activeConstraints ? { activeConstraints: ctx.activeConstraints } : {}),
    error: denial.code,
  };
}

export function successEnvelope(result: unknown, ctx: EnvelopeContext, grant?: PermissionGrant): ConstraintAwareResult {
  return {
    success: true,
    result,
    permission: grant ? 'approved' : 'not_required',
    ...(grant ? { grant } : {}),
    guidance: grant
      ? `A human approved this call to ${ctx.capability} (scope ${grant.scope}); it ran and its result is in "result".`
      : `The call to ${ctx.capability} was within your limits; its result is in "result".`,
    capability: ctx.capability,
    ...(ctx.activeConstraints ? { activeConstraints: ctx.activeConstraints } : {}),
  };
}

/** Plain, actionable next steps for a model, per denial code. */
export function guidanceFor(denial: Denial, ctx: EnvelopeContext): string {
  const cap = ctx.capability;
  switch (denial.code) {
    case 'constraint_violated': {
      const lines = [`The call to ${cap} was refused because its arguments are outside your limits:`];
      for (const v of denial.violations ?? []) lines.push(`- ${v.message}.`);
      const allowed = Object.entries(ctx.activeConstraints ?? {}).map(([f, r]) => `${f} ${describeRule(r)}`);
      if (allowed.length) lines.push(`Allowed: ${allowed.join('; ')}.`);
      lines.push(ctx.requestPermission
        ? `If the user really needs these values, ask a human: POST /agent/request-permission with a token whose aud is "request_permission" and the body {"capability": "${cap}", "args": <the same arguments>, "reason": "<why>"}. Otherwise change the arguments to fit the limits and call again with a new token.`
        : 'Change the arguments to fit these limits and call again with a new token. Approval requests are not available for this service.');
      return lines.join('\n');
    }
    case 'capability_denied':
      return `You may not call ${cap}: ${denial.message}. Retrying will not help; an operator must grant you this capability.`;
    case 'token_expired':
      return 'Your token has expired. Mint a fresh token for every call (lifetime at most 60 seconds) and retry.';
    case 'token_replayed':
      return 'Each token is single-use. Mint a new token (a new jti) for this call and retry.';
    case 'replay_window_reset':
      return 'The service lost its record of recently used tokens, so tokens issued before that moment (or within 30 seconds after it) are refused for up to two minutes. Wait a few seconds, mint a new token (new jti, current iat) and retry; new tokens pass again about 30 seconds after the loss was found.';
    case 'token_missing':
    case 'token_invalid':
    case 'agent_not_found':
      return `The sidecar could not verify who you are (${denial.message}). Send "Authorization: Bearer <agent+jwt>" signed with your registered key, with aud "${cap}".`;
    case 'invalid_body':
    case 'invalid_query':
    case 'invalid_header':
    case 'unsupported_media_type':
    case 'body_too_large':
    case 'too_many_query_parameters':
    case 'too_many_headers':
      return `The request was malformed: ${denial.message}. Fix it and retry with a new token.`;
    case 'approval_not_needed':
      return `This call is within your limits: call ${cap} directly, with a token whose aud is "${cap}".`;
    case 'access_request_limit':
      return 'Too many approval requests are waiting for a human right now. Retry later, or fit the call to your limits.';
    case 'upstream_unavailable':
    case 'replay_store_unavailable':
    case 'internal_error':
      return `The service could not handle the call right now (${denial.message}). Retry later with a new token.`;
    default:
      return denial.message;
  }
}
