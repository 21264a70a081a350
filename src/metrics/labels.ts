import { spellingsOf } from '../constraints/rules.js';
import type { Constraints, Policy } from '../policy/types.js';

/** The capability label of a call that matched no route, and of a public route (call-metrics.ts). */
export const NO_ROUTE = '(none)';
export const PUBLIC_ROUTE = '(public)';

/**
 * Label values a policy makes known before any call, so their series can be
 * exported at 0 from the first scrape: Prometheus' rate() and increase() need
 * a sample before the first event, or they never see it (a series born at 1
 * has no increase).
 */
export interface KnownLabels {
  /** Every capability label a call can carry: the policy's capabilities, the sidecar's endpoints, "(none)", "(public)". */
  callCapabilities: string[];
  /** [capability, field] pairs a constraint can be violated on: grants' constraints and hosts' defaults. */
  constraintFields: [string, string][];
  /** Capabilities an access request can be made for (none when request_permission is off). */
  approvalCapabilities: string[];
  /** [server path, tool] pairs of refused MCP messages: declared tools, prompts and resource templates, and the fixed labels. */
  mcpTools: [string, string][];
}

/** The tool label of MCP session traffic, of a name the policy does not declare, and of a message refused before it was read. */
export const MCP_FIXED_TOOLS = ['(session)', '(undeclared)', '(unread)', 'request_permission'] as const;

/** The label values the loaded policy makes known (see KnownLabels). Pure. */
export function knownLabels(policy: Policy): KnownLabels {
  const callCapabilities = new Set<string>([NO_ROUTE, ...policy.capabilities.keys()]);
  for (const route of policy.routes) {
    if (route.kind === 'public') callCapabilities.add(PUBLIC_ROUTE);
    else if (route.kind === 'endpoint') callCapabilities.add(route.endpoint);
  }
  const fields = new Map<string, [string, string]>();
  const addFields = (capability: string, constraints: Constraints): void => {
    // A violation names the spelling the call sent: an alias is a field of its own here.
    for (const [field, rule] of Object.entries(constraints))
      for (const name of spellingsOf(field, rule)) fields.set(`${capability}\u0000${name}`, [capability, name]);
  };
  for (const grant of policy.grants.values()) addFields(grant.capability, grant.constraints);
  for (const host of policy.hosts.values()) for (const [capability, constraints] of host.defaults) addFields(capability, constraints);
  for (const [capability, constraints] of policy.dynamicHosts?.defaults ?? []) addFields(capability, constraints);
  const mcpTools: [string, string][] = [];
  for (const route of policy.routes) {
    const server = route.kind === 'capability' && route.method === 'POST' ? route.mcp : undefined;
    if (!server) continue;
    const names = [...MCP_FIXED_TOOLS, ...server.tools.keys(), ...server.prompts.keys(), ...server.resources.map((r) => r.template.source)];
    for (const tool of names) mcpTools.push([server.path, tool]);
  }
  return {
    mcpTools,
    callCapabilities: [...callCapabilities],
    constraintFields: [...fields.values()],
    approvalCapabilities: policy.accessRequests ? [...policy.capabilities.keys()] : [],
  };
}
