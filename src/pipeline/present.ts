import { denialEnvelope, successEnvelope, type ConstraintAwareResult, type PermissionGrant } from '../context/envelope.js';
import { presentProtocolDenial } from '../auth/protocol-errors.js';
import { denialBody, statusOf, type Denial, type GuidanceContext } from '../errors.js';
import type { Constraints, Policy } from '../policy/types.js';
import type { PresentedDenial } from '../http/respond.js';

/**
 * How a refusal looks to the agent: the plain error body, or in
 * constraint-aware mode the ConstraintAwareResult envelope for every denial
 * about a capability (a capability route's, or the one a request_permission
 * call named). Pure: status and JSON only.
 */
export function presentDenial(policy: Policy, capability: string | undefined, activeConstraints: Constraints | undefined, denial: Denial): PresentedDenial {
  const status = statusOf(denial.code);
  if (policy.provider.tokenProfile === 'agent-auth-v1') {
    // The protocol's body; in constraint-aware mode the envelope rides along as one member.
    const { body, headers } = presentProtocolDenial(denial);
    const aware = policy.context.constraintAware && capability !== undefined;
    if (aware) body.envelope = envelopeFor(policy, capability, activeConstraints, denial);
    const shown = aware && denial.code === 'constraint_violated' ? policy.context.violationStatus : status;
    return { status: shown, body, ...(headers ? { headers } : {}) };
  }
  if (!policy.context.constraintAware || !capability) {
    const body = denialBody(denial);
    // The context-awareness guide calls them structuredViolations; both names carry the same list.
    return { status, body: denial.violations ? { ...body, structuredViolations: denial.violations } : body };
  }
  const envelope = envelopeFor(policy, capability, activeConstraints, denial);
  return { status: denial.code === 'constraint_violated' ? policy.context.violationStatus : status, body: envelope };
}

function envelopeFor(policy: Policy, capability: string, activeConstraints: Constraints | undefined, denial: Denial) {
  return denialEnvelope(denial, guidanceContext(policy, capability, activeConstraints));
}

/** What the envelope's guidance may say: the capability, its limits, request_permission, and the aud tokens carry here. */
function guidanceContext(policy: Policy, capability: string, activeConstraints: Constraints | undefined): GuidanceContext {
  return {
    capability,
    activeConstraints: activeConstraints && Object.keys(activeConstraints).length ? activeConstraints : undefined,
    requestPermission: policy.accessRequests !== undefined,
    ...(policy.provider.tokenProfile === 'agent-auth-v1' ? { serviceAudience: policy.provider.issuer } : {}),
  };
}

/** `envelope: all`: a successful JSON answer wrapped, the app's body as `result`. */
export function presentSuccess(
  policy: Policy,
  capability: string,
  activeConstraints: Constraints | undefined,
  result: unknown,
  grant?: PermissionGrant,
): ConstraintAwareResult {
  return successEnvelope(result, guidanceContext(policy, capability, activeConstraints), grant);
}
