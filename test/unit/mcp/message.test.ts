import { beforeAll, describe, expect, it } from 'vitest';
import { isDenial, type Denial, type DenialCode } from '../../../src/errors.js';
import { PERMISSION_TOOL, readMessage, type McpMessage } from '../../../src/mcp/message.js';
import { loadPolicyText } from '../../../src/policy/load.js';
import type { McpServer } from '../../../src/policy/types.js';

/** One MCP server with two tools (one under its own capability name), a prompt and overlapping resource templates. */
const POLICY = `
version: 1
provider: { name: billing-mcp, issuer: https://billing.example.com }
mcp:
  - path: /mcp
    session: billing.mcp
    tools:
      - { name: refund }
      - { name: lookup_invoice, capability: lookup }
    prompts: [{ name: summarize }]
    resources:
      - { uri: "invoice://{id}", capability: invoice.read }
      - { uri: "file://{dir}/{name}", capability: file.read }
      - { uri: "doc://{any}", capability: doc.any }
      - { uri: "doc://latest", capability: doc.latest }
`;

let server: McpServer;
beforeAll(async () => {
  const policy = await loadPolicyText(POLICY, 'mcp.yaml');
  const route = policy.routes.find((r) => r.kind === 'capability' && r.mcp !== undefined);
  if (route?.kind !== 'capability' || !route.mcp) throw new Error('no MCP route in the policy');
  server = route.mcp;
});

const rpc = (m: Record<string, unknown>): Record<string, unknown> => ({ jsonrpc: '2.0', ...m });

function accepted(json: unknown, permissionTool = false): McpMessage {
  const m = readMessage(server, json, permissionTool);
  if (isDenial(m)) throw new Error(`refused: ${m.code}: ${m.message}`);
  return m;
}
function refused(json: unknown, permissionTool = false): Denial {
  const m = readMessage(server, json, permissionTool);
  if (!isDenial(m)) throw new Error(`accepted as ${m.kind} ${m.route.capability.name}`);
  return m;
}
const codeOf = (json: unknown, permissionTool = false): DenialCode => refused(json, permissionTool).code;

describe('readMessage: session traffic', () => {
  const SESSION = [
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
  ];
  it.each(SESSION)('%s is the session capability, with its id and method', (method) => {
    const m = accepted(rpc({ id: 7, method, params: {} }));
    expect(m).toMatchObject({ kind: 'session', method, id: 7, arguments: {}, params: {} });
    expect(m.route).toBe(server.sessionRoute);
    expect(m.route.capability.name).toBe('billing.mcp');
  });

  it.each(['notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/roots/list_changed', 'notifications/x'])(
    '%s (a notification, no id) is session traffic',
    (method) => {
      const m = accepted(rpc({ method, params: { requestId: 1 } }));
      expect(m).toMatchObject({ kind: 'session', method });
      expect(m.id).toBeUndefined();
      expect(m.route).toBe(server.sessionRoute);
    },
  );

  it('a response to the server (id with result or error, no method) is session traffic', () => {
    for (const json of [rpc({ id: 3, result: {} }), rpc({ id: 'e-1', error: { code: -1, message: 'no' } }), rpc({ id: 0, result: null })]) {
      const m = accepted(json);
      expect(m.kind).toBe('session');
      expect(m.method).toBeUndefined();
      expect(m.id).toBe((json as { id: unknown }).id);
      expect(m.route).toBe(server.sessionRoute);
    }
  });

  it('a message with neither method nor id+result/error is refused', () => {
    expect(codeOf(rpc({ id: 3 }))).toBe('invalid_body');
    expect(codeOf(rpc({ result: {} }))).toBe('invalid_body');
    expect(codeOf(rpc({ error: { code: 1, message: 'x' } }))).toBe('invalid_body');
    expect(codeOf(rpc({}))).toBe('invalid_body');
  });
});

