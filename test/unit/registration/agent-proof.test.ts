import { describe, expect, it } from 'vitest';
import { createAgentProof, createHostSigner, hostTokenHash } from '../../../src/identity/client.js';
import { generateAgentKeyPair, importAgentKey } from '../../../src/identity/keys.js';
import { verifyAgentProof } from '../../../src/registration/agent-proof.js';
import { nonCanonical, signClaims } from '../../support/tokens.js';

const ISSUER = 'https://svc.example.com';
const NOW = 1_800_000_000;

describe('verifyAgentProof', async () => {
  const agentKeys = await generateAgentKeyPair();
  const agent = { key: await importAgentKey(agentKeys.publicJwk as Record<string, unknown>), thumbprint: agentKeys.thumbprint };
  const host = await createHostSigner((await generateAgentKeyPair()).privateJwk);
  const hostToken = await host.sign(ISSUER, { agentPublicKey: agentKeys.publicJwk, now: NOW });
  const verdict = (proof: unknown, token = hostToken, now = NOW) => verifyAgentProof(proof, agent, token, ISSUER, now);
  const hand = (over: Record<string, unknown>, header: Record<string, unknown> = { alg: 'EdDSA', typ: 'agent-proof+jwt' }, jwk = agentKeys.privateJwk) =>
    signClaims(jwk, header, { iss: agentKeys.thumbprint, aud: ISSUER, iat: NOW, exp: NOW + 60, ath: hostTokenHash(hostToken), ...over });

  it('accepts the proof createAgentProof makes for this host token', async () => {
    expect(verdict(await createAgentProof(agentKeys.privateJwk, { hostToken, audience: ISSUER, now: NOW }))).toBeUndefined();
    expect(verdict(hand({}))).toBeUndefined();
  });

  it.each([
    ['missing', undefined, /missing/],
    ['not a string', { iss: 'x' }, /compact JWS/],
    ['over 4 KiB', 'a'.repeat(5000), /4 KiB/],
    ['an agent token (wrong typ)', 'AGENT', /typ must be "agent-proof\+jwt"/],
    ['a crit header', 'CRIT', /crit/],
    ['iss another key', 'ISS', /iss is not the thumbprint/],
    ['aud another service', 'AUD', /not this service/],
    ['an aud array', 'AUDS', /single string/],
    ['no ath', 'NOATH', /ath must be/],
    ['ath of another host token', 'ATH', /another token/],
    ['signed by another key', 'SIG', /signature/],
    ['a non-canonical signature', 'NONCANON', /canonical/],
    ['expired', 'OLD', /expired/],
    ['a lifetime over 60 s', 'LONG', /lifetime/],
  ])('refuses a proof that is %s (proof_invalid)', async (_name, kind, message) => {
    const other = await generateAgentKeyPair();
    const proofs: Record<string, () => Promise<string> | string> = {
      AGENT: () => hand({}, { alg: 'EdDSA', typ: 'agent+jwt' }),
      CRIT: () => hand({}, { alg: 'EdDSA', typ: 'agent-proof+jwt', crit: ['b64'], b64: false }),
      ISS: () => hand({ iss: other.thumbprint }),
      AUD: () => hand({ aud: 'https://ledger.example.com' }),
      AUDS: () => hand({ aud: [ISSUER] }),
      NOATH: () => hand({ ath: undefined }),
      ATH: async () => hand({ ath: hostTokenHash(await host.sign(ISSUER, { agentPublicKey: agentKeys.publicJwk, now: NOW })) }),
      SIG: () => hand({}, undefined, other.privateJwk),
      NONCANON: () => {
        const t = hand({});
        const i = t.lastIndexOf('.');
        return t.slice(0, i + 1) + nonCanonical(t.slice(i + 1));
      },
      OLD: () => hand({ iat: NOW - 200, exp: NOW - 140 }),
      LONG: () => hand({ exp: NOW + 3600 }),
    };
    const proof = typeof kind === 'string' && proofs[kind] ? await proofs[kind]!() : kind;
    const r = verdict(proof);
    expect(r).toMatchObject({ denied: true, code: 'proof_invalid' });
    expect(r!.message).toMatch(message);
  });
});
