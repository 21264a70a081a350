import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PolicyError, type PolicyIssue } from '../../../src/policy/issues.js';
import { loadPolicyText } from '../../../src/policy/load.js';
import { grantKey } from '../../../src/policy/types.js';

const FILE = 'policy.yaml';
const X_A = '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo'; // RFC 8037 example key
const X_B = 'I2Pz6U94atxWo01Q4q9rXk13B4Yg5sV-d2iRxm9W2kM';

/**
 * A small valid policy; the line numbers in the comments are relied on below.
 * Each variant replaces one line (1-based) or inserts lines after one.
 */
const BASE = [
  'version: 1', //                                               1
  'provider:', //                                                2
  '  name: svc', //                                              3
  '  issuer: https://svc.example.com', //                        4
  'capabilities:', //                                            5
  '  - name: getItem', //                                        6
  '    method: GET', //                                          7
  '    path: "/items/{id}"', //                                  8
  '  - name: createItem', //                                     9
  '    method: POST', //                                        10
  '    path: /items', //                                        11
  'agents:', //                                                 12
  '  - id: agent-a', //                                         13
  '    name: a', //                                             14
  `    publicKey: { kty: OKP, crv: Ed25519, x: "${X_A}" }`, //   15
  'grants:', //                                                 16
  '  - agent: agent-a', //                                      17
  '    capability: createItem', //                              18
  '    status: active', //                                      19
  '    constraints:', //                                        20
  '      amount: { max: 10 }', //                               21
];

const text = (lines: string[]): string => lines.join('\n') + '\n';
function replaceLine(line: number, ...with_: string[]): string {
  const l = [...BASE];
  l.splice(line - 1, 1, ...with_);
  return text(l);
}
function insertAfter(line: number, ...add: string[]): string {
  const l = [...BASE];
  l.splice(line, 0, ...add);
  return text(l);
}

async function issuesOf(source: string): Promise<PolicyIssue[]> {
  try {
    await loadPolicyText(source, FILE);
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyError);
    const issues = (e as PolicyError).issues;
    for (const i of issues) expect(i.file).toBe(FILE);
    return issues;
  }
  throw new Error('expected the policy to be refused');
}

/** The single issue at `key` (fails if there is none). */
async function issueAt(source: string, key: string): Promise<PolicyIssue> {
  const issues = await issuesOf(source);
  const found = issues.filter((i) => i.key === key);
  expect(found, `issues were: ${JSON.stringify(issues, null, 1)}`).toHaveLength(1);
  return found[0]!;
}

describe('loadPolicyText: valid policies', () => {
  it('loads the billing example', async () => {
    const url = new URL('../../../config/examples/billing.yaml', import.meta.url);
    const policy = await loadPolicyText(readFileSync(url, 'utf8'), url.pathname);
    expect(policy.capabilities.size).toBe(4);
    expect(policy.agents.size).toBe(2);
    expect(policy.grants.size).toBe(4);
    expect(policy.routes.filter((r) => r.kind !== 'endpoint')).toHaveLength(5); // 4 capabilities + 1 public route
    expect(policy.provider.name).toBe('billing-service');
    expect(policy.hash).toMatch(/^[0-9a-f]{64}$/);
    const grant = policy.grants.get(grantKey('agent-billing-bot', 'createInvoice'));
    expect(grant).toMatchObject({ status: 'active', expiresAt: Date.parse('2030-01-01T00:00:00Z') });
    expect(grant?.constraints).toEqual({
      amount: { max: 1000 },
      currency: { in: ['USD', 'EUR'] },
      'customer.tier': { not_in: ['internal'] },
      dryRun: { exact: false },
    });
  });

  it('loads the small base policy and computes the agent thumbprint', async () => {
    const policy = await loadPolicyText(text(BASE), FILE);
    expect(policy.file).toBe(FILE);
    expect(policy.agents.get('agent-a')?.thumbprint).toBe('kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k');
    expect(policy.routes.filter((r) => r.kind !== 'endpoint').map((r) => `${r.method} ${r.template.source}`)).toEqual(['GET /items/{id}', 'POST /items']);
  });

  it('lets the same path be used by different methods', async () => {
    const src = insertAfter(11, '  - name: exportItems', '    method: POST', '    path: /items/export');
    const policy = await loadPolicyText(src, FILE);
    expect(policy.capabilities.size).toBe(3);
  });
});

