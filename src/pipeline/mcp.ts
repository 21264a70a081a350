import { deny, isDenial, type Denial } from '../errors.js';
import { jsonReply, type Reply } from '../http/respond.js';
import { filterListResult, isListMethod, type ListViewer } from '../mcp/lists.js';
import { servesPermissionTool, type McpMessage } from '../mcp/message.js';
import { rpcResult } from '../mcp/present.js';
import type { MessageRewrite } from '../mcp/rewrite.js';
import { sessionIdOf } from '../mcp/sessions.js';
import type { Agent, McpServer } from '../policy/types.js';
import type { Progress } from './chain.js';
import type { Deps } from './deps.js';
import { serveEndpoint } from './endpoint.js';
import type { Authenticated, EndpointRoute, McpCall } from './phases.js';

/**
 * A list request's answer, rewritten on its way back: the response to this
 * request's id (in a JSON body or among the events of an SSE stream) keeps
 * only what the agent holds active grants for. Other messages pass unchanged.
 */
export function listRewrite(mcp: McpMessage, agent: Pick<Agent, 'id' | 'grants'>, deps: Deps): MessageRewrite | undefined {
  const { method, id } = mcp;
  const server = mcp.route.mcp;
  if (!isListMethod(method) || id === undefined || !server) return undefined;
  return (message) => {
    if (typeof message !== 'object' || message === null) return message;
    const m = message as Record<string, unknown>;
    if (m.id !== id || typeof m.result !== 'object' || m.result === null) return message;
    return { ...m, result: filterListResult(method, m.result as Record<string, unknown>, server, viewerOf(agent, deps)) };
  };
}

/** Who reads a list answer, at the moment it passes. */
function viewerOf(agent: Pick<Agent, 'id' | 'grants'>, deps: Deps): ListViewer {
  return { agent, policy: deps.policy, nowMs: deps.now(), permissionTool: servesPermissionTool(deps.policy) };
}

/** Which list a response is, by the shape of its result (a stream's messages answer requests the sidecar did not see). */
const LIST_SHAPES = [
  ['tools', 'tools/list'],
  ['prompts', 'prompts/list'],
  ['resourceTemplates', 'resources/templates/list'],
  ['resources', 'resources/list'],
] as const;

/**
 * The server's GET stream: it may carry answers to requests the sidecar saw
 * on another connection (a stream resumed with Last-Event-ID replays them).
 * Every response shaped like a list answer is cut as that list would be.
 */
export function streamRewrite(server: McpServer | undefined, agent: Pick<Agent, 'id' | 'grants'>, deps: Deps): MessageRewrite | undefined {
  if (!server) return undefined;
  return (message) => {
    if (typeof message !== 'object' || message === null) return message;
    const m = message as Record<string, unknown>;
    const result = m.result;
    if (typeof result !== 'object' || result === null) return message;
    const shape = LIST_SHAPES.find(([key]) => Array.isArray((result as Record<string, unknown>)[key]));
    if (!shape) return message;
    return { ...m, result: filterListResult(shape[1], result as Record<string, unknown>, server, viewerOf(agent, deps)) };
  };
}

/**
 * The sidecar's own `request_permission` tool: its arguments {tool, arguments,
 * reason, wait} become the request_permission endpoint's input, authenticated
 * as that endpoint (a token with aud request_permission), and its answer is the
 * tool's result. Nothing reaches the MCP server.
 */
export async function answerPermissionTool(read: McpCall, deps: Deps, progress: Progress): Promise<Reply | Denial> {
  const { id } = read.mcp;
  const server = read.route.mcp;
  const input = read.mcp.arguments;
  if (typeof input.requestId === 'string' && input.tool === undefined) return askStatus(read, input.requestId, deps, progress);
  const tool = typeof input.tool === 'string' && server ? server.tools.get(input.tool) : undefined;
  if (!tool) return deny('unknown_tool', `request_permission needs "tool", one of the tools at ${server?.path ?? 'this server'}`);
  const route = deps.policy.routes.find((r): r is EndpointRoute => r.kind === 'endpoint' && r.endpoint === 'request_permission');
  if (!route || id === undefined) return deny('not_found', 'request_permission is not configured');
  const body = Buffer.from(JSON.stringify({ capability: tool.capability.name, args: input.arguments ?? {}, reason: input.reason }));
  const call = { ...read, route, params: {}, body, respondAsync: input.wait === false };
  progress.reached = call;
  return asToolResult(id, await serveEndpoint(call, deps, progress));
}

