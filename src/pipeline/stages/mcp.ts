import { deny, isDenial, type Denial } from '../../errors.js';
import { checkJsonRepresentation } from '../../http/body.js';
import { parseStrictJsonBytes, StrictJsonError } from '../../json/strict.js';
import { readMessage, servesPermissionTool } from '../../mcp/message.js';
import type { Deps } from '../deps.js';
import { activeGrants } from '../authorize.js';
import { sessionIdOf } from '../../mcp/sessions.js';
import { advance, type Authenticated, type Buffered, type CapabilityCall, type JsonRpcParsed, type McpRead, type Routed } from '../phases.js';

/**
 * An MCP endpoint's POST body: one JSON-RPC message, read with the strict
 * parser (duplicate keys, lone surrogates and the like refused: the server
 * reads what was checked). The GET stream and DELETE carry none.
 */
export function parseJsonRpc<P extends CapabilityCall & Buffered>(call: P): (P & JsonRpcParsed) | Denial {
  if (call.req.method !== 'POST') {
    return call.body?.length ? deny('invalid_body', `${call.req.method} on an MCP endpoint carries no body`) : advance(call, { rpc: { json: undefined } });
  }
  if (!call.body?.length) return deny('invalid_body', 'a POST to an MCP endpoint carries one JSON-RPC message');
  const media = checkJsonRepresentation(call.req.headers);
  if (media) return media;
  let json: unknown;
  try {
    json = parseStrictJsonBytes(call.body);
  } catch (err) {
    return deny('invalid_body', `the MCP message is not acceptable JSON: ${err instanceof StrictJsonError ? err.message : String(err)}`);
  }
  const id = typeof json === 'object' && json !== null ? (json as { id?: unknown }).id : undefined;
  const answerable = typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));
  return advance(call, { rpc: answerable ? { id, json } : { json } });
}

/**
 * What the message is checked as: the route becomes the tool's, prompt's or
 * resource's capability (a resource's URI variables its parameters), or
 * stays the session's. Anything the policy does not declare is refused here.
 */
export function readMcpMessage<P extends CapabilityCall & JsonRpcParsed>(call: P, deps: Deps): (P & McpRead) | Denial {
  const server = call.route.mcp;
  if (!server) return deny('internal_error', 'an MCP stage on a route without an MCP server');
  if (call.req.method !== 'POST') return advance(call, { mcp: { kind: 'session' as const, arguments: {}, params: {}, route: call.route } });
  const mcp = readMessage(server, call.rpc.json, servesPermissionTool(deps.policy));
  if (isDenial(mcp)) return mcp;
  return advance(call, { route: mcp.route, params: mcp.params, mcp });
}

/**
 * completion/complete names a prompt or resource template (`params.ref`), and
 * its answer lists values for that one's arguments: besides the session
 * grant, the agent must hold an active grant for what it names.
 */
export function checkReference<P extends CapabilityCall & JsonRpcParsed & McpRead & Authenticated>(call: P, deps: Deps): P | Denial {
  const server = call.mcp.route.mcp;
  if (call.mcp.method !== 'completion/complete' || !server) return call;
  const ref = (call.rpc.json as { params?: { ref?: { type?: unknown; name?: unknown; uri?: unknown } } }).params?.ref;
  const route =
    ref?.type === 'ref/prompt' && typeof ref.name === 'string'
      ? server.prompts.get(ref.name)
      : ref?.type === 'ref/resource' && typeof ref.uri === 'string'
        ? server.resources.find((r) => r.template.source === ref.uri)?.route
        : undefined;
  if (!route) return deny('unknown_tool', `completion/complete must name a declared prompt or resource template at ${server.path}`);
  const grants = activeGrants(call.verified.agent, [route.capability.name], deps.policy, deps.now());
  return isDenial(grants) ? grants : call;
}

/**
 * The Mcp-Session-Id a message carries is one the calling agent opened
 * (bound when the server answered its initialize). Another agent's session,
 * an ended one, or one from before a restart is 404 session_not_found: the
 * transport's spec has the client start a new session then.
 */
export function checkSession<P extends McpRead & Authenticated & Routed & Partial<JsonRpcParsed>>(call: P, deps: Deps): P | Denial {
  const id = sessionIdOf(call.req.rawHeaders);
  if (id === null) return deny('invalid_header', 'header "mcp-session-id" appears more than once');
  // Tasks are found by id; a server's task store scopes them by session only when there is one: no session, no tasks.
  if (id === undefined) return usesTasks(call) ? deny('session_not_found', 'MCP tasks need a session this agent opened (Mcp-Session-Id)') : call;
  const owner = deps.mcpSessions.ownerOf(id);
  return owner === call.verified.agent.thumbprint ? call : deny('session_not_found', 'no MCP session with this id was opened by this agent here');
}

/** tasks/* and a tools/call that asks to run as a task (params.task). */
function usesTasks(call: McpRead & JsonRpcParsedLike): boolean {
  const method = call.mcp.method ?? '';
  if (method.startsWith('tasks/')) return true;
  const params = (call.rpc?.json as { params?: { task?: unknown } } | undefined)?.params;
  return method === 'tools/call' && params?.task !== undefined;
}

type JsonRpcParsedLike = Partial<JsonRpcParsed>;
