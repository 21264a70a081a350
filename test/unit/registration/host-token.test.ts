import { describe, expect, it } from 'vitest';
import { createAgentSigner, createHostSigner } from '../../../src/identity/client.js';
import { generateAgentKeyPair, importAgentKey } from '../../../src/identity/keys.js';
import type { Host } from '../../../src/policy/types.js';
import { verifyHostToken } from '../../../src/registration/host-token.js';
import { nonCanonical, signClaims } from '../../support/tokens.js';

const ISSUER = 'https://svc.example.com';
const NOW = 1_800_000_000;

describe('verifyHostToken', async () => {
  const keys = await generateAgentKeyPair();
  const signer = await createHostSigner(keys.privateJwk);
  const host: Host = {
    id: 'h1',
    name: 'H1',
    key: await importAgentKey(keys.publicJwk as Record<string, unknown>),
    thumbprint: keys.thumbprint,
    defaults: new Map(),
    maxAgents: 5,
  };
  const hosts = new Map([[host.thumbprint, host]]);
  const agentKey = (await generateAgentKeyPair()).publicJwk;

  it('accepts a fresh registration token and returns the agent key', async () => {
    const r = verifyHostToken(await signer.sign(ISSUER, { agentPublicKey: agentKey, now: NOW }), hosts, ISSUER, NOW + 5);
    expect(r).toMatchObject({
      host: { id: 'h1' },
      claims: { iss: keys.thumbprint, aud: ISSUER, agent_public_key: { kty: 'OKP', crv: 'Ed25519', x: agentKey.x } },
    });
  });

  it('refuses an unknown host, another audience, a long lifetime, an expired or future token, a tampered signature, an agent token', async () => {
    const stranger = await createHostSigner((await generateAgentKeyPair()).privateJwk);
    const code = (r: unknown) => (r as { code?: string }).code;
    expect(code(verifyHostToken(await stranger.sign(ISSUER, { now: NOW }), hosts, ISSUER, NOW))).toBe('host_not_found');
    expect(code(verifyHostToken(await signer.sign('https://other', { now: NOW }), hosts, ISSUER, NOW))).toBe('token_invalid');
    // The host signer refuses a lifetime over 60 s (client.ts tokenLifetime), so a long-lived token is signed by hand.
    const longLived = signClaims(
      keys.privateJwk,
      { alg: 'EdDSA', typ: 'host+jwt' },
      { iss: keys.thumbprint, aud: ISSUER, iat: NOW, exp: NOW + 300, jti: 'long-1' },
    );
    expect(code(verifyHostToken(longLived, hosts, ISSUER, NOW))).toBe('token_invalid');
    expect(code(verifyHostToken(await signer.sign(ISSUER, { now: NOW }), hosts, ISSUER, NOW + 200))).toBe('token_expired');
    expect(code(verifyHostToken(await signer.sign(ISSUER, { now: NOW + 120 }), hosts, ISSUER, NOW))).toBe('token_invalid');
    const t = await signer.sign(ISSUER, { now: NOW });
    const tampered = `${t.slice(0, -3)}${t.at(-3) === 'A' ? 'B' : 'A'}${t.slice(-2)}`; // a different character, always
    expect(code(verifyHostToken(tampered, hosts, ISSUER, NOW))).toBe('token_invalid');
    // The same decoder as agent tokens: a second spelling of the signature is refused.
    const i = t.lastIndexOf('.');
    expect(code(verifyHostToken(t.slice(0, i + 1) + nonCanonical(t.slice(i + 1)), hosts, ISSUER, NOW))).toBe('token_invalid');
    const agentToken = await (await createAgentSigner(keys.privateJwk, 'x')).sign(ISSUER, { now: NOW });
    expect((verifyHostToken(agentToken, hosts, ISSUER, NOW) as { message: string }).message).toMatch(/typ must be "host\+jwt"/);
  });
});
