import { describeRule } from '../context/describe.js';
import { isDenial } from '../errors.js';
import { activeGrants } from '../pipeline/authorize.js';
import type { Agent, Constraints, McpRoute, McpServer, Policy } from '../policy/types.js';
import { findResource, PERMISSION_TOOL } from './message.js';

/** The list methods whose answers are cut to what the calling agent may use. */
export const LIST_METHODS = ['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list'] as const;
export type ListMethod = (typeof LIST_METHODS)[number];

export function isListMethod(method: string | undefined): method is ListMethod {
  return (LIST_METHODS as readonly (string | undefined)[]).includes(method);
}

/** Who is asking and under which policy: what decides which entries stay. */
export interface ListViewer {
  agent: Pick<Agent, 'id' | 'grants'>;
  policy: Pick<Policy, 'grants'>;
  nowMs: number;
  /** The sidecar answers the request_permission tool here (access requests on, not egress). */
  permissionTool: boolean;
}

/** The tool an agent calls to ask a human for a call beyond its limits (answered by the sidecar). */
export const PERMISSION_TOOL_DEFINITION = {
  name: PERMISSION_TOOL,
  description:
    'Ask a human to allow one call that is outside your limits. Give the tool, the exact arguments and why the user needs them. ' +
    'If a human approves, the sidecar runs that call once, itself: do not call the tool again for it. ' +
    "With wait (the default) this returns the call's result once a human decided; with wait: false it returns a requestId at once, " +
    'and request_permission with just {"requestId": ...} later tells the decision and the result.',
  inputSchema: {
    type: 'object',
    properties: {
      tool: { type: 'string', description: 'The tool you need to call.' },
      arguments: { type: 'object', description: 'The exact arguments of that call.' },
      reason: { type: 'string', description: 'Why the user needs this call (shown to the human).' },
      wait: { type: 'boolean', description: 'Wait for the decision (default true).' },
      requestId: { type: 'string', description: 'Alone: the status (and result) of a request made with wait: false.' },
    },
  },
};

/**
 * The `result` of a list answer with only the entries the agent holds an
 * active grant for (undeclared tools are dropped: they would be refused), each
 * tool's description ending with its limits, and the request_permission tool
 * when access requests are on. Pure; the other members of `result` are kept.
 */
export function filterListResult(method: ListMethod, result: Record<string, unknown>, server: McpServer, viewer: ListViewer): Record<string, unknown> {
  const granted = (route: McpRoute | undefined): Constraints | undefined => {
    if (!route) return undefined;
    const grants = activeGrants(viewer.agent, [route.capability.name], viewer.policy, viewer.nowMs);
    return isDenial(grants) ? undefined : grants[0].constraints;
  };
  const entries = (key: string): Record<string, unknown>[] =>
    Array.isArray(result[key]) ? (result[key] as unknown[]).filter((e): e is Record<string, unknown> => typeof e === 'object' && e !== null) : [];
  switch (method) {
    case 'tools/list': {
      const tools = entries('tools').flatMap((tool) => {
        const limits = granted(typeof tool.name === 'string' ? server.tools.get(tool.name) : undefined);
        return limits ? [withLimits(tool, limits)] : [];
      });
      if (viewer.permissionTool && tools.length > 0) tools.push(PERMISSION_TOOL_DEFINITION);
      return { ...result, tools };
    }
    case 'prompts/list':
      return { ...result, prompts: entries('prompts').filter((p) => typeof p.name === 'string' && granted(server.prompts.get(p.name))) };
    case 'resources/templates/list':
      return {
        ...result,
        resourceTemplates: entries('resourceTemplates').filter((t) => granted(server.resources.find((r) => r.template.source === t.uriTemplate)?.route)),
      };
    case 'resources/list':
      return {
        ...result,
        resources: entries('resources').filter((r) => {
          // Exactly what a resources/read of it would be checked as (an encoded one would be refused).
          const found = typeof r.uri === 'string' ? findResource(server, r.uri) : undefined;
          return typeof found === 'object' && granted(found.route) !== undefined;
        }),
      };
  }
}

/** The tool's description, then its limits in words (the constraint context), so the model sees them before it calls. */
function withLimits(tool: Record<string, unknown>, constraints: Constraints): Record<string, unknown> {
  const fields = Object.keys(constraints).sort();
  if (fields.length === 0) return tool;
  const limits = fields.map((f) => `${f} ${describeRule(constraints[f] ?? {})}`).join('; ');
  const description = typeof tool.description === 'string' && tool.description ? `${tool.description}\n\n` : '';
  return { ...tool, description: `${description}Your limits for this tool (enforced): ${limits}.` };
}
