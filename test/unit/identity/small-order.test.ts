import { createPublicKey, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ED25519 } from '../../../src/auth/ed25519-verify.js';
import { verifyAgentToken } from '../../../src/auth/verify.js';
import { ed25519KeyProblem } from '../../../src/identity/ed25519.js';
import { generateAgentKeyPair, importAgentKey } from '../../../src/identity/keys.js';
import { loadPolicyText } from '../../../src/policy/load.js';
import { PolicyError } from '../../../src/policy/issues.js';
import { encode, identitySignature, nonCanonicalEncodings, smallOrderPoints } from '../../support/ed25519.js';
import { b64url } from '../../support/tokens.js';

const NOW = 1_800_000_000;
const SMALL = smallOrderPoints();
const NON_CANONICAL = nonCanonicalEncodings();
const jwkOf = (bytes: Buffer) => ({ kty: 'OKP', crv: 'Ed25519', x: bytes.toString('base64url') });

/**
 * Whether this runtime's OpenSSL accepts R = identity, S = 0 for the identity key: OpenSSL 3.0 (Node 20)
 * does, OpenSSL 3.5 (Node 24, the image's runtime) refuses it. The sidecar refuses the keys on both, so the
 * exploit is shown where it exists and the refusal is asserted everywhere.
 */
const FORGEABLE_HERE = (() => {
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(`01${'00'.repeat(31)}`, 'hex').toString('base64url') }, format: 'jwk' });
  return verify(null, Buffer.from('m'), key, Buffer.from(identitySignature(), 'base64url'));
})();

/** A token for `capability` whose signature is R = identity, S = 0: made without any private key. */
function forged(thumbprint: string, jti: string): string {
  const h = b64url(JSON.stringify({ alg: 'EdDSA', typ: 'agent+jwt' }));
  const p = b64url(JSON.stringify({ sub: 'victim', iss: thumbprint, aud: 'createInvoice', iat: NOW, exp: NOW + 60, jti }));
  return `${h}.${p}.${identitySignature()}`;
}

describe('the torsion points, derived', () => {
  it('are 8 distinct points of orders 1, 2, 4 (x2) and 8 (x4), matching the published encodings', () => {
    expect(new Set(SMALL.map((s) => s.encoding.toString('hex'))).size).toBe(8);
    expect(SMALL.map((s) => s.order).sort()).toEqual([1, 2, 4, 4, 8, 8, 8, 8]);
    const hex = SMALL.map((s) => s.encoding.toString('hex'));
    expect(hex).toContain(`01${'00'.repeat(31)}`); // identity
    expect(hex).toContain(`ec${'ff'.repeat(30)}7f`); // (0, -1)
    expect(hex).toContain('26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05'); // order 8 (Wycheproof, Taming table)
    expect(hex).toContain('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a');
  });
});

describe('forgery against small-order keys', () => {
  it.each(SMALL.map((s) => [s.encoding.toString('hex'), s] as const))(
    `node:crypto ${FORGEABLE_HERE ? 'accepts' : '(OpenSSL ' + process.versions.openssl + ') refuses'} a forged token for %s; importAgentKey refuses the key`,
    async (_hex, { encoding, order }) => {
      // The exploit, as it stands today: OpenSSL imports the key and accepts R = identity, S = 0
      // whenever [k]A is the identity: always for order 1, for 1 in `order` hashes otherwise.
      const raw = createPublicKey({ key: jwkOf(encoding), format: 'jwk' });
      let passed = 0;
      for (let i = 0; i < 64; i++) {
        const t = forged('x', `jti-${i}`);
        if (verify(null, Buffer.from(t.slice(0, t.lastIndexOf('.'))), raw, Buffer.from(identitySignature(), 'base64url'))) passed++;
      }
      if (FORGEABLE_HERE) {
        expect(passed).toBeGreaterThan(0);
        if (order === 1) expect(passed).toBe(64);
      } else {
        expect(passed).toBe(0);
      }
      // The sidecar never imports such a key, so no agent can hold it.
      await expect(importAgentKey(jwkOf(encoding))).rejects.toThrow(/small order/);
      expect(ed25519KeyProblem(encoding)).toMatch(/small order/);
    },
  );

  it('a token forged for the identity key passes verifyAgentToken only with a key the importer would have refused', async () => {
    const identity = jwkOf(encode(1n, 0));
    const agents = new Map([['victim', { id: 'victim', name: 'v', key: createPublicKey({ key: identity, format: 'jwk' }), thumbprint: 'tp' }]]);
    const result = await verifyAgentToken(forged('tp', 'j1'), 'createInvoice', agents, NOW);
    // With node:crypto on OpenSSL 3.0 the signature check alone cannot stop it; OpenSSL 3.5 and libsodium refuse the signature.
    if (FORGEABLE_HERE && ED25519.verifier.name === 'node:crypto') expect(result).toMatchObject({ agent: { id: 'victim' } });
    else expect(result).toMatchObject({ code: 'token_invalid' });
    await expect(importAgentKey(identity)).rejects.toThrow(/identity point/);
  });
});