describe('readMessage: the envelope', () => {
  it('refuses batches, empty or not, as batch_refused', () => {
    expect(codeOf([])).toBe('batch_refused');
    expect(codeOf([rpc({ id: 1, method: 'ping' })])).toBe('batch_refused');
    expect(codeOf([rpc({ id: 1, method: 'tools/call', params: { name: 'refund' } }), rpc({ id: 2, method: 'ping' })])).toBe('batch_refused');
  });

  it('refuses what is not a JSON-RPC object', () => {
    for (const json of [null, 'ping', 42, true, undefined]) expect(codeOf(json)).toBe('invalid_body');
  });

  it('refuses a missing or wrong "jsonrpc"', () => {
    expect(codeOf({ id: 1, method: 'ping' })).toBe('invalid_body');
    for (const jsonrpc of ['1.0', '2', 2, 2.0, null, '2.0 ']) expect(codeOf({ jsonrpc, id: 1, method: 'ping' })).toBe('invalid_body');
  });

  it('accepts string and integer ids, refuses null, fractions, objects, arrays, booleans and unsafe integers', () => {
    for (const id of ['abc', '', 0, -3, Number.MAX_SAFE_INTEGER]) expect(accepted(rpc({ id, method: 'ping' })).id).toBe(id);
    for (const id of [null, 1.5, {}, { a: 1 }, [], [1], true, 2 ** 53]) expect(codeOf(rpc({ id, method: 'ping' })), String(id)).toBe('invalid_body');
    // The id check comes before the response check: a response with a bad id is refused too.
    expect(codeOf(rpc({ id: null, result: {} }))).toBe('invalid_body');
  });

  it('refuses a non-string method', () => {
    for (const method of [5, null, {}, ['ping']]) expect(codeOf(rpc({ id: 1, method }))).toBe('invalid_body');
  });

  it('refuses params that are not an object, for every kind of method', () => {
    for (const method of ['ping', 'tools/list', 'notifications/initialized', 'tools/call', 'resources/read', 'nope/nope']) {
      for (const params of [[], ['refund'], 'x', 1, null, false])
        expect(codeOf(rpc({ id: 1, method, params })), `${method} ${JSON.stringify(params)}`).toBe('invalid_body');
    }
  });

  it('refuses a request without id (tools/call, prompts/get, resources/read)', () => {
    expect(codeOf(rpc({ method: 'tools/call', params: { name: 'refund', arguments: {} } }))).toBe('invalid_body');
    expect(codeOf(rpc({ method: 'prompts/get', params: { name: 'summarize' } }))).toBe('invalid_body');
    expect(codeOf(rpc({ method: 'resources/read', params: { uri: 'invoice://1' } }))).toBe('invalid_body');
  });

  it.each(['sampling/createMessage', 'elicitation/create', 'roots/list', 'tools/execute', 'resources/write', 'tools/call/x', 'TOOLS/CALL', 'Ping', ''])(
    'an unknown method %j is unknown_mcp_method',
    (method) => {
      expect(codeOf(rpc({ id: 1, method, params: { name: 'refund' } }))).toBe('unknown_mcp_method');
    },
  );
});

describe('readMessage: tools and prompts', () => {
  it('tools/call of a declared tool is that tool, with its capability and arguments', () => {
    const args = { invoice: 'inv-1', amount: 50, nested: { a: [1] } };
    const m = accepted(rpc({ id: 2, method: 'tools/call', params: { name: 'refund', arguments: args } }));
    expect(m).toMatchObject({ kind: 'tool', method: 'tools/call', id: 2, name: 'refund', arguments: args, params: {} });
    expect(m.route.capability.name).toBe('refund');
    expect(m.route.capability.mcp).toEqual({ kind: 'tool', path: '/mcp', name: 'refund' });
    expect(m.route).toBe(server.tools.get('refund'));
  });

  it('a tool under its own capability name is checked as that capability; the capability name is not a tool', () => {
    const m = accepted(rpc({ id: 2, method: 'tools/call', params: { name: 'lookup_invoice', arguments: { id: 'x' } } }));
    expect(m.route.capability.name).toBe('lookup');
    expect(codeOf(rpc({ id: 2, method: 'tools/call', params: { name: 'lookup' } }))).toBe('unknown_tool');
  });

  it('missing arguments read as {}', () => {
    expect(accepted(rpc({ id: 1, method: 'tools/call', params: { name: 'refund' } })).arguments).toEqual({});
  });

  it('tools/call without a string name is refused', () => {
    for (const params of [{}, { name: 5 }, { name: null }, { name: ['refund'] }, { arguments: {} }]) {
      expect(codeOf(rpc({ id: 1, method: 'tools/call', params }))).toBe('invalid_body');
    }
    expect(codeOf(rpc({ id: 1, method: 'tools/call' }))).toBe('invalid_body');
  });

  it('non-object arguments are refused', () => {
    for (const args of [[], [1], 'amount=5', 5, true]) {
      expect(codeOf(rpc({ id: 1, method: 'tools/call', params: { name: 'refund', arguments: args } })), JSON.stringify(args)).toBe('invalid_body');
      expect(codeOf(rpc({ id: 1, method: 'prompts/get', params: { name: 'summarize', arguments: args } }))).toBe('invalid_body');
    }
  });

  // JSON null is not an object either; the SDK's server schema refuses it too.
  it('arguments: null is refused like any other non-object', () => {
    expect(codeOf(rpc({ id: 1, method: 'tools/call', params: { name: 'refund', arguments: null } }))).toBe('invalid_body');
  });

  it('an undeclared tool or prompt is unknown_tool; tools and prompts are separate namespaces', () => {
    expect(codeOf(rpc({ id: 1, method: 'tools/call', params: { name: 'delete_everything', arguments: {} } }))).toBe('unknown_tool');
    expect(codeOf(rpc({ id: 1, method: 'tools/call', params: { name: 'Refund' } }))).toBe('unknown_tool');
    expect(codeOf(rpc({ id: 1, method: 'tools/call', params: { name: 'summarize' } }))).toBe('unknown_tool');
    expect(codeOf(rpc({ id: 1, method: 'prompts/get', params: { name: 'refund' } }))).toBe('unknown_tool');
    expect(codeOf(rpc({ id: 1, method: 'tools/call', params: { name: '__proto__' } }))).toBe('unknown_tool');
    expect(codeOf(rpc({ id: 1, method: 'tools/call', params: { name: 'billing.mcp' } }))).toBe('unknown_tool');
  });

  it('prompts/get of a declared prompt is that prompt, with its arguments', () => {
    const m = accepted(rpc({ id: 'p', method: 'prompts/get', params: { name: 'summarize', arguments: { invoice: 'inv-1' } } }));
    expect(m).toMatchObject({ kind: 'prompt', method: 'prompts/get', id: 'p', name: 'summarize', arguments: { invoice: 'inv-1' } });
    expect(m.route.capability.name).toBe('summarize');
  });

  it('request_permission is the sidecar tool (session route) only when access requests are on', () => {
    const json = rpc({
      id: 9,
      method: 'tools/call',
      params: { name: PERMISSION_TOOL, arguments: { tool: 'refund', arguments: { amount: 500 }, reason: 'r' } },
    });
    const m = accepted(json, true);
    expect(m).toMatchObject({ kind: 'request_permission', name: 'request_permission', id: 9, arguments: { tool: 'refund', reason: 'r' } });
    expect(m.route).toBe(server.sessionRoute);
    expect(codeOf(json, false)).toBe('unknown_tool');
    // Not a prompt, and its arguments are still checked.
    expect(codeOf(rpc({ id: 9, method: 'prompts/get', params: { name: PERMISSION_TOOL } }), true)).toBe('unknown_tool');
    expect(codeOf(rpc({ id: 9, method: 'tools/call', params: { name: PERMISSION_TOOL, arguments: [] } }), true)).toBe('invalid_body');
  });
});

