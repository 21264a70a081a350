import { deny, type Denial } from '../errors.js';
import type { McpRoute, McpServer, Policy } from '../policy/types.js';
import { matchUriTemplate } from './uri-template.js';

/** What one MCP message is checked as: the session, a declared tool, prompt or resource, or the sidecar's own request_permission tool. */
export type McpKind = 'session' | 'tool' | 'prompt' | 'resource' | 'request_permission';

/** The sidecar's own tool, answered without reaching the server (when access requests are on). */
export const PERMISSION_TOOL = 'request_permission';

/** The sidecar answers the request_permission tool: access requests are on, and the agent's own calls carry its token (not egress). */
export function servesPermissionTool(policy: Pick<Policy, 'accessRequests' | 'egress'>): boolean {
  return policy.accessRequests !== undefined && policy.egress === undefined;
}

export interface McpMessage {
  readonly kind: McpKind;
  /** The JSON-RPC method; absent for a response to the server's request and for GET/DELETE. */
  readonly method?: string;
  /** A request's id (a notification or response has none to answer). */
  readonly id?: string | number;
  /** The tool or prompt name, or the resource URI. */
  readonly name?: string;
  /** What the constraints read: the tool's or prompt's arguments (an object; {} when none were sent). */
  readonly arguments: Readonly<Record<string, unknown>>;
  /** A resource's URI template variables, read as path parameters are. */
  readonly params: Readonly<Record<string, string>>;
  /** The capability route the message is checked as. */
  readonly route: McpRoute;
}

/**
 * Methods that carry no tool, prompt or resource: the session grant covers
 * them. Everything else is refused: a method the sidecar does not know could
 * run a tool it never checked (fail closed; a new spec method is added here).
 */
const SESSION_METHODS: ReadonlySet<string> = new Set([
  'initialize',
  'ping',
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'logging/setLevel',
  'completion/complete',
  'tasks/get',
  'tasks/list',
  'tasks/result',
  'tasks/cancel',
]);
export const RESOURCE_METHODS: ReadonlySet<string> = new Set(['resources/read', 'resources/subscribe', 'resources/unsubscribe']);

/**
 * Classifies one parsed JSON-RPC message sent to `server`. Pure: the same
 * function reads an agent's call, request_permission's planned call and the
 * call a human approved, so all three are checked as the same capability.
 */
export function readMessage(server: McpServer, json: unknown, permissionTool: boolean): McpMessage | Denial {
  if (Array.isArray(json)) {
    return deny('batch_refused', 'JSON-RPC batches are not accepted (MCP removed them in 2025-06-18): send one message per request');
  }
  if (typeof json !== 'object' || json === null) return deny('invalid_body', 'an MCP message must be a JSON-RPC 2.0 object');
  const m = json as Record<string, unknown>;
  if (m.jsonrpc !== '2.0') return deny('invalid_body', '"jsonrpc" must be "2.0"');
  const id = m.id;
  if (id !== undefined && typeof id !== 'string' && !(typeof id === 'number' && Number.isSafeInteger(id))) {
    return deny('invalid_body', '"id" must be a string or an integer');
  }
  const base = { ...(id === undefined ? {} : { id }), arguments: {}, params: {} };
  if (m.method === undefined) {
    // A response to the server's own request (sampling, elicitation, roots): session traffic.
    if (id === undefined || !('result' in m || 'error' in m))
      return deny('invalid_body', 'a JSON-RPC message needs "method", or "id" with "result" or "error"');
    return { ...base, kind: 'session', route: server.sessionRoute };
  }
  if (typeof m.method !== 'string') return deny('invalid_body', '"method" must be a string');
  const method = m.method;
  if (m.params !== undefined && (typeof m.params !== 'object' || m.params === null || Array.isArray(m.params))) {
    return deny('invalid_body', '"params" must be an object');
  }
  const params = (m.params ?? {}) as Record<string, unknown>;
  if (method.startsWith('notifications/') || SESSION_METHODS.has(method)) return { ...base, method, kind: 'session', route: server.sessionRoute };
  if (id === undefined) return deny('invalid_body', `"${method}" is a request: it needs an "id"`);
  if (method === 'tools/call' || method === 'prompts/get') return named(server, method, params, { ...base, method }, permissionTool);
  if (RESOURCE_METHODS.has(method)) return resource(server, params, { ...base, method });
  return deny('unknown_mcp_method', `the sidecar does not know the MCP method "${method}", so it cannot tell what it would run`);
}

type Base = Pick<McpMessage, 'id' | 'method' | 'arguments' | 'params'>;

function named(server: McpServer, method: string, params: Record<string, unknown>, base: Base, permissionTool: boolean): McpMessage | Denial {
  const name = params.name;
  if (typeof name !== 'string') return deny('invalid_body', `${method} needs "params.name", a string`);
  const args = params.arguments === undefined ? {} : params.arguments;
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return deny('invalid_body', '"params.arguments" must be an object');
  const tool = method === 'tools/call';
  if (tool && name === PERMISSION_TOOL && permissionTool) {
    return { ...base, kind: 'request_permission', name, arguments: args as Record<string, unknown>, route: server.sessionRoute };
  }
  const route = (tool ? server.tools : server.prompts).get(name);
  if (!route) return deny('unknown_tool', `no ${tool ? 'tool' : 'prompt'} "${name}" is available at ${server.path}`);
  return { ...base, kind: tool ? 'tool' : 'prompt', name, arguments: args as Record<string, unknown>, route };
}

function resource(server: McpServer, params: Record<string, unknown>, base: Base): McpMessage | Denial {
  const uri = params.uri;
  if (typeof uri !== 'string') return deny('invalid_body', `${base.method} needs "params.uri", a string`);
  const found = findResource(server, uri);
  if (typeof found === 'string') return deny('invalid_body', found);
  if (!found) return deny('unknown_tool', `no resource matching "${uri}" is available at ${server.path}`);
  return { ...base, kind: 'resource', name: uri, params: found.vars, route: found.route };
}

/**
 * The one template a URI matches, and its variables; or why the URI is
 * refused. The server reads what `new URL(uri)` makes of it (the SDK parses
 * it before matching: tabs and newlines dropped, "\\" read as "/", dot
 * segments resolved), so only a URI already in that form is checked. A value
 * holding "%" is refused: undecoded, as the SDK hands it on, but a server that
 * decoded "%41" would read what was never checked. A URI two templates match is
 * refused: the server may pick the other one.
 */
export function findResource(server: McpServer, uri: string): { route: McpRoute; vars: Record<string, string> } | string | undefined {
  const normal = URL.canParse(uri) ? new URL(uri).href : undefined;
  if (normal !== uri) return normal ? `"${uri}" is not in normal form: send it as "${normal}"` : `"${uri}" is not an absolute URI`;
  const matches = server.resources.flatMap(({ template, route }) => {
    const vars = matchUriTemplate(template, uri);
    return vars ? [{ route, vars, template }] : [];
  });
  const [found, other] = matches;
  if (!found) return undefined;
  if (other) return `"${uri}" matches more than one resource template (${found.template.source}, ${other.template.source}); the server could read it as either`;
  if (Object.values(found.vars).some((v) => v.includes('%'))) return `"${uri}": percent-encoded characters are not accepted in resource URIs`;
  return { route: found.route, vars: found.vars };
}
