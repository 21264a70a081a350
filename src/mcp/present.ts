import { denialEnvelope } from '../context/envelope.js';
import { denialBody, guidanceFor, type Denial, type DenialCode } from '../errors.js';
import type { PresentedDenial } from '../http/respond.js';
import type { Constraints, Policy } from '../policy/types.js';
import { servesPermissionTool, type McpMessage } from './message.js';

/**
 * Refusals of one JSON-RPC request, answered in JSON-RPC so the MCP client
 * hands them to the model (an HTTP error status reaches the client's code as
 * a transport failure, its body lost). Only these codes: they are about the
 * message. A bad token, a body too large, a store that is down stay HTTP errors.
 */
const RPC_ERROR: Partial<Record<DenialCode, number>> = {
  invalid_body: -32600,
  unknown_mcp_method: -32601,
  // The MCP spec answers an unknown tool with Invalid params.
  unknown_tool: -32602,
  // Server-defined codes clear of the SDK's own (-32000 connection closed, -32001 request timeout, -32042 URL elicitation).
  capability_denied: -32010,
  constraint_violated: -32011,
  approval_not_needed: -32012,
  not_found: -32013,
  access_request_limit: -32014,
};

/** A request's JSON-RPC id and, once read, what the message is. */
export interface RpcContext {
  id: string | number | undefined;
  message: McpMessage | undefined;
}

/** Where a refused tool result carries the ConstraintAwareResult envelope (`_meta` keys take a reverse-DNS-style prefix). */
export const ENVELOPE_META_KEY = 'agents-chain/envelope';

/**
 * The JSON-RPC answer to a refused request, or undefined for an HTTP error.
 * Constraint-aware mode answers a refused tool call as the tool's result
 * (`isError: true`; the guidance, then the envelope as JSON, as text; the
 * envelope under `_meta`): the model reads it and can correct its arguments.
 * Not as `structuredContent`: the official SDK client validates that against
 * the tool's outputSchema even when `isError` is true, so a refused call of a
 * tool with an outputSchema would surface as a schema error instead. Pure.
 */
export function presentMcpDenial(
  policy: Policy,
  rpc: RpcContext,
  capability: string | undefined,
  activeConstraints: Constraints | undefined,
  denial: Denial,
): PresentedDenial | undefined {
  const code = RPC_ERROR[denial.code];
  if (rpc.id === undefined || code === undefined) return undefined;
  const tool = rpc.message?.kind === 'tool' || rpc.message?.kind === 'request_permission' ? rpc.message.name : undefined;
  const ctx = capability && {
    capability,
    activeConstraints: activeConstraints && Object.keys(activeConstraints).length ? activeConstraints : undefined,
    requestPermission: servesPermissionTool(policy),
    ...(tool !== undefined ? { mcpTool: tool } : {}),
    ...(policy.provider.tokenProfile === 'agent-auth-v1' ? { serviceAudience: policy.provider.issuer } : {}),
  };
  if (policy.context.constraintAware && tool !== undefined && ctx) {
    const envelope = denialEnvelope(denial, ctx);
    const content = [
      { type: 'text', text: guidanceFor(denial, ctx) },
      { type: 'text', text: JSON.stringify(envelope) },
    ];
    return { status: 200, body: rpcResult(rpc.id, { content, isError: true, _meta: { [ENVELOPE_META_KEY]: envelope } }) };
  }
  // Constraint-aware: the envelope (guidance included) as the error's data, for prompts, resources and session requests too.
  const data = policy.context.constraintAware && ctx ? denialEnvelope(denial, ctx) : denialBody(denial);
  return { status: 200, body: { jsonrpc: '2.0', id: rpc.id, error: { code, message: `${denial.code}: ${denial.message}`, data } } };
}

export function rpcResult(id: string | number, result: unknown): unknown {
  return { jsonrpc: '2.0', id, result };
}
