import { beforeAll, describe, expect, it } from 'vitest';
import { serviceAudiences } from '../../../src/auth/profile.js';
import { presentProtocolDenial, protocolViolation } from '../../../src/auth/protocol-errors.js';
import { loadPolicyText } from '../../../src/policy/load.js';
import { presentDenial } from '../../../src/pipeline/present.js';
import { discoveryDocument } from '../../../src/registration/discovery.js';
import { verifyAgentToken, type Expected } from '../../../src/auth/verify.js';
import { deny, isDenial, violationDenial } from '../../../src/errors.js';
import { createAgentSigner } from '../../../src/identity/client.js';
import { generateAgentKeyPair, importAgentKey, type AgentKeyPair } from '../../../src/identity/keys.js';
import type { Agent } from '../../../src/policy/types.js';
import { signClaims } from '../../support/tokens.js';

const NOW = 1_800_000_000;
const ISSUER = 'https://billing.example.com';
const HEADER = { alg: 'EdDSA', typ: 'agent+jwt' };

let keys: AgentKeyPair;
let agents: Map<string, Agent>;
let expected: Expected;

beforeAll(async () => {
  keys = await generateAgentKeyPair();
  const agent: Agent = {
    id: 'a1',
    name: 'bot',
    key: await importAgentKey(keys.publicJwk as Record<string, unknown>),
    thumbprint: keys.thumbprint,
    hostId: 'host-1',
  };
  agents = new Map([[agent.id, agent]]);
  expected = {
    capability: 'getInvoice',
    location: `${ISSUER}/invoices/{id}`,
    urls: new Set([ISSUER, `${ISSUER}/`, `${ISSUER}/capability/execute`]),
    issuers: (a) => [a.thumbprint, 'host-1', 'host-thumb'],
  };
});

const token = (over: Record<string, unknown> = {}, header: Record<string, unknown> = HEADER) => {
  const claims: Record<string, unknown> = { sub: 'a1', aud: ISSUER, iat: NOW, exp: NOW + 60, jti: 'j1' };
  for (const [k, v] of Object.entries(over))
    if (v === undefined) delete claims[k];
    else claims[k] = v;
  return signClaims(keys.privateJwk, header, claims);
};
const code = async (t: string) => {
  const r = await verifyAgentToken(t, expected, agents, NOW);
  return isDenial(r) ? r.code : 'ok';
};

describe('agent-auth-v1 verification', () => {
  it('accepts the protocol form: no iss, aud the issuer, the execute URL or the location; kid the key thumbprint', async () => {
    expect(await code(token())).toBe('ok');
    expect(await code(token({ aud: `${ISSUER}/capability/execute` }))).toBe('ok');
    expect(await code(token({ aud: `${ISSUER}/invoices/{id}`, capabilities: ['getInvoice'] }))).toBe('ok');
    // The location names the capability only with a capabilities claim of exactly it.
    expect(await code(token({ aud: `${ISSUER}/invoices/{id}` }))).toBe('token_invalid');
    expect(await code(token({ aud: `${ISSUER}/invoices/{id}`, capabilities: ['getInvoice', 'deleteInvoice'] }))).toBe('token_invalid');
    expect(await code(token({}, { ...HEADER, kid: keys.thumbprint }))).toBe('ok');
    expect(await code(token({ iss: 'host-1' }))).toBe('ok');
    expect(await code(token({ iss: keys.thumbprint }))).toBe('ok');
  });

  it('refuses another key id, another issuer, another audience, an audience list, a malformed capabilities claim', async () => {
    expect(await code(token({}, { ...HEADER, kid: 'someone-else' }))).toBe('token_invalid');
    expect(await code(token({ iss: 'host-2' }))).toBe('token_invalid');
    expect(await code(token({ aud: 'https://other.example.com' }))).toBe('token_invalid');
    expect(await code(token({ aud: 'getInvoice' }))).toBe('token_invalid');
    expect(await code(token({ aud: [ISSUER] }))).toBe('token_invalid');
    expect(await code(token({ capabilities: 'getInvoice' }))).toBe('token_invalid');
    expect(await code(token({ capabilities: [] }))).toBe('token_invalid');
    expect(await code(token({ sub: 'nobody' }))).toBe('agent_not_found');
  });

  it('a capabilities claim limits the token to the capabilities it names', async () => {
    expect(await code(token({ capabilities: ['getInvoice', 'other'] }))).toBe('ok');
    expect(await code(token({ capabilities: ['listInvoices'] }))).toBe('capability_denied');
  });

  it('the client helper mints it (aud the issuer, kid, capabilities, iss the host when given)', async () => {
    const signer = await createAgentSigner(keys.privateJwk, 'a1', { profile: 'agent-auth-v1', issuer: ISSUER, hostId: 'host-1' });
    const t = await signer.sign('getInvoice', { now: NOW });
    expect(await code(t)).toBe('ok');
    expect(JSON.parse(Buffer.from(t.split('.')[1]!, 'base64url').toString())).toMatchObject({ aud: ISSUER, iss: 'host-1', capabilities: ['getInvoice'] });
    expect(await code(await signer.sign('listInvoices', { now: NOW }))).toBe('capability_denied');
  });
});

