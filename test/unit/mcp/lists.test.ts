import { beforeAll, describe, expect, it } from 'vitest';
import { generateAgentKeyPair } from '../../../src/identity/keys.js';
import { isDenial } from '../../../src/errors.js';
import { filterListResult, PERMISSION_TOOL_DEFINITION, type ListMethod, type ListViewer } from '../../../src/mcp/lists.js';
import { readMessage } from '../../../src/mcp/message.js';
import { loadPolicyText } from '../../../src/policy/load.js';
import { grantKey, type McpServer, type Policy } from '../../../src/policy/types.js';

const NOW = Date.parse('2026-06-01T00:00:00Z');

/** `extra` turns access requests on (constraintAware + accessRequests). */
function policyText(keys: { bot: string; other: string }, extra = ''): string {
  return `
version: 1
provider: { name: billing-mcp, issuer: https://billing.example.com }
${extra}
mcp:
  - path: /mcp
    session: billing.mcp
    tools:
      - { name: refund }
      - { name: lookup_invoice, capability: lookup }
      - { name: transfer }
      - { name: delete_everything }
      - { name: archive }
      - { name: soon }
    prompts: [{ name: summarize }, { name: secret_prompt }]
    resources:
      - { uri: "invoice://{id}", capability: invoice.read }
      - { uri: "doc://{any}", capability: doc.any }
      - { uri: "doc://latest", capability: doc.latest }
agents:
  - { id: bot, name: bot, publicKey: { kty: OKP, crv: Ed25519, x: "${keys.bot}" } }
  - { id: other, name: other, publicKey: { kty: OKP, crv: Ed25519, x: "${keys.other}" } }
grants:
  - { agent: bot, capability: billing.mcp, status: active }
  - { agent: bot, capability: refund, status: active, constraints: { amount: { max: 100 } } }
  - { agent: bot, capability: lookup, status: active }
  - { agent: bot, capability: transfer, status: active, constraints: { amount: { min: 1, max: 5 }, account.country: { in: [DE, FR] } } }
  - { agent: bot, capability: delete_everything, status: revoked }
  - { agent: bot, capability: archive, status: active, expiresAt: "2026-01-01T00:00:00Z" }
  - { agent: bot, capability: soon, status: active, expiresAt: "2026-07-01T00:00:00Z" }
  - { agent: bot, capability: summarize, status: active }
  - { agent: bot, capability: invoice.read, status: active, constraints: { id: { in: [inv-1] } } }
  - { agent: bot, capability: doc.latest, status: active }
  - { agent: other, capability: billing.mcp, status: active }
`;
}
const ACCESS_REQUESTS = 'constraintAware: true\naccessRequests: { ttl: 5m }';

let plain: Policy;
let withRequests: Policy;
const serverOf = (p: Policy): McpServer => {
  const r = p.routes.find((x) => x.kind === 'capability' && x.mcp);
  if (r?.kind !== 'capability' || !r.mcp) throw new Error('no MCP server');
  return r.mcp;
};
beforeAll(async () => {
  const keys = { bot: (await generateAgentKeyPair()).publicJwk.x ?? '', other: (await generateAgentKeyPair()).publicJwk.x ?? '' };
  plain = await loadPolicyText(policyText(keys), 'mcp.yaml');
  withRequests = await loadPolicyText(policyText(keys, ACCESS_REQUESTS), 'mcp.yaml');
  expect(withRequests.accessRequests).toBeDefined();
  expect(plain.accessRequests).toBeUndefined();
});

function filter(method: ListMethod, result: Record<string, unknown>, opts: { policy?: Policy; agent?: string; nowMs?: number } = {}) {
  const policy = opts.policy ?? plain;
  const agent = policy.agents.get(opts.agent ?? 'bot');
  if (!agent) throw new Error('no agent');
  const viewer: ListViewer = { agent, policy, nowMs: opts.nowMs ?? NOW, permissionTool: policy.accessRequests !== undefined };
  return filterListResult(method, result, serverOf(policy), viewer);
}
const tool = (name: string, description?: string) => ({ name, ...(description ? { description } : {}), inputSchema: { type: 'object' } });
const ALL_TOOLS = ['refund', 'lookup_invoice', 'transfer', 'delete_everything', 'archive', 'soon', 'invoice_total', 'lookup'].map((n) => tool(n, `${n} it`));
const names = (r: Record<string, unknown>, key = 'tools') =>
  (r[key] as { name?: string; uri?: string; uriTemplate?: string }[]).map((e) => e.name ?? e.uri ?? e.uriTemplate);

