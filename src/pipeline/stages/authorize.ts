import { violationDenial, isDenial, type Denial } from '../../errors.js';
import { activeGrants, judgeArguments } from '../authorize.js';
import type { Deps } from '../deps.js';
import { advance, type Authenticated, type Buffered, type CapabilityCall, type Checked, type Granted, type McpRead, type Variants } from '../phases.js';

/** The capabilities a call is: its route's, then (egress) each variant it also is. */
function capabilitiesOf(call: CapabilityCall & Partial<Variants>): [string, ...string[]] {
  return [call.route.capability.name, ...(call.alsoRequires ?? [])];
}

/** Step 9: an active, unexpired grant (before step 8: an agent without one never fills the replay window). */
export function checkGrant<P extends CapabilityCall & Authenticated & Partial<Variants>>(call: P, deps: Deps): (P & Granted) | Denial {
  const grants = activeGrants(call.verified.agent, capabilitiesOf(call), deps.policy, deps.now());
  return isDenial(grants) ? grants : advance(call, { grants });
}

/** Step 9b, under the grants step 9 found: every constrained argument read as the app will read it, every constraint evaluated, value approvals applied. */
export async function checkArguments<P extends CapabilityCall & Authenticated & Granted & Buffered & Partial<McpRead>>(
  call: P,
  deps: Deps,
): Promise<(P & Checked) | Denial> {
  const { req } = call;
  // An MCP message was read strictly already: its tool's arguments are what the constraints name.
  const parsed = call.mcp ? { value: call.mcp.arguments } : undefined;
  const args = { method: call.route.method, params: call.params, query: call.target.query, body: call.body, headers: req.headers, parsed };
  const authorization = await judgeArguments(call.verified.agent, call.grants, args, { approvals: deps.approvals, collectKeys: deps.audit !== undefined });
  return isDenial(authorization) ? authorization : advance(call, { authorization });
}

/** Step 9b verdict: any violation left refuses the call. */
export function enforceConstraints<P extends Checked>(call: P): P | Denial {
  const { violations } = call.authorization;
  return violations.length === 0 ? call : violationDenial(violations);
}