describe('readMessage: resources', () => {
  it.each(['resources/read', 'resources/subscribe', 'resources/unsubscribe'])('%s of a matching URI is that resource, its variables as params', (method) => {
    const m = accepted(rpc({ id: 1, method, params: { uri: 'invoice://inv-1' } }));
    expect(m).toMatchObject({ kind: 'resource', method, name: 'invoice://inv-1', params: { id: 'inv-1' }, arguments: {} });
    expect(m.route.capability.name).toBe('invoice.read');
    expect(m.route.capability.mcp).toEqual({ kind: 'resource', path: '/mcp', uri: 'invoice://{id}' });
  });

  it('reads several variables', () => {
    expect(accepted(rpc({ id: 1, method: 'resources/read', params: { uri: 'file://etc/passwd' } })).params).toEqual({ dir: 'etc', name: 'passwd' });
  });

  it('refuses a variable value with "%" (a server could decode it)', () => {
    for (const uri of ['invoice://inv%2D1', 'invoice://%', 'file://a%2Fb/c', 'file://a/%2e%2e']) {
      const d = refused(rpc({ id: 1, method: 'resources/read', params: { uri } }));
      expect(d.code, uri).toBe('invalid_body');
      // Refused either way: as a URL it does not parse, or its variable holds an encoded character.
      expect(d.message).toMatch(/percent-encoded|not an absolute URI|not in normal form/);
    }
  });

  it('checks a URI only in the form the server reads it (new URL), so tabs, newlines, "\\" and dot segments cannot hide a value', () => {
    for (const uri of ['invoice://inv-lo\tcked', 'invoice://inv-lo\ncked', 'file://docs/..\\admin', 'file://docs/../admin', 'INVOICE://x', 'not a uri']) {
      const d = refused(rpc({ id: 1, method: 'resources/read', params: { uri } }));
      expect(d.code, uri).toBe('invalid_body');
      expect(d.message, uri).toMatch(/not in normal form|not an absolute URI/);
    }
  });

  it('a value with "," or "/" does not match the variable', () => {
    for (const uri of ['invoice://a,b', 'invoice://a/b', 'invoice://', 'file://a/b/c', 'file://a,b/c', 'file:///c', 'invoice://x/']) {
      expect(codeOf(rpc({ id: 1, method: 'resources/read', params: { uri } })), uri).toBe('unknown_tool');
    }
  });

  it('a URI two templates match is refused (the server could pick the other one); one only one matches is that one', () => {
    const d = refused(rpc({ id: 1, method: 'resources/read', params: { uri: 'doc://latest' } }));
    expect(d.code).toBe('invalid_body');
    expect(d.message).toContain('more than one resource template');
    expect(accepted(rpc({ id: 1, method: 'resources/read', params: { uri: 'doc://other' } })).params).toEqual({ any: 'other' });
  });

  it('an undeclared URI is unknown_tool; a missing or non-string uri is invalid_body', () => {
    expect(codeOf(rpc({ id: 1, method: 'resources/read', params: { uri: 'secret://x' } }))).toBe('unknown_tool');
    expect(codeOf(rpc({ id: 1, method: 'resources/read', params: { uri: 'invoice2://x' } }))).toBe('unknown_tool');
    expect(codeOf(rpc({ id: 1, method: 'resources/read', params: {} }))).toBe('invalid_body');
    expect(codeOf(rpc({ id: 1, method: 'resources/read', params: { uri: 5 } }))).toBe('invalid_body');
    expect(codeOf(rpc({ id: 1, method: 'resources/read' }))).toBe('invalid_body');
  });
});