describe('filterListResult: tools/list', () => {
  it('keeps only tools with an active, unexpired grant (not ungranted, undeclared, revoked or expired ones)', () => {
    expect(names(filter('tools/list', { tools: ALL_TOOLS }))).toEqual(['refund', 'lookup_invoice', 'transfer', 'soon']);
    // "lookup" is the capability of lookup_invoice, not a tool; an agent with only the session sees nothing.
    expect(names(filter('tools/list', { tools: ALL_TOOLS }, { agent: 'other' }))).toEqual([]);
  });

  it('an expiry is read against nowMs', () => {
    expect(names(filter('tools/list', { tools: [tool('archive'), tool('soon')] }, { nowMs: Date.parse('2025-12-31T23:59:59Z') }))).toEqual(['archive', 'soon']);
    expect(names(filter('tools/list', { tools: [tool('archive'), tool('soon')] }, { nowMs: Date.parse('2026-07-01T00:00:01Z') }))).toEqual([]);
  });

  it('a tool description ends with its limits (fields sorted); a tool without constraints is left as it was', () => {
    const r = filter('tools/list', { tools: [tool('refund', 'Refund an invoice'), tool('transfer'), tool('lookup_invoice', 'Look up')] });
    const [refund, transfer, lookup] = r.tools as { description?: string; inputSchema?: unknown }[];
    expect(refund?.description).toBe('Refund an invoice\n\nYour limits for this tool (enforced): amount must be a number no greater than 100.');
    expect(refund?.inputSchema).toEqual({ type: 'object' });
    expect(transfer?.description).toBe(
      'Your limits for this tool (enforced): account.country must be one of ["DE", "FR"]; amount must be a number from 1 to 5.',
    );
    expect(lookup).toEqual(tool('lookup_invoice', 'Look up'));
  });

  it('keeps the other members of the result and of each tool; does not change its input', () => {
    const input = {
      tools: [{ ...tool('refund', 'x'), annotations: { destructiveHint: true }, outputSchema: { type: 'object' } }],
      nextCursor: 'c2',
      _meta: { a: 1 },
    };
    const copy = structuredClone(input);
    const r = filter('tools/list', input);
    expect(r).toMatchObject({ nextCursor: 'c2', _meta: { a: 1 } });
    expect(r.tools).toMatchObject([{ name: 'refund', annotations: { destructiveHint: true }, outputSchema: { type: 'object' } }]);
    expect(input).toEqual(copy);
  });

  it('tolerates a missing or non-array tools member and non-object entries', () => {
    for (const tools of [undefined, null, 'refund', 5, { refund: tool('refund') }]) {
      expect(filter('tools/list', tools === undefined ? {} : { tools }, { policy: withRequests }).tools).toEqual([]);
    }
    expect(names(filter('tools/list', { tools: [null, 'refund', 7, { name: 5 }, {}, tool('refund')] }))).toEqual(['refund']);
  });
});