describe('loadPolicyText: schema problems', () => {
  it('refuses an unknown top-level key, at the key', async () => {
    const i = await issueAt(insertAfter(21, 'extra: true'), 'extra');
    expect(i).toMatchObject({ line: 22, column: 1, message: 'unknown key "extra"' });
  });

  it('refuses an unknown key inside a capability, at the key', async () => {
    const i = await issueAt(insertAfter(8, '    verb: GET'), 'capabilities[0].verb');
    expect(i).toMatchObject({ line: 9, column: 5 });
    expect(i.message).toContain('unknown key "verb"');
  });

  it('refuses an unknown constraint operator, at the operator', async () => {
    const i = await issueAt(replaceLine(21, '      amount: { maximum: 10 }'), 'grants[0].constraints.amount.maximum');
    expect(i).toMatchObject({ line: 21, column: 17 });
    expect(i.message).toContain('unknown constraint operator');
    expect(i.message).toContain('"maximum"');
  });

  it('refuses version 2', async () => {
    const i = await issueAt(replaceLine(1, 'version: 2'), 'version');
    expect(i).toMatchObject({ line: 1, column: 10 });
    expect(i.message).toContain('1');
  });

  it('refuses an x of the wrong length', async () => {
    const i = await issueAt(replaceLine(15, '    publicKey: { kty: OKP, crv: Ed25519, x: "AAAA" }'), 'agents[0].publicKey.x');
    expect(i.line).toBe(15);
  });

  it('refuses private key material in publicKey', async () => {
    const i = await issueAt(
      replaceLine(15, `    publicKey: { kty: OKP, crv: Ed25519, x: "${X_A}", d: "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A" }`),
      'agents[0].publicKey.d',
    );
    expect(i.line).toBe(15);
    expect(i.message).toMatch(/private key/);
  });

  it('reports every schema problem at once, sorted by position', async () => {
    const src = text([...BASE.slice(0, 1), 'bogus: 1', ...BASE.slice(1, 20), '      amount: { maximum: 10 }']);
    const issues = await issuesOf(src);
    expect(issues.map((i) => i.key)).toEqual(['bogus', 'grants[0].constraints.amount.maximum']);
    expect(issues.map((i) => i.line)).toEqual([2, 22]);
  });
});

describe('loadPolicyText: YAML problems', () => {
  it('refuses duplicate keys, at the second copy', async () => {
    const issues = await issuesOf(insertAfter(3, '  name: other'));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ line: 4, column: 3 });
    expect(issues[0]!.message).toMatch(/unique/i);
  });

  it('refuses a document that is not YAML', async () => {
    const issues = await issuesOf('version: 1\nprovider: [\n');
    expect(issues.length).toBeGreaterThan(0);
  });
});

describe('loadPolicyText: meaning problems', () => {
  it('refuses duplicate capability names, at the second name', async () => {
    const i = await issueAt(replaceLine(9, '  - name: getItem'), 'capabilities[1].name');
    expect(i).toMatchObject({ line: 9, column: 11 });
    expect(i.message).toContain('duplicate capability name "getItem"');
  });

  it('refuses overlapping routes of the same method', async () => {
    const src = insertAfter(11, '  - name: exportItems', '    method: GET', '    path: /items/export');
    const i = await issueAt(src, 'capabilities[2].path');
    expect(i).toMatchObject({ line: 14, column: 11 });
    expect(i.message).toContain('overlaps');
    expect(i.message).toContain('capabilities[0]');
    expect(i.message).toContain('/items/{id}');
  });

  it('refuses a public route overlapping a capability route', async () => {
    const src = insertAfter(11, 'public:', '  - { method: GET, path: /items/healthz }');
    const i = await issueAt(src, 'public[0].path');
    expect(i.line).toBe(13);
    expect(i.message).toContain('overlaps');
  });

  it('refuses an invalid path template', async () => {
    const i = await issueAt(replaceLine(11, '    path: /items/{a}{b}'), 'capabilities[1].path');
    expect(i).toMatchObject({ line: 11, column: 11 });
  });

  it('refuses a grant naming an unknown agent', async () => {
    const i = await issueAt(replaceLine(17, '  - agent: agent-zzz'), 'grants[0].agent');
    expect(i).toMatchObject({ line: 17, column: 12 });
    expect(i.message).toContain('unknown agent "agent-zzz"');
  });

  it('refuses a grant naming an unknown capability', async () => {
    const i = await issueAt(replaceLine(18, '    capability: deleteItem'), 'grants[0].capability');
    expect(i).toMatchObject({ line: 18, column: 17 });
    expect(i.message).toContain('unknown capability "deleteItem"');
  });

  it('refuses an x that is 43 characters but not canonical base64url of 32 bytes', async () => {
    const bad = X_A.slice(0, -1) + 'p'; // non-zero trailing bits
    const i = await issueAt(replaceLine(15, `    publicKey: { kty: OKP, crv: Ed25519, x: "${bad}" }`), 'agents[0].publicKey.x');
    expect(i.line).toBe(15);
    expect(i.column).toBe(45);
    expect(i.message).toMatch(/Ed25519 public key refused: "x" must be 32 bytes, base64url without padding/);
  });

  it('refuses two agents sharing one key', async () => {
    const src = insertAfter(15, '  - id: agent-b', '    name: b', `    publicKey: { kty: OKP, crv: Ed25519, x: "${X_A}" }`);
    const i = await issueAt(src, 'agents[1].publicKey');
    expect(i.message).toContain('agent-a');
  });

  it('accepts two agents with their own keys', async () => {
    const src = insertAfter(15, '  - id: agent-b', '    name: b', `    publicKey: { kty: OKP, crv: Ed25519, x: "${X_B}" }`);
    expect((await loadPolicyText(src, FILE)).agents.size).toBe(2);
  });

  it.each(['2030-01-01', 'tomorrow', '2030-13-01T00:00:00Z', '2030-01-01 00:00:00Z'])('refuses expiresAt %j', async (v) => {
    const i = await issueAt(insertAfter(19, `    expiresAt: "${v}"`), 'grants[0].expiresAt');
    expect(i).toMatchObject({ line: 20, column: 16 });
    expect(i.message).toContain('RFC 3339');
  });

  it('accepts an RFC 3339 expiresAt with an offset', async () => {
    const policy = await loadPolicyText(insertAfter(19, '    expiresAt: "2030-01-01T02:00:00+02:00"'), FILE);
    expect(policy.grants.get(grantKey('agent-a', 'createItem'))?.expiresAt).toBe(Date.parse('2030-01-01T00:00:00Z'));
  });

  it('refuses min greater than max, at the field', async () => {
    const i = await issueAt(replaceLine(21, '      amount: { min: 10, max: 1 }'), 'grants[0].constraints.amount');
    expect(i).toMatchObject({ line: 21, column: 7 });
    expect(i.message).toContain('min (10) is greater than max (1)');
  });

  it('refuses a second grant of the same capability to the same agent', async () => {
    const src = insertAfter(21, '  - agent: agent-a', '    capability: createItem', '    status: revoked');
    const i = await issueAt(src, 'grants[1]');
    expect(i.line).toBe(22);
  });

  it('reports several problems together, sorted by line', async () => {
    const l = [...BASE];
    l[16] = '  - agent: agent-zzz';
    l[17] = '    capability: deleteItem';
    const issues = await issuesOf(text(l));
    expect(issues.map((i) => [i.key, i.line])).toEqual([
      ['grants[0].agent', 17],
      ['grants[0].capability', 18],
    ]);
  });
});