describe('non-canonical encodings', () => {
  it.each(NON_CANONICAL.map((n) => [n.what, n.encoding] as const))('refuses %s', async (_what, encoding) => {
    expect(ed25519KeyProblem(encoding)).toMatch(/non-canonical/);
    await expect(importAgentKey(jwkOf(encoding))).rejects.toThrow(/non-canonical/);
  });

  it(`node:crypto imports y = p + 1 (the identity, non-canonically) and ${FORGEABLE_HERE ? 'accepts' : 'here refuses'} the forged signature for it`, () => {
    const key = createPublicKey({ key: jwkOf(encode(2n ** 255n - 19n + 1n, 0)), format: 'jwk' });
    const t = forged('x', 'j');
    expect(verify(null, Buffer.from(t.slice(0, t.lastIndexOf('.'))), key, Buffer.from(identitySignature(), 'base64url'))).toBe(FORGEABLE_HERE);
  });
});

describe('ordinary keys', () => {
  it('accepts generated keys and refuses an encoding that is no point on the curve', async () => {
    for (let i = 0; i < 20; i++) {
      const { publicJwk } = await generateAgentKeyPair();
      expect(ed25519KeyProblem(Buffer.from(publicJwk.x!, 'base64url'))).toBeUndefined();
    }
    // y = 2 has no x on the curve (2^2 - 1 over 4d + 1 is not a square).
    const off = [2n, 3n, 4n, 5n, 6n].map((y) => encode(y, 0)).find((e) => ed25519KeyProblem(e) !== undefined && !/small|canonical/.test(ed25519KeyProblem(e)!));
    expect(ed25519KeyProblem(off!)).toBe('not a point on the curve');
  });
});

describe('policy check names the key', () => {
  it('reports FILE:LINE:COL at the x of an agent and of a host with a small-order or non-canonical key', async () => {
    const good = (await generateAgentKeyPair()).publicJwk.x;
    const text = [
      'version: 1',
      'provider: { name: billing, issuer: "https://billing.example.com" }',
      'capabilities:',
      '  - { name: getInvoice, method: GET, path: "/invoices/{id}" }',
      'agents:',
      '  - id: ok-bot',
      '    name: ok',
      `    publicKey: { kty: OKP, crv: Ed25519, x: "${good}" }`,
      '  - id: torsion-bot',
      '    name: torsion',
      `    publicKey: { kty: OKP, crv: Ed25519, x: "${SMALL.find((s) => s.order === 8)!.encoding.toString('base64url')}" }`,
      'hosts:',
      '  - id: bad-host',
      '    name: bad',
      `    publicKey: { kty: OKP, crv: Ed25519, x: "${encode(2n ** 255n - 19n + 1n, 0).toString('base64url')}" }`,
      '',
    ].join('\n');
    const err = await loadPolicyText(text, 'billing.yaml').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolicyError);
    const lines = (err as PolicyError).message.split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^billing\.yaml:11:45: agents\[1\]\.publicKey\.x: Ed25519 public key refused: .*small order/);
    expect(lines[1]).toMatch(/^billing\.yaml:15:45: hosts\[0\]\.publicKey\.x: Ed25519 public key refused: .*non-canonical/);
  });
});
