import type { AccessRequest } from '../approvals/types.js';
import { denialEnvelope, type ConstraintAwareResult } from '../context/envelope.js';
import { violationDenial } from '../errors.js';
import type { Reply } from '../http/respond.js';
import { grantKey, type Policy } from '../policy/types.js';
import { presentSuccess } from '../pipeline/present.js';

export function statusUrl(r: AccessRequest): string {
  return `/agent/request-permission/${r.id}`;
}

export function pendingBody(r: AccessRequest): Record<string, unknown> {
  return { requestId: r.id, status: 'pending', statusUrl: statusUrl(r), expiresAt: new Date(r.expiresAt).toISOString() };
}

/** The agent's view of its access request (`grants`: the agent's, for the limits shown): pending (202), approved and run (200, the result), denied or expired (403). */
export function accessRequestReply(policy: Policy, r: AccessRequest, grants: Policy['grants']): Reply {
  const headers = r.state === 'approved' && r.outcome ? { 'agent-permission': 'approved' } : undefined;
  const { status, body } = outcome(policy, r, grants);
  return headers ? { status, json: body, headers } : { status, json: body };
}

function outcome(policy: Policy, r: AccessRequest, grants: Policy['grants']): { status: number; body: unknown } {
  if (r.state === 'pending' || (r.state === 'approved' && !r.outcome)) return { status: 202, body: pendingBody(r) };
  if (r.state === 'approved' && r.outcome) {
    const resolvedAt = r.resolvedAt ?? r.createdAt;
    const valueTtl = policy.accessRequests?.valueApprovalTtlMs ?? 0;
    const grant = {
      requestId: r.id,
      scope: r.scope ?? 'once',
      approvedAt: new Date(resolvedAt).toISOString(),
      ...(r.scope === 'value'
        ? { expiresAt: new Date(resolvedAt + valueTtl).toISOString(), values: Object.fromEntries(r.violations.map((v) => [v.field, v.actual])) }
        : {}),
    } as const;
    const body: ConstraintAwareResult & { resultStatus: number } = {
      ...presentSuccess(policy, r.capability, undefined, r.outcome.body, grant),
      success: r.outcome.status < 400,
      resultStatus: r.outcome.status,
    };
    return { status: 200, body };
  }
  const constraints = grants.get(grantKey(r.agentId, r.capability))?.constraints;
  const ctx = {
    capability: r.capability,
    activeConstraints: constraints && Object.keys(constraints).length ? constraints : undefined,
    requestPermission: true,
  };
  // A human's answer (or silence) is not an error code: `error` stays for machine refusals.
  const { error: _code, ...base } = denialEnvelope(violationDenial(r.violations), ctx);
  const expired = r.state === 'expired';
  return {
    status: 403,
    body: {
      ...base,
      permission: expired ? 'expired' : 'denied',
      reason: expired ? 'no human answered before the request expired' : r.denyReason,
      guidance: expired
        ? `No human answered your request to call ${r.capability} in time. Do not assume approval: adjust the arguments to fit your limits, or ask again later with a clearer reason.`
        : `A human denied your request to call ${r.capability}${r.denyReason ? `: "${r.denyReason}"` : ''}. Do not retry the same call; adjust the arguments to fit your limits or tell the user it was refused.`,
    },
  };
}