describe('filterListResult: request_permission', () => {
  it('is added when access requests are on and some tool is kept', () => {
    const r = filter('tools/list', { tools: ALL_TOOLS }, { policy: withRequests });
    expect(names(r)).toEqual(['refund', 'lookup_invoice', 'transfer', 'soon', 'request_permission']);
    expect((r.tools as unknown[]).at(-1)).toEqual(PERMISSION_TOOL_DEFINITION);
  });

  it('is not added when access requests are off, or when no tool is kept', () => {
    expect(names(filter('tools/list', { tools: ALL_TOOLS }))).not.toContain('request_permission');
    expect(filter('tools/list', { tools: ALL_TOOLS }, { policy: withRequests, agent: 'other' }).tools).toEqual([]);
    expect(filter('tools/list', { tools: [] }, { policy: withRequests }).tools).toEqual([]);
  });

  it("the server's own request_permission tool is dropped; only the sidecar's is listed", () => {
    const r = filter('tools/list', { tools: [tool('request_permission', 'evil'), tool('refund')] }, { policy: withRequests });
    expect(r.tools).toEqual([expect.objectContaining({ name: 'refund' }), PERMISSION_TOOL_DEFINITION]);
    expect(filter('tools/list', { tools: [tool('request_permission', 'evil')] }).tools).toEqual([]);
  });

  it('is not listed for prompts', () => {
    expect(filter('prompts/list', { prompts: [{ name: 'summarize' }] }, { policy: withRequests }).prompts).toEqual([{ name: 'summarize' }]);
  });
});

describe('filterListResult: prompts and resources', () => {
  it('prompts/list keeps granted prompts only', () => {
    const r = filter('prompts/list', {
      prompts: [{ name: 'summarize', arguments: [{ name: 'invoice' }] }, { name: 'secret_prompt' }, { name: 'refund' }, 'x'],
      nextCursor: 'n',
    });
    expect(r).toEqual({ prompts: [{ name: 'summarize', arguments: [{ name: 'invoice' }] }], nextCursor: 'n' });
    expect(filter('prompts/list', { prompts: null }).prompts).toEqual([]);
  });

  it('resources/templates/list keeps the templates declared (exact text) and granted', () => {
    const r = filter('resources/templates/list', {
      resourceTemplates: [
        { uriTemplate: 'invoice://{id}', name: 'inv' },
        { uriTemplate: 'doc://{any}' },
        { uriTemplate: 'invoice://{ID}' },
        { uriTemplate: 'x://{id}' },
      ],
    });
    expect(names(r, 'resourceTemplates')).toEqual(['inv']);
    expect(filter('resources/templates/list', {}).resourceTemplates).toEqual([]);
  });

  it('resources/list keeps resources whose URI matches a granted template, the first matching template deciding', () => {
    const r = filter('resources/list', {
      resources: [{ uri: 'invoice://inv-1' }, { uri: 'invoice://inv-2' }, { uri: 'doc://latest' }, { uri: 'doc://x' }, { uri: 'secret://x' }, { uri: 5 }],
    });
    // Constraints are not checked by the list (inv-2 is kept); doc://latest is doc.any's (the first template), not granted.
    expect(names(r, 'resources')).toEqual(['invoice://inv-1', 'invoice://inv-2']);
  });

  // The list drops what would be refused (undeclared, ungranted); a resources/read of a "%" URI is refused (invalid_body).
  it('resources/list keeps exactly the resources a resources/read would be classified as a granted capability for', () => {
    const server = serverOf(plain);
    const bot = plain.agents.get('bot');
    const uris = ['invoice://inv-1', 'invoice://inv%2D1', 'invoice://a,b', 'doc://latest', 'doc://x', 'x://y'];
    const readable = uris.filter((uri) => {
      const m = readMessage(server, { jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri } }, false);
      return !isDenial(m) && plain.grants.get(grantKey(bot?.id ?? '', m.route.capability.name))?.status === 'active';
    });
    expect(names(filter('resources/list', { resources: uris.map((uri) => ({ uri })) }), 'resources')).toEqual(readable);
  });
});

describe('filterListResult: a registered agent', () => {
  it("reads the agent's own grants, not the policy's", () => {
    const grants = new Map([
      [grantKey('bot', 'lookup'), { agent: 'bot', capability: 'lookup', status: 'active' as const, constraints: { id: { exact: 'a' } } }],
    ]);
    const viewer: ListViewer = { agent: { id: 'bot', grants }, policy: plain, nowMs: NOW, permissionTool: false };
    const r = filterListResult('tools/list', { tools: [tool('refund'), tool('lookup_invoice')] }, serverOf(plain), viewer);
    expect(r.tools).toEqual([{ ...tool('lookup_invoice'), description: 'Your limits for this tool (enforced): id must be exactly "a".' }]);
  });
});