describe('egress policies', () => {
  const egress = (extra: string[]) =>
    text([
      'version: 1',
      'mode: egress',
      'preset: openai',
      'provider: { name: e, issuer: https://e.internal }',
      'agents:',
      `  - { id: bot, name: bot, publicKey: { kty: OKP, crv: Ed25519, x: "${X_A}" } }`,
      ...extra,
    ]);

  it('takes the capabilities from the preset, variants included', async () => {
    const p = await loadPolicyText(
      egress(['grants:', '  - { agent: bot, capability: chat.completion, status: active, constraints: { model: { in: [gpt-4o-mini] } } }']),
      FILE,
    );
    expect([...p.capabilities.keys()]).toEqual([
      'chat.completion',
      'embedding',
      'image.generation',
      'audio.transcription',
      'audio.speech',
      'moderation',
      'response',
    ]);
    expect(p.egress).toMatchObject({ preset: { name: 'openai', baseUrl: 'https://api.openai.com' }, unmapped: 'pass' });
    const anthropic = await loadPolicyText(egress([]).replace('preset: openai', 'preset: anthropic'), FILE);
    expect([...anthropic.capabilities.keys()]).toEqual(['message', 'message.beta', 'message.stream', 'message.count_tokens', 'completion']);
  });

  it('refuses constraints on a multipart route (they could never be checked)', async () => {
    const issue = await issueAt(
      egress(['grants:', '  - { agent: bot, capability: audio.transcription, status: active, constraints: { model: { in: [whisper-1] } } }']),
      'grants[0].constraints',
    );
    expect(issue.message).toMatch(/multipart\/form-data.*could never be checked/);
  });

  it('refuses the agents’ token settings (tokenProfile, requireBinding): in egress the sidecar signs each call itself', async () => {
    const v1 = egress([]).replace('issuer: https://e.internal }', 'issuer: https://e.internal, tokenProfile: agent-auth-v1, requireBinding: true }');
    const issues = await issuesOf(v1.replace('name: bot, publicKey', 'name: bot, requireBinding: true, publicKey'));
    expect(issues.map((i) => i.key).sort()).toEqual(['agents[0].requireBinding', 'provider.requireBinding', 'provider.tokenProfile']);
    expect(issues[0]!.message).toMatch(/only meaningful in ingress/);
    const ingress = await loadPolicyText(replaceLine(3, '  name: svc', '  tokenProfile: agent-auth-v1', '  requireBinding: true'), FILE);
    expect(ingress.provider).toMatchObject({ tokenProfile: 'agent-auth-v1', requireBinding: true });
    expect((await issueAt(replaceLine(3, '  name: svc', '  tokenProfile: v2'), 'provider.tokenProfile')).message).toMatch(
      /must be one of "agents-chain", "agent-auth-v1"/,
    );
  });

  it('refuses a capability list in egress mode, a missing preset, and a preset without egress', async () => {
    expect((await issueAt(egress(['capabilities:', '  - { name: x, method: GET, path: /x }']), 'capabilities')).message).toMatch(/come from the preset/);
    expect((await issuesOf(egress([]).replace('preset: openai\n', ''))).map((i) => i.message)).toContainEqual(expect.stringMatching(/needs a preset/));
    expect((await issueAt(replaceLine(1, 'version: 1', 'preset: openai'), 'preset')).message).toMatch(/only meaningful with mode: egress/);
  });
});
