import type { Decision } from '../../metrics/metrics.js';
import type { Finished } from '../phases.js';
import { capabilityName, resultOf } from './audit-entry.js';

const DECISION = { success: 'allowed', denied: 'denied', error: 'error' } as const satisfies Record<string, Decision>;

/**
 * What the metrics learn from one finished call. Pure. Labels stay bounded:
 * the capability is a policy name ("(none)" before routing, "(public)" for
 * public routes), the agent only a verified one. Sidecar endpoints that wait
 * for a human are counted but not timed (their wait is not overhead).
 */
export function callMetrics({ call, outcome, upstreamSeconds }: Finished, nowHr: number) {
  const kind = call.route?.kind;
  const denial = outcome.kind === 'refused' ? outcome.denial : undefined;
  return {
    capability: kind === 'public' ? '(public)' : (capabilityName(call) ?? '(none)'),
    decision: DECISION[resultOf(outcome)],
    reason: denial?.code,
    violatedFields: denial?.code === 'constraint_violated' ? denial.violations?.map((v) => v.field) : undefined,
    agentId: call.verified?.agent.id,
    totalSeconds: kind === 'endpoint' ? undefined : (nowHr - call.startedHr) / 1000,
    upstreamSeconds,
    mcp: mcpLabels(call, denial?.code),
  };
}

/** The MCP server and what the message named: a declared tool, prompt or resource template, the session, undeclared or unread. */
function mcpLabels(call: Finished['call'], reason: string | undefined): { server: string; tool: string } | undefined {
  // The request_permission tool ends on the sidecar's endpoint route; the message still says which server it came to.
  const server = (call.route?.kind === 'capability' ? call.route.mcp : undefined) ?? call.mcp?.route.mcp;
  if (!server) return undefined;
  const m = call.mcp;
  // Refused before the message was read: a name the policy does not declare, or a message that could not be read at all.
  if (!m) return { server: server.path, tool: reason === 'unknown_tool' ? '(undeclared)' : '(unread)' };
  if (m.kind === 'session') return { server: server.path, tool: '(session)' };
  if (m.kind === 'resource') return { server: server.path, tool: m.route.capability.mcp?.uri ?? '(undeclared)' };
  return { server: server.path, tool: m.name ?? '(undeclared)' };
}
