import { beforeAll, describe, expect, it } from 'vitest';
import { generateAgentKeyPair } from '../../../src/identity/keys.js';
import { PolicyError, type PolicyIssue } from '../../../src/policy/issues.js';
import { loadPolicyText } from '../../../src/policy/load.js';

const FILE = 'mcp.yaml';
let KEY = '';
beforeAll(async () => {
  KEY = (await generateAgentKeyPair()).publicJwk.x ?? '';
});

const MCP = `mcp:
  - path: /mcp
    session: billing.mcp
    maxBodyBytes: 2048
    tools:
      - { name: refund, description: Refund an invoice, inputSchema: { type: object } }
      - { name: lookup_invoice, capability: lookup }
    prompts: [{ name: summarize }]
    resources:
      - { uri: "invoice://{id}", capability: invoice.read }
      - { uri: "doc://latest", capability: doc.latest }`;

/** A policy: `top` lines after the provider, the mcp: section (MCP unless given), the bot agent, `grants` lines under grants:. */
function policy(o: { top?: string; mcp?: string; grants?: string[] } = {}): string {
  const grants = o.grants ?? ['{ agent: bot, capability: billing.mcp, status: active }'];
  return [
    'version: 1',
    'provider: { name: billing-mcp, issuer: https://billing.example.com }',
    o.top ?? '',
    o.mcp ?? MCP,
    'agents:',
    `  - { id: bot, name: bot, publicKey: { kty: OKP, crv: Ed25519, x: "${KEY}" } }`,
    ...(grants.length ? ['grants:', ...grants.map((g) => `  - ${g}`)] : []),
    '',
  ].join('\n');
}

async function issuesOf(source: string): Promise<PolicyIssue[]> {
  try {
    await loadPolicyText(source, FILE);
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyError);
    return (e as PolicyError).issues;
  }
  throw new Error('expected the policy to be refused');
}
/** The one issue at `key`, its message matching `message`. */
async function expectIssue(source: string, key: string, message: RegExp | string): Promise<PolicyIssue> {
  const issues = await issuesOf(source);
  const found = issues.filter((i) => i.key === key);
  expect(found, `issues were: ${JSON.stringify(issues, null, 1)}`).toHaveLength(1);
  expect(found[0]?.message).toMatch(message);
  return found[0] as PolicyIssue;
}

describe('the mcp: section, valid', () => {
  it('compiles without capabilities: into a session, tool, prompt and resource capabilities, and POST/GET/DELETE routes', async () => {
    const p = await loadPolicyText(policy(), FILE);
    expect([...p.capabilities.keys()].sort()).toEqual(['billing.mcp', 'doc.latest', 'invoice.read', 'lookup', 'refund', 'summarize']);
    expect(p.capabilities.get('billing.mcp')).toMatchObject({ method: 'POST', path: '/mcp', maxBodyBytes: 2048, mcp: { kind: 'session', path: '/mcp' } });
    expect(p.capabilities.get('refund')).toMatchObject({
      description: 'Refund an invoice',
      inputSchema: { type: 'object' },
      mcp: { kind: 'tool', path: '/mcp', name: 'refund' },
    });
    expect(p.capabilities.get('lookup')?.mcp).toEqual({ kind: 'tool', path: '/mcp', name: 'lookup_invoice' });
    expect(p.capabilities.get('summarize')?.mcp).toEqual({ kind: 'prompt', path: '/mcp', name: 'summarize' });
    expect(p.capabilities.get('invoice.read')).toMatchObject({ maxBodyBytes: 2048, mcp: { kind: 'resource', path: '/mcp', uri: 'invoice://{id}' } });
    const routes = p.routes.filter((r) => r.kind === 'capability');
    expect(routes.map((r) => `${r.method} ${r.template.source}`)).toEqual(['POST /mcp', 'GET /mcp', 'DELETE /mcp']);
    for (const r of routes) expect(r.kind === 'capability' && r.capability.name).toBe('billing.mcp');
    const server = routes[0]?.kind === 'capability' ? routes[0].mcp : undefined;
    expect([...(server?.tools.keys() ?? [])]).toEqual(['refund', 'lookup_invoice']);
    expect(server?.resources.map((r) => r.template.source)).toEqual(['invoice://{id}', 'doc://latest']);
  });

  it('accepts constraints on tool arguments (nested too), prompt arguments and resource variables', async () => {
    const grants = [
      '{ agent: bot, capability: refund, status: active, constraints: { amount: { max: 100 }, account.country: { in: [DE] } } }',
      '{ agent: bot, capability: summarize, status: active, constraints: { invoice: { exact: inv-1 } } }',
      '{ agent: bot, capability: invoice.read, status: active, constraints: { id: { in: [inv-1] } } }',
    ];
    const p = await loadPolicyText(policy({ grants }), FILE);
    expect(p.grants.size).toBe(3);
  });

  it('a tool whose name is not a capability name is fine with capability:', async () => {
    const p = await loadPolicyText(policy({ mcp: MCP.replace('name: lookup_invoice', 'name: "look up/invoice"') }), FILE);
    expect(p.capabilities.get('lookup')?.mcp?.name).toBe('look up/invoice');
  });

  it('mode: egress with mcp: and no preset is accepted; unmapped defaults to deny', async () => {
    expect((await loadPolicyText(policy({ top: 'mode: egress' }), FILE)).egress).toEqual({ unmapped: 'deny' });
  });

  it('mode: egress with mcp: refuses unmapped: pass (look-alike paths such as /MCP and /mcp/ would go through unchecked)', async () => {
    const issues = await issuesOf(policy({ top: 'mode: egress\nunmapped: pass' }));
    expect(issues.map((i) => i.message)).toEqual([expect.stringContaining('unmapped: pass would forward look-alike paths')]);
  });

  it('an mcp path next to a capabilities: route of another method or path is fine', async () => {
    const caps = 'capabilities:\n  - { name: put, method: PUT, path: /mcp }\n  - { name: other, method: POST, path: /mcp/other }';
    expect((await loadPolicyText(policy({ top: caps }), FILE)).capabilities.size).toBe(8);
  });
});

