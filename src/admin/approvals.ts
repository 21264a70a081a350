import type { ApprovalService } from '../approvals/service.js';
import type { AccessRequest, ValueApproval } from '../approvals/types.js';
import { redactForReview } from '../audit/redact.js';
import { isDenial, type Denial } from '../errors.js';
import { jsonReply, type Reply } from '../http/respond.js';

/** What operators see of a request: never the code hash; args with secrets redacted, and which ones (`redacted`). */
export function requestView(r: AccessRequest): Record<string, unknown> {
  const shown = redactForReview(r.args);
  return {
    id: r.id,
    state: r.state,
    agentId: r.agentId,
    agentName: r.agentName,
    capability: r.capability,
    method: r.method,
    path: r.target,
    args: shown.value,
    redacted: shown.redacted,
    reason: r.reason,
    violations: r.violations,
    createdAt: new Date(r.createdAt).toISOString(),
    expiresAt: new Date(r.expiresAt).toISOString(),
    notified: r.notified,
    scope: r.scope,
    denyReason: r.denyReason,
    resolvedAt: r.resolvedAt === undefined ? undefined : new Date(r.resolvedAt).toISOString(),
    resultStatus: r.outcome?.status,
  };
}

/** A value approval as operators see it: times in RFC 3339, like every other admin answer. */
export function valueApprovalView(a: ValueApproval): Record<string, unknown> {
  return { ...a, createdAt: new Date(a.createdAt).toISOString(), expiresAt: new Date(a.expiresAt).toISOString() };
}

/** POST /approvals/{id}/approve|deny|code with {code, scope?, reason?}. */
export async function resolveRequest(
  approvals: ApprovalService,
  id: string,
  action: 'approve' | 'deny' | 'code',
  body: Record<string, unknown>,
): Promise<Reply | Denial> {
  switch (action) {
    case 'approve': {
      const r = await approvals.approve(id, body.code, body.scope ?? 'once');
      return isDenial(r) ? r : jsonReply(200, requestView(r));
    }
    case 'deny': {
      const r = await approvals.deny(id, body.code, body.reason);
      return isDenial(r) ? r : jsonReply(200, requestView(r));
    }
    case 'code': {
      const r = await approvals.reissueCode(id);
      return isDenial(r) ? r : jsonReply(200, { ...requestView(r.request), code: r.code });
    }
  }
}
