import { beforeAll, describe, expect, it } from 'vitest';
import { CLOCK_SKEW_SECONDS, verifyAgentToken } from '../../../src/auth/verify.js';
import { createAgentSigner } from '../../../src/identity/client.js';
import { generateAgentKeyPair, importAgentKey, type AgentKeyPair } from '../../../src/identity/keys.js';
import type { Agent } from '../../../src/policy/types.js';
import { b64url, signClaims, signRaw, withPayload } from '../../support/tokens.js';

const NOW = 1_800_000_000;
const CAP = 'createInvoice';
const AGENT_ID = 'agent-billing-bot';
const HEADER = { alg: 'EdDSA', typ: 'agent+jwt' };

let mine: AgentKeyPair;
let other: AgentKeyPair;
let agents: Map<string, Agent>;

beforeAll(async () => {
  mine = await generateAgentKeyPair();
  other = await generateAgentKeyPair();
  const agent: Agent = {
    id: AGENT_ID,
    name: 'billing-bot',
    key: await importAgentKey(mine.publicJwk as Record<string, unknown>),
    thumbprint: mine.thumbprint,
  };
  const otherAgent: Agent = {
    id: 'agent-other',
    name: 'other',
    key: await importAgentKey(other.publicJwk as Record<string, unknown>),
    thumbprint: other.thumbprint,
  };
  agents = new Map([
    [agent.id, agent],
    [otherAgent.id, otherAgent],
  ]);
});

/** Good claims, with overrides; a value of undefined removes the claim. */
function claims(over: Record<string, unknown> = {}): Record<string, unknown> {
  const base: Record<string, unknown> = { sub: AGENT_ID, iss: mine.thumbprint, aud: CAP, iat: NOW, exp: NOW + 60, jti: 'jti-1' };
  for (const [k, v] of Object.entries(over)) {
    if (v === undefined) delete base[k];
    else base[k] = v;
  }
  return base;
}

const token = (over: Record<string, unknown> = {}, header: Record<string, unknown> = HEADER) => signClaims(mine.privateJwk, header, claims(over));

const verify = (t: string, now = NOW, capability = CAP) => verifyAgentToken(t, capability, agents, now);

async function code(t: string, now = NOW, capability = CAP): Promise<string> {
  const r = await verify(t, now, capability);
  return 'denied' in r ? r.code : 'ok';
}

describe('verifyAgentToken: happy path', () => {
  it('accepts a token from createAgentSigner and returns the agent and claims', async () => {
    const signer = await createAgentSigner(mine.privateJwk, AGENT_ID);
    const t = await signer.sign(CAP, { now: NOW, jti: 'abc' });
    const r = await verify(t);
    expect(r).toMatchObject({
      agent: { id: AGENT_ID, thumbprint: mine.thumbprint },
      claims: { sub: AGENT_ID, iss: mine.thumbprint, aud: CAP, iat: NOW, exp: NOW + 60, jti: 'abc' },
    });
  });

  it('accepts a hand-signed token with the same claims', async () => {
    expect(await code(token())).toBe('ok');
  });
});

