/**
 * The `mcp:` section: each MCP server behind the sidecar becomes one session
 * capability (its streamable HTTP endpoint, POST/GET/DELETE on one path) and
 * one capability per declared tool, prompt and resource template. Grants name
 * those capabilities; a message for anything undeclared is refused.
 */
import { parseUriTemplate, type UriTemplate } from '../mcp/uri-template.js';
import { parseTemplate, type PathTemplate } from '../routing/template.js';
import type { PathPart } from './issues.js';
import { RESERVED_AUDIENCES, reservedName } from './reserved.js';
import { PERMISSION_TOOL } from '../mcp/message.js';
import type { Capability, Constraints, McpRoute, McpServer, McpTarget, Route } from './types.js';

export interface RawMcpServer {
  path: string;
  session: string;
  description?: string;
  maxBodyBytes?: number;
  tools?: { name: string; capability?: string; description?: string; inputSchema?: Record<string, unknown> }[];
  prompts?: { name: string; capability?: string; description?: string }[];
  resources?: { uri: string; capability: string; description?: string }[];
}

type At = (path: PathPart[], message: string, asKey?: boolean) => void;
type AddRoute = (path: PathPart[], method: string, source: string, make: (t: PathTemplate) => Route) => void;

/** The methods of the streamable HTTP transport: messages (POST), the server's stream (GET), the session's end (DELETE). */
export const MCP_HTTP_METHODS = ['POST', 'GET', 'DELETE'] as const;

const CAPABILITY_NAME = /^[A-Za-z][A-Za-z0-9_.:-]{0,127}$/;

export function compileMcpServers(servers: readonly RawMcpServer[], capabilities: Map<string, Capability>, addRoute: AddRoute, at: At): McpServer[] {
  const define = (path: PathPart[], cap: Capability): boolean => {
    if (capabilities.has(cap.name) || RESERVED_AUDIENCES.has(cap.name)) {
      at(path, capabilities.has(cap.name) ? `duplicate capability name "${cap.name}"` : reservedName(cap.name));
      return false;
    }
    capabilities.set(cap.name, cap);
    return true;
  };
  return servers.flatMap((raw, i) => {
    const where: PathPart[] = ['mcp', i];
    const template = parseTemplate(raw.path);
    if (typeof template === 'string') {
      at([...where, 'path'], template);
      return [];
    }
    // One endpoint per server: clients (and the client helper's fetch) address it by its exact path.
    if (template.segments.some((seg) => 'param' in seg)) {
      at([...where, 'path'], 'an MCP endpoint is one fixed path (no {params})');
      return [];
    }
    const server = compileServer(raw, template, where, define, at);
    for (const method of MCP_HTTP_METHODS)
      addRoute(where, method, raw.path, (t) => ({ kind: 'capability', method, template: t, capability: server.session, mcp: server }));
    return [server];
  });
}

type Define = (path: PathPart[], cap: Capability) => boolean;

function compileServer(raw: RawMcpServer, template: PathTemplate, where: PathPart[], define: Define, at: At): McpServer {
  const session = mcpCapability(
    raw,
    raw.session,
    raw.description ?? `MCP session at ${raw.path} (initialize, ping, notifications, lists, the server's stream)`,
    {
      kind: 'session',
      path: raw.path,
    },
  );
  define([...where, 'session'], session);
  const tools = new Map<string, McpRoute>();
  const prompts = new Map<string, McpRoute>();
  const resources: { template: UriTemplate; route: McpRoute }[] = [];
  // The routes point back at their server (a message's route says where it came from).
  const server = { path: raw.path, session, tools, prompts, resources } as Omit<McpServer, 'sessionRoute'> as McpServer;
  const route = (cap: Capability): McpRoute => ({ kind: 'capability', method: 'POST', template, capability: cap, mcp: server });
  Object.assign(server, { sessionRoute: route(session) });
  for (const list of ['tools', 'prompts'] as const) {
    const into = list === 'tools' ? tools : prompts;
    const kind = list === 'tools' ? 'tool' : 'prompt';
    (raw[list] ?? []).forEach((t, j) => {
      const path: PathPart[] = [...where, list, j];
      const name = t.capability ?? t.name;
      if (!CAPABILITY_NAME.test(name)) return at([...path, 'name'], `"${t.name}" is not a capability name: give one with "capability:"`);
      if (into.has(t.name)) return at([...path, 'name'], `${kind} "${t.name}" is declared twice`);
      if (kind === 'tool' && t.name === PERMISSION_TOOL) return at([...path, 'name'], '"request_permission" is the sidecar\'s own tool');
      const schema = 'inputSchema' in t && t.inputSchema ? { inputSchema: t.inputSchema as Record<string, unknown> } : {};
      const cap = { ...mcpCapability(raw, name, t.description ?? `MCP ${kind} ${t.name} at ${raw.path}`, { kind, path: raw.path, name: t.name }), ...schema };
      if (define([...path, t.capability ? 'capability' : 'name'], cap)) into.set(t.name, route(cap));
    });
  }
  (raw.resources ?? []).forEach((r, j) => {
    const path: PathPart[] = [...where, 'resources', j];
    const uri = parseUriTemplate(r.uri);
    if (typeof uri === 'string') return at([...path, 'uri'], uri);
    if (resources.some((o) => o.template.source === r.uri)) return at([...path, 'uri'], `resource "${r.uri}" is declared twice`);
    const cap = mcpCapability(raw, r.capability, r.description ?? `MCP resource ${r.uri} at ${raw.path}`, { kind: 'resource', path: raw.path, uri: r.uri });
    if (define([...path, 'capability'], cap)) resources.push({ template: uri, route: route(cap) });
  });
  return server;
}

function mcpCapability(raw: RawMcpServer, name: string, description: string, mcp: McpTarget): Capability {
  return { name, method: 'POST', path: raw.path, description, ...(raw.maxBodyBytes !== undefined ? { maxBodyBytes: raw.maxBodyBytes } : {}), mcp };
}

/** Constraints on an MCP capability: a resource's name its URI variables; the session takes none (it has no arguments). */
export function checkMcpConstraints(constraints: Constraints, cap: Capability, path: PathPart[], at: At): void {
  const fields = Object.keys(constraints);
  if (!cap.mcp || fields.length === 0) return;
  if (cap.mcp.kind === 'session') return at(path, `"${cap.name}" is an MCP session: its messages carry no arguments to constrain`, true);
  if (cap.mcp.kind !== 'resource') return;
  const uri = parseUriTemplate(cap.mcp.uri ?? '');
  const names = typeof uri === 'string' ? [] : uri.names;
  for (const field of fields) {
    if (!names.includes(field)) at([...path, field], `"${field}" is not a variable of ${cap.mcp.uri} (${names.join(', ') || 'none'})`, true);
  }
}
