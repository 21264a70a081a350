import { describe, expect, it } from 'vitest';
import { openBatch, type AuditBatch } from '../../../src/audit/crypto.js';
import type { AuditEntry } from '../../../src/audit/entry.js';
import {
  needsRedaction,
  redact,
  redactForReview,
  REDACTED,
  SECRET_KEY_PATTERN,
  SECRET_NAMES,
  SECRET_PREFIXES,
  SECRET_SUFFIXES,
} from '../../../src/audit/redact.js';
import { isSecretKey, memoryTrail, rawJson } from '../../support/audit.js';
import { expectLinear } from '../../support/linear.js';

/** The documented rule, written out plainly: the regex must agree with it on every key. */
function documentedRule(key: string): boolean {
  const k = key.replace(/[-_. ]/g, '').replace(/[A-Z]/g, (c) => c.toLowerCase());
  return SECRET_NAMES.includes(k) || SECRET_SUFFIXES.some((s) => k.endsWith(s)) || SECRET_PREFIXES.some((p) => k.startsWith(p));
}

const SECRETS = [
  'password',
  'Password',
  'PASSWD',
  'pwd',
  'passphrase',
  'secret',
  'client_secret',
  'clientSecret',
  'Client-Secret',
  'webhook.secret',
  'token',
  'access_token',
  'refreshToken',
  'id_token',
  'ID-TOKEN',
  'auth_token',
  'csrf_token',
  'x-csrf-token',
  'api_key',
  'apiKey',
  'API-KEY',
  'x-api-key',
  'apikeys',
  'private_key',
  'privateKey',
  'aws_secret_access_key',
  'credential',
  'credentials',
  'db_password',
  'user_passwd',
  'bearer',
  'Bearer',
  'authorization',
  'Authorization',
  'proxy-authorization',
  'auth',
  'AUTH',
  'cookie',
  'Set-Cookie',
  'session',
  'session_id',
  'sessionId',
  'jwt',
  'pass',
  '_password_',
  ' token ',
  // Key material the substring rule used to hide, under its common names.
  'key',
  'ssh_key',
  'sshKey',
  'encryption_key',
  'signing_key',
  'hmac_key',
  'master_key',
  'secret_key_base',
  'privateKeyPem',
  'private_key_pem',
  'private_key_id',
  'privkey',
  'client_key',
  'auth_header',
  'x-auth',
  'creds',
  'aws_creds',
];
const ORDINARY = [
  'author',
  'authorId',
  'authority',
  'keyword',
  'keywords',
  'monkey',
  'hotkey',
  'primary_key',
  'public_key',
  'publicKey',
  'sort_key',
  'idempotency_key',
  'max_tokens',
  'tokens',
  'token_type',
  'tokenizer',
  'token_count',
  'secret_name',
  'password_hint',
  'auth_method',
  'authenticated',
  'sessions',
  'cookies_accepted',
  'amount',
  'to',
  'body',
  'passenger',
  'access_key_id',
  'credentialed',
  '',
  // Non-ASCII look-alikes are not folded (the Kelvin sign K, the long s): the rule is ASCII, like the regex's `i`.
  'api\u212Aey',
  'pa\u017F\u017Fword',
];