describe('verifyAgentToken: steps 1-2, shape (token_invalid)', () => {
  it.each([
    ['empty', ''],
    ['two parts', 'aaa.bbb'],
    ['four parts', 'aaa.bbb.ccc.ddd'],
    ['an empty part', 'aaa..ccc'],
    ['padding', 'aaa.bbb.ccc='],
    ['standard base64 characters', 'a+a.b/b.ccc'],
    ['whitespace', 'aaa.bbb.ccc '],
  ])('refuses a token that is not compact JWS: %s', async (_name, t) => {
    expect(await code(t)).toBe('token_invalid');
  });

  it('refuses a header or payload that is not a JSON object', async () => {
    const good = token();
    const [, p, s] = good.split('.');
    expect(await code(`${b64url('not json')}.${p}.${s}`)).toBe('token_invalid');
    expect(await code(`${b64url('["EdDSA"]')}.${p}.${s}`)).toBe('token_invalid');
    expect(await code(signRaw(mine.privateJwk, JSON.stringify(HEADER), 'null'))).toBe('token_invalid');
    expect(await code(signRaw(mine.privateJwk, JSON.stringify(HEADER), '"x"'))).toBe('token_invalid');
  });

  it('refuses duplicate keys in the header', async () => {
    const t = signRaw(mine.privateJwk, '{"alg":"EdDSA","typ":"agent+jwt","typ":"agent+jwt"}', JSON.stringify(claims()));
    expect(await code(t)).toBe('token_invalid');
  });

  it('refuses duplicate keys in the payload', async () => {
    const body = JSON.stringify(claims()).replace(/^\{/, `{"aud":"otherCapability",`);
    const t = signRaw(mine.privateJwk, JSON.stringify(HEADER), body);
    expect(await code(t)).toBe('token_invalid');
  });

  it.each([
    ['missing', undefined],
    ['JWT', 'JWT'],
    ['different case', 'Agent+JWT'],
    ['application/ prefixed', 'application/agent+jwt'],
  ])('refuses typ %s', async (_name, typ) => {
    const header: Record<string, unknown> = { alg: 'EdDSA' };
    if (typ !== undefined) header.typ = typ;
    expect(await code(token({}, header))).toBe('token_invalid');
  });

  it.each(['none', 'HS256', 'ES256', 'Ed25519', 'eddsa'])('refuses alg %s', async (alg) => {
    expect(await code(token({}, { alg, typ: 'agent+jwt' }))).toBe('token_invalid');
  });

  it('refuses an aud array, even one holding the capability', async () => {
    expect(await code(token({ aud: [CAP] }))).toBe('token_invalid');
  });

  it.each([
    ['missing', undefined],
    ['fractional', NOW + 0.5],
    ['a string', String(NOW)],
    ['unsafe', 2 ** 53],
  ])('refuses iat %s', async (_name, iat) => {
    expect(await code(token({ iat }))).toBe('token_invalid');
  });

  it.each([
    ['missing', undefined],
    ['fractional', NOW + 59.5],
    ['a string', String(NOW + 60)],
  ])('refuses exp %s', async (_name, exp) => {
    expect(await code(token({ exp }))).toBe('token_invalid');
  });

  it('refuses a missing or empty sub or iss', async () => {
    expect(await code(token({ sub: undefined }))).toBe('token_invalid');
    expect(await code(token({ sub: '' }))).toBe('token_invalid');
    expect(await code(token({ iss: undefined }))).toBe('token_invalid');
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['129 characters', 'j'.repeat(129)],
    ['a number', 12345],
  ])('refuses jti %s', async (_name, jti) => {
    expect(await code(token({ jti }))).toBe('token_invalid');
  });

  it('accepts a jti of 1 and of 128 characters', async () => {
    expect(await code(token({ jti: 'j' }))).toBe('ok');
    expect(await code(token({ jti: 'j'.repeat(128) }))).toBe('ok');
  });
});

describe('verifyAgentToken: steps 3-5, identity and audience', () => {
  it('answers agent_not_found for an unknown sub', async () => {
    const r = await verify(token({ sub: 'agent-nobody' }));
    expect(r).toMatchObject({ denied: true, code: 'agent_not_found', message: expect.stringContaining('agent-nobody') });
  });

  it("answers token_invalid when iss is not the thumbprint of the agent's key", async () => {
    expect(await code(token({ iss: other.thumbprint }))).toBe('token_invalid');
    expect(await code(token({ iss: 'x' }))).toBe('token_invalid');
  });

  it('answers capability_denied when aud is another capability', async () => {
    const r = await verify(token({ aud: 'deleteInvoice' }));
    expect(r).toMatchObject({ code: 'capability_denied', message: expect.stringContaining('deleteInvoice') });
  });
});

describe('verifyAgentToken: step 6, signature', () => {
  it('answers token_invalid for a token signed by another key', async () => {
    expect(await code(signClaims(other.privateJwk, HEADER, claims()))).toBe('token_invalid');
  });

  it('answers token_invalid for a tampered payload', async () => {
    const t = withPayload(token(), JSON.stringify(claims({ jti: 'jti-2' })));
    expect(await code(t)).toBe('token_invalid');
  });

  it('answers token_invalid for a truncated or altered signature', async () => {
    const t = token();
    expect(await code(t.slice(0, -4))).toBe('token_invalid');
    const [h, p, s] = t.split('.');
    const flipped = Buffer.from(s!, 'base64url');
    flipped[0] = flipped[0]! ^ 1;
    expect(await code(`${h}.${p}.${flipped.toString('base64url')}`)).toBe('token_invalid');
  });

  it('never takes the key from the header: a kid naming another key is ignored, a jwk is refused', async () => {
    const lying = { ...HEADER, kid: 'agent-other' };
    // Signed by the other key and naming it: still checked against the policy key of sub.
    expect(await code(signClaims(other.privateJwk, lying, claims()))).toBe('token_invalid');
    // Signed by the right key: the misleading kid does not matter.
    expect(await code(signClaims(mine.privateJwk, lying, claims()))).toBe('ok');
    // A key carried in the header is not understood, so the token is refused (even signed by the right key).
    expect(await code(signClaims(mine.privateJwk, { ...HEADER, jwk: other.publicJwk }, claims()))).toBe('token_invalid');
  });

  it('does not let a token for one agent verify as another', async () => {
    // Claims of agent-other, signed by mine: iss of agent-other, key mismatch.
    const t = signClaims(mine.privateJwk, HEADER, claims({ sub: 'agent-other', iss: other.thumbprint }));
    expect(await code(t)).toBe('token_invalid');
  });
});

describe('verifyAgentToken: step 7, lifetime and clock', () => {
  it('refuses exp equal to or before iat', async () => {
    expect(await code(token({ exp: NOW }))).toBe('token_invalid');
    expect(await code(token({ exp: NOW - 1 }))).toBe('token_invalid');
  });

  it('accepts a lifetime of 60 s and refuses 61 s', async () => {
    expect(await code(token({ exp: NOW + 60 }))).toBe('ok');
    expect(await code(token({ exp: NOW + 61 }))).toBe('token_invalid');
  });

  it('tolerates iat up to 30 s in the future, not more', async () => {
    expect(CLOCK_SKEW_SECONDS).toBe(30);
    expect(await code(token({ iat: NOW + 30, exp: NOW + 90 }))).toBe('ok');
    expect(await code(token({ iat: NOW + 31, exp: NOW + 91 }))).toBe('token_invalid');
  });

  it('answers token_expired once exp + 30 s has passed', async () => {
    const t = token({ iat: NOW - 100, exp: NOW - 40 });
    expect(await code(t)).toBe('token_expired');
    expect(await code(token({ iat: NOW - 91, exp: NOW - 31 }))).toBe('token_expired');
  });

  it('still accepts a token that expired 20 s (or exactly 30 s) ago', async () => {
    expect(await code(token({ iat: NOW - 50, exp: NOW - 20 }))).toBe('ok');
    expect(await code(token({ iat: NOW - 60, exp: NOW - 30 }))).toBe('ok');
  });
});

describe('verifyAgentToken: order of the steps', () => {
  it('checks typ before the agent exists', async () => {
    expect(await code(token({ sub: 'agent-nobody' }, { alg: 'EdDSA', typ: 'JWT' }))).toBe('token_invalid');
  });

  it('checks sub (step 3) before the signature (step 6)', async () => {
    const t = signClaims(other.privateJwk, HEADER, claims({ sub: 'agent-nobody' }));
    expect(await code(t)).toBe('agent_not_found');
  });

  it('checks aud (step 5) before the signature (step 6)', async () => {
    const t = signClaims(other.privateJwk, HEADER, claims({ aud: 'deleteInvoice' }));
    expect(await code(t)).toBe('capability_denied');
  });

  it('checks iss (step 4) before aud (step 5)', async () => {
    expect(await code(token({ iss: other.thumbprint, aud: 'deleteInvoice' }))).toBe('token_invalid');
  });

  it('checks the signature (step 6) before expiry (step 7)', async () => {
    const t = signClaims(other.privateJwk, HEADER, claims({ iat: NOW - 1000, exp: NOW - 950 }));
    expect(await code(t)).toBe('token_invalid');
  });
});
