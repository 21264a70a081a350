import { denialEnvelope, successEnvelope, type ConstraintAwareResult, type PermissionGrant } from '../context/envelope.js';
import { denialBody, statusOf, type Denial } from '../errors.js';
import type { Capability, Constraints, Policy, Route } from '../policy/types.js';

/**
 * How a refusal looks to the agent: the plain error body, or in
 * constraint-aware mode the ConstraintAwareResult envelope for every denial
 * on a capability route. Pure: status and JSON only.
 */
export function presentDenial(
  policy: Policy,
  route: Route | undefined,
  activeConstraints: Constraints | undefined,
  denial: Denial,
  /** For the sidecar's own endpoints, the capability the call was about (request_permission). */
  about?: Capability,
): { status: number; body: unknown } {
  const status = statusOf(denial.code);
  const capability = route?.kind === 'capability' ? route.capability : about;
  if (!policy.context.constraintAware || !capability) {
    const body = denialBody(denial);
    // The seed calls them structuredViolations; both names carry the same list.
    return { status, body: denial.violations ? { ...body, structuredViolations: denial.violations } : body };
  }
  const envelope = denialEnvelope(denial, {
    capability: capability.name,
    activeConstraints: activeConstraints && Object.keys(activeConstraints).length ? activeConstraints : undefined,
    requestPermission: policy.accessRequests !== undefined,
  });
  return { status: denial.code === 'constraint_violated' ? policy.context.violationStatus : status, body: envelope };
}

/** `envelope: all`: a successful JSON answer wrapped, the app's body as `result`. */
export function presentSuccess(
  policy: Policy,
  capability: string,
  activeConstraints: Constraints | undefined,
  result: unknown,
  grant?: PermissionGrant,
): ConstraintAwareResult {
  return successEnvelope(result, {
    capability,
    activeConstraints: activeConstraints && Object.keys(activeConstraints).length ? activeConstraints : undefined,
    requestPermission: policy.accessRequests !== undefined,
  }, grant);
}
