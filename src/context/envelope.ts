import { guidanceFor as guidanceOf, type Denial, type DenialCode, type ConstraintViolation, type GuidanceContext } from '../errors.js';
import type { Constraints } from '../policy/types.js';

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

/** The capability, its limits, and whether POST /agent/request-permission is served. */
export type EnvelopeContext = GuidanceContext;

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

/** Plain, actionable next steps for a model, per denial code (the catalogue in errors.ts holds them). */
export function guidanceFor(denial: Denial, ctx: EnvelopeContext): string {
  return guidanceOf(denial, ctx);
}