describe('refusals in the protocol’s words', () => {
  it('maps codes, keeps the sidecar’s in agents_chain_code, and writes violations as {field, constraint: {op: value}, actual}', () => {
    expect(presentProtocolDenial(deny('token_expired', 'old')).body).toEqual({ error: 'invalid_jwt', message: 'old', agents_chain_code: 'token_expired' });
    expect(presentProtocolDenial(deny('request_binding_mismatch', 'x')).body.error).toBe('request_binding_mismatch');
    const violated = presentProtocolDenial(
      violationDenial([
        { field: 'amount', constraint: 'max', expected: 100, actual: 500, message: 'amount must be <= 100' },
        { field: 'mode', constraint: 'exact', expected: 'dry', actual: null, message: 'absent', absent: true },
      ]),
    ).body;
    expect(violated).toMatchObject({
      error: 'constraint_violated',
      violations: [
        { field: 'amount', constraint: { max: 100 }, actual: 500 },
        { field: 'mode', constraint: { eq: 'dry' } },
      ],
    });
    expect((violated.violations as object[])[1]).not.toHaveProperty('actual');
    expect(protocolViolation({ field: 'c', constraint: 'in', expected: ['USD'], actual: 'GBP', message: '' }).constraint).toEqual({ in: ['USD'] });
  });

  it('rate_limited carries Retry-After unless the sidecar set its own', () => {
    expect(presentProtocolDenial(deny('too_many_streams', 'busy'))).toMatchObject({ body: { error: 'rate_limited' }, headers: { 'retry-after': '5' } });
    const own = { ...deny('access_request_limit', 'full'), extra: { headers: { 'retry-after': '9' } } };
    expect(presentProtocolDenial(own).headers).toBeUndefined();
  });
});

describe('the service’s URLs, for an issuer with a path', () => {
  it('accepts as aud the execute URL discovery publishes (origin + path) and the one under the issuer', async () => {
    const policy = await loadPolicyText(
      'version: 1\nprovider: { name: s, issuer: https://api.example.com/billing, tokenProfile: agent-auth-v1 }\ncapabilities:\n  - { name: getInvoice, method: GET, path: "/invoices/{id}" }\n',
      'p.yaml',
    );
    const urls = serviceAudiences(policy);
    const published = discoveryDocument(policy);
    expect(published.default_location).toBe('https://api.example.com/capability/execute');
    expect(urls.has(String(published.default_location))).toBe(true);
    expect(urls.has('https://api.example.com/billing/capability/execute')).toBe(true);
    expect(urls.has('https://api.example.com/billing')).toBe(true);
    expect(urls.has('https://api.example.com/other')).toBe(false);
  });
});

describe('agent-auth-v1 with constraint-aware refusals', () => {
  it('keeps the protocol body, adds the envelope whose guidance names the issuer as aud, and applies violationStatus', async () => {
    const policy = await loadPolicyText(
      'version: 1\nprovider: { name: s, issuer: https://s.example.com, tokenProfile: agent-auth-v1 }\nconstraintAware: true\nviolationStatus: 422\ncapabilities:\n  - { name: getInvoice, method: GET, path: "/invoices/{id}" }\n',
      'p.yaml',
    );
    const violated = presentDenial(
      policy,
      'getInvoice',
      { id: { in: ['a'] } },
      violationDenial([{ field: 'id', constraint: 'in', expected: ['a'], actual: 'b', message: 'id must be one of ["a"], got "b"' }]),
    );
    expect(violated.status).toBe(422);
    expect(violated.body).toMatchObject({ error: 'constraint_violated', envelope: { permission: 'constraint_violated' } });
    const unverified = presentDenial(policy, 'getInvoice', undefined, deny('token_invalid', 'bad aud'));
    expect(unverified.status).toBe(401);
    expect((unverified.body as { envelope: { guidance: string } }).envelope.guidance).toContain('aud "https://s.example.com"');
  });
});
