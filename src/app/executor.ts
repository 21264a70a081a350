import type { Executor } from '../approvals/service.js';
import type { AccessRequest } from '../approvals/types.js';
import { denialBody, isDenial, statusOf, deny, type Denial } from '../errors.js';
import { parseStrictJsonBytes } from '../json/strict.js';
import { jsonRpcResponse } from '../mcp/answer.js';
import { sessionIdOf, type McpSessionStore } from '../mcp/sessions.js';
import { readMessage } from '../mcp/message.js';
import type { Agent, McpServer, Policy, Route } from '../policy/types.js';
import { agentLookup, type RegisteredAgents } from '../registration/directory.js';
import { matchRoute } from '../routing/match.js';
import { parseTarget } from '../routing/target.js';
import { authorize } from '../pipeline/authorize.js';
import { appRequestHeaders, type HeaderRules } from './request.js';
import type { Upstream } from './upstream.js';

export interface ExecutorDeps {
  upstream: Upstream;
  /** The policy active when the human answers (not when the agent asked). */
  policy: () => Policy;
  registered?: RegisteredAgents;
  now: () => number;
  rules: HeaderRules;
  limits: { maxBodyBytes: number; approvedCallTimeoutMs: number };
  /** Who opened each MCP session: an approved call runs on the asking agent's session only while it is still its own. */
  mcpSessions?: McpSessionStore;
}

/**
 * Runs a call a human approved exactly as a normal one: the same route
 * (matched again under the active policy), the same authorization (the grant
 * may have been revoked, have expired or been reloaded away while the human
 * thought; the violations are the ones approved), the same headers, the
 * planned body.
 */
export function approvalExecutor(deps: ExecutorDeps): Executor {
  return async (r) => {
    const body = r.body === undefined ? undefined : Buffer.from(r.body, 'base64');
    const authorized = await stillAuthorized(r, body, deps);
    if (isDenial(authorized)) return { status: statusOf(authorized.code), body: denialBody(authorized) };
    // Egress: the provider gets the sidecar's key and no identity headers, exactly as on a normal call.
    const headers = appRequestHeaders(
      [...r.headers, ...(body ? ['content-type', 'application/json'] : [])],
      {
        requestId: r.id,
        bodyLength: body?.length,
        checked: { agentId: r.agentId, agentName: r.agentName, capability: r.capability },
      },
      deps.rules,
    );
    headers.push('agent-permission', 'approved');
    const answer = await deps.upstream.fetch(r.method, r.target, headers, body, {
      timeoutMs: deps.limits.approvedCallTimeoutMs,
      maxBytes: deps.limits.maxBodyBytes,
    });
    const type = String(answer.headers['content-type'] ?? '');
    // An MCP server answers JSON-RPC, maybe as a stream: the result (or error) of the approved message is the outcome.
    const { mcpId } = authorized;
    const response = mcpId !== undefined ? jsonRpcResponse(type, answer.body.toString('utf8'), mcpId) : undefined;
    if (response) return { status: answer.status, contentType: 'application/json', body: 'result' in response ? response.result : { error: response.error } };
    let parsed: unknown = answer.body.toString('utf8');
    if (/json/i.test(type)) {
      try {
        parsed = JSON.parse(parsed as string);
      } catch {
        /* keep the text */
      }
    }
    return { status: answer.status, contentType: type || undefined, body: parsed };
  };
}

/** A route match, and for an MCP message its arguments and JSON-RPC id (to find its answer by). */
type Match = { route: Route; params: Record<string, string>; arguments?: Record<string, unknown>; id?: string | number };

function mcpMatch(server: McpServer, body: Buffer | undefined): Match | Denial {
  let json: unknown;
  try {
    json = parseStrictJsonBytes(body ?? Buffer.alloc(0));
  } catch (err) {
    return deny('invalid_body', `the approved MCP message is not JSON: ${(err as Error).message}`);
  }
  const message = readMessage(server, json, false);
  if (isDenial(message)) return message;
  return { route: message.route, params: { ...message.params }, arguments: { ...message.arguments }, ...(message.id !== undefined ? { id: message.id } : {}) };
}

/** The approved call is still allowed (and, to an MCP server, the id its answer carries), or why not. */
async function stillAuthorized(r: AccessRequest, body: Buffer | undefined, deps: ExecutorDeps): Promise<Denial | { mcpId?: string | number }> {
  const policy = deps.policy();
  const agent: Agent | undefined = await agentLookup({ policy, registered: deps.registered }).get(r.agentId);
  if (!agent) return deny('capability_denied', `agent "${r.agentId}" is no longer known`);
  const session = sessionIdOf(r.headers);
  if (session === null || (session !== undefined && deps.mcpSessions?.ownerOf(session) !== agent.thumbprint)) {
    return deny('session_not_found', "the MCP session this call was asked on ended or is no longer this agent's");
  }
  const target = parseTarget(r.target);
  if (isDenial(target)) return target;
  const found = matchRoute(policy.routes, r.method, target.segments);
  // An MCP server's path: the planned JSON-RPC message says which tool (and so which capability) it is.
  const match: Match | Denial | undefined = found?.route.kind === 'capability' && found.route.mcp ? mcpMatch(found.route.mcp, body) : found;
  if (isDenial(match)) return match;
  if (!match || match.route.kind !== 'capability' || match.route.capability.name !== r.capability) {
    return deny('capability_denied', `${r.method} ${target.path} is no longer the capability "${r.capability}"`);
  }
  const authorization = await authorize(
    agent,
    [r.capability],
    {
      method: r.method,
      params: match.params,
      query: target.query,
      body,
      headers: { 'content-type': 'application/json' },
      ...(match.arguments ? { parsed: { value: match.arguments } } : {}),
    },
    { policy, now: deps.now },
  );
  return isDenial(authorization) ? authorization : match.id !== undefined ? { mcpId: match.id } : {};
}