describe('the secret-key rule', () => {
  it.each(SECRETS)('%j is a secret', (k) => {
    expect(isSecretKey(k)).toBe(true);
    expect(documentedRule(k)).toBe(true);
  });

  it.each(ORDINARY)('%j is an ordinary field (shown to reviewers, kept in the audit trail)', (k) => {
    expect(isSecretKey(k)).toBe(false);
    expect(documentedRule(k)).toBe(false);
  });

  it('the regex (which the trail combines with audit.redact patterns) implements the documented rule', () => {
    const parts = ['', 'x', 'my', 'Auth', 'key', 'KEY', 'token', 's', '-', '_', '.', ' ', 'api', 'secret', 'pass', 'word', 'or', '\n', 'é', 'K'];
    let n = 0;
    for (const a of parts)
      for (const b of parts)
        for (const c of parts) {
          const k = a + b + c;
          expect(isSecretKey(k), JSON.stringify(k)).toBe(documentedRule(k));
          n++;
        }
    for (const w of [...SECRET_NAMES, ...SECRET_SUFFIXES, ...SECRET_PREFIXES]) {
      const spaced = [...w].join('_').toUpperCase();
      expect(isSecretKey(spaced)).toBe(true);
      expect(SECRET_KEY_PATTERN.test(spaced)).toBe(true);
    }
    expect(n).toBe(parts.length ** 3);
  });

  it('stays linear on long keys (it runs on keys an agent chose; a first draft backtracked: ~30 s on 200 000 separators)', async () => {
    const keys: ((n: number) => string)[] = [
      (n) => '_'.repeat(n) + 'x',
      (n) => '_'.repeat(n) + 'token',
      (n) => ('t' + '_'.repeat(50)).repeat(n / 50),
      (n) => 'pass' + '_'.repeat(n) + 'x',
    ];
    for (const key of keys) {
      expect(isSecretKey(key(200_000))).toBe(documentedRule(key(200_000)));
      await expectLinear(
        (n) => {
          const k = key(n);
          return () => isSecretKey(k);
        },
        200_000,
        key(8),
      );
    }
  });

  it('combined with an extra pattern the way the trail does, keeps both', () => {
    const combined = new RegExp(`${SECRET_KEY_PATTERN.source}|ssn`, 'i');
    expect(['api_key', 'SSN', 'customer_ssn'].map((k) => combined.test(k))).toEqual([true, true, true]);
    expect(['author', 'keyword'].map((k) => combined.test(k))).toEqual([false, false]);
  });
});

describe('redact / redactForReview', () => {
  it('copies with secret values replaced at any depth, ordinary fields untouched', () => {
    expect(redact({ author: 'Ann', keyword: 'k', apiKey: 'sk', list: [{ refresh_token: 't', n: 1 }] })).toEqual({
      author: 'Ann',
      keyword: 'k',
      apiKey: REDACTED,
      list: [{ refresh_token: REDACTED, n: 1 }],
    });
  });

  it('tells the reviewer the path of every hidden value', () => {
    const r = redactForReview({ a: { password: 'p', 'x.y': { token: 't' } }, items: [{ api_key: 'k' }, { ok: 1 }], author: 'Ann' });
    expect(r.value).toEqual({ a: { password: REDACTED, 'x.y': { token: REDACTED } }, items: [{ api_key: REDACTED }, { ok: 1 }], author: 'Ann' });
    expect(r.redacted).toEqual(['a.password', 'a["x.y"].token', 'items[0].api_key']);
    expect(redactForReview([{ secret: 1 }]).redacted).toEqual(['[0].secret']);
    expect(redactForReview('text').redacted).toEqual([]);
  });

  it('still takes an extra pattern or predicate', () => {
    expect(redact({ ssn: '1', author: 'a' }, /ssn/i)).toEqual({ ssn: REDACTED, author: 'a' });
    expect(needsRedaction({ author: 'a', keyword: 'k' })).toBe(false);
    expect(needsRedaction({ author: 'a' }, (k) => k === 'author')).toBe(true);
  });
});

describe('the audit trail uses the same rule', () => {
  it('keeps verified bytes whose keys only look like secrets by substring (author, keyword); redacts exact names', async () => {
    const { trail, keys, lines } = memoryTrail();
    await trail.start();

    const base = { agentName: 'bot', capability: 'c', result: 'success' as const, jti: null, durationMs: 0, method: 'POST', path: '/', status: 200 };
    await trail.record({ ...base, id: 'e1', agentId: 'bot', timestamp: 1, requestId: 'r1', args: rawJson('{"author":"Ann", "keyword":"k"}') });
    await trail.record({ ...base, id: 'e2', agentId: 'bot', timestamp: 2, requestId: 'r2', args: rawJson('{"author":"Ann","meta":{"Client-Secret":"s"}}') });
    await trail.record({ ...base, id: 'e3', agentId: 'bot', timestamp: 3, requestId: 'r3', args: { keyword: 'k', password: 'p' } });
    await trail.drain(2_000);
    const entries = lines.flatMap((l) => openBatch<AuditEntry>(JSON.parse(l.toString()) as AuditBatch, keys));
    const args = Object.fromEntries(entries.map((e) => [e.id, e.args]));
    expect(args.e1).toEqual({ author: 'Ann', keyword: 'k' });
    expect(args.e2).toEqual({ author: 'Ann', meta: { 'Client-Secret': REDACTED } });
    expect(args.e3).toEqual({ keyword: 'k', password: REDACTED });
  });
});
