import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalBase64url, decodeJws } from '../../../src/auth/jws.js';
import { verifyAgentToken } from '../../../src/auth/verify.js';
import { createHostSigner } from '../../../src/identity/client.js';
import { generateAgentKeyPair, importAgentKey, type AgentKeyPair } from '../../../src/identity/keys.js';
import type { Agent, Host } from '../../../src/policy/types.js';
import { verifyHostToken } from '../../../src/registration/host-token.js';
import { b64url, nonCanonical, signClaims, signSegments } from '../../support/tokens.js';

const NOW = 1_800_000_000;
const HEADER = { alg: 'EdDSA', typ: 'agent+jwt' };
const ISSUER = 'https://svc.example.com';

let keys: AgentKeyPair;
let agents: Map<string, Agent>;
let hosts: Map<string, Host>;

beforeAll(async () => {
  keys = await generateAgentKeyPair();
  const key = await importAgentKey(keys.publicJwk as Record<string, unknown>);
  agents = new Map([['bot', { id: 'bot', name: 'bot', key, thumbprint: keys.thumbprint }]]);
  hosts = new Map([[keys.thumbprint, { id: 'h', name: 'h', key, thumbprint: keys.thumbprint, defaults: new Map(), maxAgents: 1 }]]);
});

const claims = (over: Record<string, unknown> = {}) => ({ sub: 'bot', iss: keys.thumbprint, aud: 'cap', iat: NOW, exp: NOW + 60, jti: 'j1', ...over });
const agentCode = async (t: string) => {
  const r = await verifyAgentToken(t, 'cap', agents, NOW);
  return 'denied' in r ? `${r.code}: ${r.message}` : 'ok';
};

describe('JWS header: only alg, typ and kid are understood (RFC 7515 §4.1.11)', () => {
  it('accepts alg and typ, with or without a string kid', async () => {
    expect(await agentCode(signClaims(keys.privateJwk, HEADER, claims()))).toBe('ok');
    expect(await agentCode(signClaims(keys.privateJwk, { ...HEADER, kid: 'anything' }, claims()))).toBe('ok');
  });

  // Each of these is signed by the right key with otherwise perfect claims, so only the header can refuse it.
  it.each([
    ['crit naming b64', { crit: ['b64'], b64: false }, /crit/],
    ['crit naming an unknown extension', { crit: ['exp'] }, /crit/],
    ['an empty crit', { crit: [] }, /crit/],
    ['crit of another type', { crit: 'x' }, /crit/],
    ['b64: false (RFC 7797)', { b64: false }, /b64/],
    ['b64: true', { b64: true }, /b64/],
    ['jwk', { jwk: { kty: 'OKP', crv: 'Ed25519', x: 'AA' } }, /"jwk" is not understood/],
    ['jku', { jku: 'https://attacker.example/jwks' }, /"jku"/],
    ['x5u', { x5u: 'https://attacker.example/cert' }, /"x5u"/],
    ['x5c', { x5c: ['MIIB'] }, /"x5c"/],
    ['x5t', { x5t: 'abc' }, /"x5t"/],
    ['zip', { zip: 'DEF' }, /"zip"/],
    ['cty', { cty: 'JWT' }, /"cty"/],
    ['enc', { enc: 'A256GCM' }, /"enc"/],
    ['an unknown member', { foo: 1 }, /"foo" is not understood/],
    ['a kid that is not a string', { kid: 7 }, /kid must be a string/],
  ])('refuses %s in an agent token', async (_name, extra, message) => {
    const verdict = await agentCode(signClaims(keys.privateJwk, { ...HEADER, ...extra }, claims()));
    expect(verdict).toMatch(/^token_invalid: /);
    expect(verdict).toMatch(message);
  });

  it('refuses them in a host token too (one verifier)', async () => {
    const signer = await createHostSigner(keys.privateJwk);
    const good = await signer.sign(ISSUER, { now: NOW });
    expect(verifyHostToken(good, hosts, ISSUER, NOW)).toMatchObject({ host: { id: 'h' } });
    const payload = JSON.parse(Buffer.from(good.split('.')[1]!, 'base64url').toString());
    for (const extra of [{ crit: ['b64'], b64: false }, { b64: false }, { jku: 'https://x' }, { foo: 1 }]) {
      const t = signClaims(keys.privateJwk, { alg: 'EdDSA', typ: 'host+jwt', ...extra }, payload);
      expect(verifyHostToken(t, hosts, ISSUER, NOW)).toMatchObject({ denied: true, code: 'token_invalid' });
    }
  });
});