describe('the mcp: section, refused', () => {
  it('a capability name used in both capabilities: and mcp:', async () => {
    const caps = 'capabilities:\n  - { name: refund, method: POST, path: /refund }\n  - { name: billing.mcp, method: GET, path: /x }';
    const issues = await issuesOf(policy({ top: caps }));
    expect(issues.map((i) => [i.key, i.message])).toEqual(
      expect.arrayContaining([
        ['mcp[0].session', 'duplicate capability name "billing.mcp"'],
        ['mcp[0].tools[0].name', 'duplicate capability name "refund"'],
      ]),
    );
  });

  it('a capability name used twice inside mcp:', async () => {
    await expectIssue(
      policy({ mcp: MCP.replace('capability: lookup', 'capability: billing.mcp') }),
      'mcp[0].tools[1].capability',
      'duplicate capability name "billing.mcp"',
    );
    await expectIssue(
      policy({ mcp: MCP.replace('capability: doc.latest', 'capability: refund') }),
      'mcp[0].resources[1].capability',
      'duplicate capability name "refund"',
    );
    await expectIssue(policy({ mcp: MCP.replace('name: summarize', 'name: refund') }), 'mcp[0].prompts[0].name', 'duplicate capability name "refund"');
    const two = `${MCP}\n  - path: /mcp2\n    session: other.mcp\n    tools: [{ name: refund }]`;
    await expectIssue(policy({ mcp: two }), 'mcp[1].tools[0].name', 'duplicate capability name "refund"');
  });

  it('a tool or prompt declared twice, a resource template declared twice', async () => {
    await expectIssue(
      policy({ mcp: MCP.replace('name: lookup_invoice, capability: lookup', 'name: refund, capability: refund2') }),
      'mcp[0].tools[1].name',
      'tool "refund" is declared twice',
    );
    await expectIssue(policy({ mcp: MCP.replace('uri: "doc://latest"', 'uri: "invoice://{id}"') }), 'mcp[0].resources[1].uri', 'declared twice');
  });

  it.each(['send email', 'tools/refund', '1refund', 'refund!', 'é'])('a tool named %j without capability:', async (name) => {
    const issue = await expectIssue(
      policy({ mcp: MCP.replace('name: refund,', `name: "${name}",`) }),
      'mcp[0].tools[0].name',
      'is not a capability name: give one with "capability:"',
    );
    expect([issue.line, issue.column]).toEqual([9, 17]);
  });

  it('a prompt named like no capability, without capability:', async () => {
    await expectIssue(policy({ mcp: MCP.replace('name: summarize', 'name: "sum up"') }), 'mcp[0].prompts[0].name', 'is not a capability name');
  });

  it('a tool named request_permission, with or without capability:', async () => {
    await expectIssue(policy({ mcp: MCP.replace('name: refund,', 'name: request_permission,') }), 'mcp[0].tools[0].name', "the sidecar's own tool");
    await expectIssue(policy({ mcp: MCP.replace('name: lookup_invoice', 'name: request_permission') }), 'mcp[0].tools[1].name', "the sidecar's own tool");
  });

  it('constraints on the session capability (a grant, a host default)', async () => {
    await expectIssue(
      policy({ grants: ['{ agent: bot, capability: billing.mcp, status: active, constraints: { method: { exact: ping } } }'] }),
      'grants[0].constraints',
      'is an MCP session',
    );
    const host = `hosts:\n  - id: h\n    name: h\n    publicKey: { kty: OKP, crv: Ed25519, x: "${(await generateAgentKeyPair()).publicJwk.x}" }\n    defaultCapabilities:\n      - { capability: billing.mcp, constraints: { x: { max: 1 } } }`;
    await expectIssue(policy({ top: host }), 'hosts[0].defaultCapabilities[0].constraints', 'is an MCP session');
  });

  it('resource constraints on a name that is not a template variable', async () => {
    const issue = await expectIssue(
      policy({ grants: ['{ agent: bot, capability: invoice.read, status: active, constraints: { id: { in: [a] }, uri: { exact: x } } }'] }),
      'grants[0].constraints.uri',
      '"uri" is not a variable of invoice://{id} (id)',
    );
    expect(issue.line).toBe(18);
    await expectIssue(
      policy({ grants: ['{ agent: bot, capability: doc.latest, status: active, constraints: { id: { max: 1 } } }'] }),
      'grants[0].constraints.id',
      '(none)',
    );
  });

  it.each([
    ['file://{+path}', 'not a simple variable'],
    ['invoice://{id', 'unbalanced'],
    ['invoice://id}', 'unbalanced'],
    ['x://{a}/{a}', 'appears twice'],
  ])('the URI template %j', async (uri, why) => {
    await expectIssue(policy({ mcp: MCP.replace('doc://latest', uri) }), 'mcp[0].resources[1].uri', why);
  });

  it.each([
    ['POST', '/mcp', ['POST']],
    ['GET', '/mcp', ['GET']],
    ['HEAD', '/mcp', ['GET']],
    ['DELETE', '/MCP/', ['DELETE']],
    ['POST', '/{any}', ['POST']],
  ])('an mcp path overlapping a capabilities: route (%s %s)', async (method, path, overlapping) => {
    const issues = await issuesOf(policy({ top: `capabilities:\n  - { name: app, method: ${method}, path: "${path}" }` }));
    const at = issues.filter((i) => i.key === 'mcp[0].path');
    expect(at.map((i) => i.message)).toEqual(overlapping.map((m) => `route ${m} /mcp overlaps capabilities[0] (${method} ${path})`));
  });

  it("an mcp path overlapping another server's or the sidecar's own endpoint", async () => {
    const two = `${MCP}\n  - path: /mcp\n    session: other.mcp`;
    const twice = (await issuesOf(policy({ mcp: two }))).filter((i) => i.key === 'mcp[1].path');
    expect(twice.map((i) => i.message)).toEqual(['POST', 'GET', 'DELETE'].map((m) => `route ${m} /mcp overlaps mcp[0] (${m} /mcp)`));
    const own = await issuesOf(policy({ mcp: MCP.replace('path: /mcp', 'path: /capability/list') }));
    expect(own.some((i) => i.key === 'mcp[0].path' && /overlaps the sidecar's own endpoint/.test(i.message))).toBe(true);
  });

  it('an mcp path with a {param}', async () => {
    await expectIssue(policy({ mcp: MCP.replace('path: /mcp', 'path: "/t/{tenant}/mcp"') }), 'mcp[0].path', 'one fixed path');
  });

  it('egress with both a preset and mcp:, egress with capabilities:, neither capabilities: nor mcp:', async () => {
    await expectIssue(policy({ top: 'mode: egress\npreset: openai' }), 'mcp', 'a preset or an MCP server, not both');
    await expectIssue(policy({ top: 'mode: egress\ncapabilities:\n  - { name: app, method: GET, path: /x }' }), 'capabilities', 'come from the preset');
    await expectIssue(policy({ top: 'mode: egress', mcp: '', grants: [] }), 'mode', 'a preset (openai or anthropic) or an mcp: section');
    await expectIssue(policy({ mcp: '', grants: [] }), '', 'capabilities');
  });

  it('a grant naming the tool instead of its capability', async () => {
    await expectIssue(
      policy({ grants: ['{ agent: bot, capability: lookup_invoice, status: active }'] }),
      'grants[0].capability',
      'unknown capability "lookup_invoice"',
    );
  });

  it('the schema: a server without session, a resource without capability, an unknown member', async () => {
    expect((await issuesOf(policy({ mcp: MCP.replace('    session: billing.mcp\n', '') }))).some((i) => i.key.startsWith('mcp[0]'))).toBe(true);
    expect((await issuesOf(policy({ mcp: MCP.replace(', capability: doc.latest', '') }))).some((i) => i.key.startsWith('mcp[0].resources[1]'))).toBe(true);
    expect(
      (await issuesOf(policy({ mcp: MCP.replace('{ name: summarize }', '{ name: summarize, uri: x }') }))).some((i) => i.key.startsWith('mcp[0].prompts[0]')),
    ).toBe(true);
  });
});
