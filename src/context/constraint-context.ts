import type { Constraints, McpTarget, Policy } from '../policy/types.js';
import { describeRule } from './describe.js';

export interface CapabilityContext {
  capability: string;
  method: string;
  path: string;
  description?: string;
  expiresAt?: string;
  constraints: Constraints;
  /** An MCP capability: what it names on its server. */
  mcp?: McpTarget;
}

export interface ConstraintContext {
  agentId: string;
  requestPermission: boolean;
  capabilities: CapabilityContext[];
  text: string;
}

/**
 * The system-prompt block for one agent: what it may call and within which
 * limits, and how to ask for more. Sorted by capability and field so the same
 * policy always gives the same bytes (diffable in Git, golden-file tested).
 */
export function constraintContext(policy: Policy, agentId: string, nowMs: number, grants: Policy['grants'] = policy.grants): ConstraintContext {
  const requestPermission = policy.accessRequests !== undefined;
  const capabilities: CapabilityContext[] = [];
  for (const grant of grants.values()) {
    if (grant.agent !== agentId || grant.status !== 'active') continue;
    if (grant.expiresAt !== undefined && grant.expiresAt <= nowMs) continue;
    const cap = policy.capabilities.get(grant.capability);
    if (!cap) continue;
    const constraints: Constraints = {};
    for (const field of Object.keys(grant.constraints).sort()) constraints[field] = grant.constraints[field]!;
    capabilities.push({
      capability: cap.name,
      method: cap.method,
      path: cap.path,
      description: cap.description,
      ...(cap.mcp ? { mcp: cap.mcp } : {}),
      expiresAt: grant.expiresAt === undefined ? undefined : new Date(grant.expiresAt).toISOString(),
      constraints,
    });
  }
  capabilities.sort((a, b) => (a.capability < b.capability ? -1 : a.capability > b.capability ? 1 : 0));
  return { agentId, requestPermission, capabilities, text: render(capabilities, requestPermission) };
}

/** "MCP tool refund at /mcp", "MCP session at /mcp", "MCP resource invoice://{id} at /mcp". */
function mcpWhere(m: McpTarget): string {
  return `MCP ${m.kind}${m.name ? ` ${m.name}` : m.uri ? ` ${m.uri}` : ''} at ${m.path}`;
}

function render(caps: CapabilityContext[], requestPermission: boolean): string {
  const lines = [
    'Your calls to this service pass through the agents-chain sidecar, which enforces the limits below.',
    'A call outside them is refused with a structured result listing each violated field and the values allowed.',
  ];
  lines.push(
    requestPermission
      ? 'If a call you need falls outside these limits, you can ask a human to allow it with request_permission.'
      : 'These limits cannot be raised from here: adjust your arguments to fit them.',
  );
  lines.push('', 'Capabilities you may call:');
  if (caps.length === 0) lines.push('  (none)');
  for (const c of caps) {
    lines.push(`  - ${c.capability} (${c.mcp ? mcpWhere(c.mcp) : `${c.method} ${c.path}`})${c.expiresAt ? `, until ${c.expiresAt}` : ''}:`);
    const fields = Object.entries(c.constraints);
    if (fields.length === 0) lines.push('      no argument constraints');
    for (const [field, rule] of fields) lines.push(`      ${field}: ${describeRule(rule)}`);
  }
  if (requestPermission) {
    lines.push(
      '',
      'To ask for a call outside these limits, POST /agent/request-permission with a token whose aud is',
      '"request_permission" and the JSON body {"capability": ..., "args": ..., "reason": ...} (add "path" when the',
      "capability's path has parameters or a query). A human operator reviews it; if approved, the call runs and you get its result.",
    );
    if (caps.some((c) => c.mcp))
      lines.push('Through an MCP client, call the tool "request_permission" with {"tool": ..., "arguments": ..., "reason": ...} instead.');
  }
  return `${lines.join('\n')}\n`;
}
