import { beforeAll, describe, expect, it } from 'vitest';
import { verifyAgentToken } from '../../../src/auth/verify.js';
import { createAgentProof, createAgentSigner, createHostSigner, MAX_TOKEN_LIFETIME_SECONDS, mintAgentToken } from '../../../src/identity/client.js';
import { generateAgentKeyPair, importAgentKey, type AgentKeyPair } from '../../../src/identity/keys.js';
import type { Agent } from '../../../src/policy/types.js';
import { signClaims } from '../../support/tokens.js';

const NOW = 1_800_000_000;
const CAP = 'createInvoice';
const AGENT_ID = 'agent-billing-bot';

let keys: AgentKeyPair;
let agents: Map<string, Agent>;

beforeAll(async () => {
  keys = await generateAgentKeyPair();
  const agent: Agent = { id: AGENT_ID, name: 'billing-bot', key: await importAgentKey(keys.publicJwk as Record<string, unknown>), thumbprint: keys.thumbprint };
  agents = new Map([[AGENT_ID, agent]]);
});

const code = (r: unknown): string | undefined => (r as { code?: string }).code;

describe('the client helper refuses a token lifetime the sidecar would refuse', () => {
  it('the sidecar takes the longest lifetime the signer makes, and refuses one second more', async () => {
    const signer = await createAgentSigner(keys.privateJwk, AGENT_ID);
    const longest = await signer.sign(CAP, { now: NOW, ttlSeconds: MAX_TOKEN_LIFETIME_SECONDS });
    expect(await verifyAgentToken(longest, CAP, agents, NOW)).toMatchObject({ agent: { id: AGENT_ID }, claims: { exp: NOW + MAX_TOKEN_LIFETIME_SECONDS } });
    const byDefault = await signer.sign(CAP, { now: NOW });
    expect(await verifyAgentToken(byDefault, CAP, agents, NOW)).toMatchObject({ claims: { exp: NOW + MAX_TOKEN_LIFETIME_SECONDS } });
    // The same token with one more second, signed by hand: the bound the signer enforces is the sidecar's.
    const tooLong = signClaims(
      keys.privateJwk,
      { alg: 'EdDSA', typ: 'agent+jwt' },
      { sub: AGENT_ID, iss: keys.thumbprint, aud: CAP, iat: NOW, exp: NOW + MAX_TOKEN_LIFETIME_SECONDS + 1, jti: 'j-1' },
    );
    expect(code(await verifyAgentToken(tooLong, CAP, agents, NOW))).toBe('token_invalid');
  });

  it.each([MAX_TOKEN_LIFETIME_SECONDS + 1, 300, 0, -5, 1.5, Number.NaN])('sign() throws for ttlSeconds %s, naming the range', async (ttlSeconds) => {
    const signer = await createAgentSigner(keys.privateJwk, AGENT_ID);
    const refused = signer.sign(CAP, { now: NOW, ttlSeconds });
    await expect(refused).rejects.toThrow(RangeError);
    await expect(refused).rejects.toThrow(`ttlSeconds must be a whole number of seconds from 1 to ${MAX_TOKEN_LIFETIME_SECONDS}`);
  });

  it('mintAgentToken, the host signer and the agent proof refuse it too', async () => {
    await expect(mintAgentToken({ privateJwk: keys.privateJwk, agentId: AGENT_ID, capability: CAP, ttlSeconds: 61 })).rejects.toThrow(RangeError);
    const host = await createHostSigner(keys.privateJwk);
    await expect(host.sign('https://svc.example.com', { ttlSeconds: 61 })).rejects.toThrow(RangeError);
    const hostToken = await host.sign('https://svc.example.com', { ttlSeconds: 1 });
    await expect(createAgentProof(keys.privateJwk, { hostToken, audience: 'https://svc.example.com', ttlSeconds: 61 })).rejects.toThrow(RangeError);
    expect(await createAgentProof(keys.privateJwk, { hostToken, audience: 'https://svc.example.com', ttlSeconds: 60 })).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
  });
});