/** request_permission {requestId}: the request's status, and an approved call's result (the request_status endpoint, as a tool). */
async function askStatus(read: McpCall, requestId: string, deps: Deps, progress: Progress): Promise<Reply | Denial> {
  const route = deps.policy.routes.find((r): r is EndpointRoute => r.kind === 'endpoint' && r.endpoint === 'request_status');
  if (!route || read.mcp.id === undefined) return deny('not_found', 'request_permission is not configured');
  const call = { ...read, route, params: { id: requestId } };
  progress.reached = call;
  return asToolResult(read.mcp.id, await serveEndpoint(call, deps, progress));
}

/** The endpoint's answer as the tool's result: an approved call's own result, or the answer as text and structured content. */
function asToolResult(id: string | number, reply: Reply | Denial): Reply | Denial {
  if (isDenial(reply)) return reply;
  const json = 'json' in reply ? reply.json : reply.text;
  // Approved once and run: the tool's own result is the answer (the grant under _meta), as if the call had passed.
  const ran = approvedToolResult(json);
  if (ran) return jsonReply(200, rpcResult(id, ran));
  const text = typeof json === 'string' ? json : JSON.stringify(json, null, 2);
  const structured = typeof json === 'object' && json !== null && !Array.isArray(json) ? { structuredContent: json } : {};
  return jsonReply(200, rpcResult(id, { content: [{ type: 'text', text }], ...structured, isError: reply.status >= 400 || ranWithError(json) }));
}

/** The executed tool's result inside an approved request_permission answer (`result` holding MCP content), or undefined. */
function approvedToolResult(json: unknown): Record<string, unknown> | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const r = json as { permission?: unknown; result?: unknown; grant?: unknown };
  if (r.permission !== 'approved' || typeof r.result !== 'object' || r.result === null || !Array.isArray((r.result as { content?: unknown }).content))
    return undefined;
  const result = r.result as Record<string, unknown>;
  const meta = typeof result._meta === 'object' && result._meta !== null ? result._meta : {};
  return { ...result, _meta: { ...meta, 'agents-chain/grant': r.grant } };
}

/** How an MCP message that passed is sent on: its answer rewritten (lists), on the stream pool (GET), and what its answer binds. */
export interface McpForwarding {
  rewrite: MessageRewrite | undefined;
  stream: boolean;
  /**
   * The server's answer began: bind the session an initialize opened (now, not once the answer is relayed: the
   * client sends its next message as soon as it reads the result), forget one a DELETE ended.
   */
  answered(status: number, headers: Readonly<Record<string, string | string[] | undefined>>): void;
  /** The exchange is over (a stream closed). */
  release(): void;
}

/**
 * Before an MCP message goes to the server: a GET (the server's stream,
 * open for as long as the client reads it) counts against the agent's
 * streams, so one agent cannot hold every connection to the server.
 */
export function mcpForwarding(call: McpCall & Authenticated, deps: Deps): McpForwarding | Denial {
  const owner = call.verified.agent.thumbprint;
  const stream = call.req.method === 'GET';
  const max = deps.limits.mcpStreamsPerAgent;
  if (stream && !deps.mcpSessions.openStream(owner, max)) return deny('too_many_streams', `this agent holds ${max} MCP streams open already`);
  const { mcp } = call;
  return {
    rewrite: stream ? streamRewrite(call.route.mcp, call.verified.agent, deps) : listRewrite(mcp, call.verified.agent, deps),
    stream,
    answered(status, headers) {
      if (status >= 300) return;
      const sessionId = headers['mcp-session-id'];
      if (mcp.method === 'initialize' && typeof sessionId === 'string') deps.mcpSessions.bind(sessionId, owner);
      const ended = call.req.method === 'DELETE' ? sessionIdOf(call.req.rawHeaders) : undefined;
      if (ended) deps.mcpSessions.end(ended);
    },
    release() {
      if (stream) deps.mcpSessions.closeStream(owner);
    },
  };
}

/** An approved call the server answered with a JSON-RPC error (the executor's outcome is then `{error}`). */
function ranWithError(json: unknown): boolean {
  const r = json as { permission?: unknown; result?: unknown } | null;
  return r?.permission === 'approved' && typeof r.result === 'object' && r.result !== null && 'error' in r.result;
}