describe('canonical base64url in all three segments (RFC 4648 §3.5)', () => {
  it('refuses a signature whose last character differs in its unused bits (the same 64 bytes)', async () => {
    const t = signClaims(keys.privateJwk, HEADER, claims());
    const [h, p, s] = t.split('.') as [string, string, string];
    const respelled = nonCanonical(s);
    // Lenient decoding reads the same signature: this spelling passed before.
    expect(Buffer.from(respelled, 'base64url').equals(Buffer.from(s, 'base64url'))).toBe(true);
    expect(await agentCode(`${h}.${p}.${s}`)).toBe('ok');
    expect(await agentCode(`${h}.${p}.${respelled}`)).toMatch(/^token_invalid: .*canonical base64url/);
  });

  it('refuses a header or payload segment spelled non-canonically, even when the signature covers that spelling', async () => {
    const h = b64url(JSON.stringify(HEADER));
    // Pad the payload so its segment length is 2 or 3 (mod 4): both have unused bits.
    for (const pad of ['', 'x', 'xx', 'xxx']) {
      const p = b64url(JSON.stringify(claims({ pad })));
      if (p.length % 4 === 0) continue;
      expect(await agentCode(signSegments(keys.privateJwk, h, p))).toBe('ok');
      expect(await agentCode(signSegments(keys.privateJwk, h, nonCanonical(p)))).toMatch(/canonical base64url/);
    }
    const p = b64url(JSON.stringify(claims()));
    for (const kid of ['k', 'kk', 'kkk', 'kkkk']) {
      const hk = b64url(JSON.stringify({ ...HEADER, kid }));
      if (hk.length % 4 === 0) continue;
      expect(await agentCode(signSegments(keys.privateJwk, hk, p))).toBe('ok');
      expect(await agentCode(signSegments(keys.privateJwk, nonCanonical(hk), p))).toMatch(/canonical base64url/);
    }
    expect(h.length % 4).toBe(0); // the standard header has no unused bits: nothing to respell there
  });

  it.each([
    ['padding on the signature', (t: string) => `${t}==`],
    ['padding on the header', (t: string) => t.replace('.', '==.')],
    ['a space inside', (t: string) => `${t.slice(0, 10)} ${t.slice(10)}`],
    ['a newline inside', (t: string) => `${t.slice(0, 10)}\n${t.slice(10)}`],
    ['a tab at the end', (t: string) => `${t}\t`],
    ['standard base64 + in the signature', (t: string) => `${t.slice(0, t.lastIndexOf('.') + 1)}+${t.slice(t.lastIndexOf('.') + 2)}`],
    ['standard base64 / in the payload', (t: string) => `${t.slice(0, t.indexOf('.') + 1)}/${t.slice(t.indexOf('.') + 2)}`],
    ['a non-ASCII character', (t: string) => `${t.slice(0, 5)}é${t.slice(6)}`],
    ['a signature one character short', (t: string) => t.slice(0, -1)],
  ])('refuses %s', async (_name, change) => {
    const t = signClaims(keys.privateJwk, { ...HEADER, kid: 'k' }, claims());
    const changed = change(t);
    expect(changed).not.toBe(t);
    expect(await agentCode(changed)).toMatch(/^token_invalid/);
  });

  it('canonicalBase64url agrees with re-encoding, for every last character of every short length', () => {
    const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    for (let n = 1; n <= 7; n++) {
      const canonical = randomBytes(n).toString('base64url');
      for (const c of ALPHABET) {
        const s = canonical.slice(0, -1) + c;
        expect(canonicalBase64url(s, 0, s.length), s).toBe(Buffer.from(s, 'base64url').toString('base64url') === s);
      }
    }
    for (const bad of ['', 'A', 'AAAAA', 'AA=', 'A A', 'AA.', '+A']) expect(canonicalBase64url(bad, 0, bad.length), bad).toBe(false);
  });

  it('decodeJws returns the header and payload of a token of the typ asked for', () => {
    const t = signClaims(keys.privateJwk, HEADER, claims());
    expect(decodeJws(t, 'agent+jwt')).toMatchObject({ header: HEADER, payload: { sub: 'bot' } });
    expect(decodeJws(t, 'host+jwt')).toBe('token typ must be "host+jwt"');
  });
});

describe('accepted headers are remembered by their exact segment', () => {
  it('a header accepted for one typ is still refused for another, and a changed header is checked anew', () => {
    const h = b64url(JSON.stringify({ alg: 'EdDSA', typ: 'agent+jwt' }));
    const p = b64url(JSON.stringify({ sub: 'a' }));
    const token = `${h}.${p}.${'A'.repeat(86)}`;
    for (let i = 0; i < 2; i++) {
      expect(decodeJws(token, 'agent+jwt')).toMatchObject({ header: { typ: 'agent+jwt' } });
      expect(decodeJws(token, 'host+jwt')).toBe('token typ must be "host+jwt"');
    }
    const withCrit = `${b64url(JSON.stringify({ alg: 'EdDSA', typ: 'agent+jwt', crit: ['x'] }))}.${p}.${'A'.repeat(86)}`;
    expect(decodeJws(withCrit, 'agent+jwt')).toMatch(/crit/);
    const header = (decodeJws(token, 'agent+jwt') as { header: object }).header;
    expect(Object.isFrozen(header)).toBe(true);
  });
});
