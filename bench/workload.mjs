// The bench's load: a 1 KiB JSON body with three constrained fields, one fresh single-use token per request,
// the policy that grants it, and closed-loop runs with wrk (C, cheap enough to leave the proxy's core to the proxy).
import { spawn } from 'node:child_process';
import { createPrivateKey, sign } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createAgentSigner } from '../dist/identity/client.js';
import { generateAgentKeyPair } from '../dist/identity/keys.js';
import { hasTaskset, LOAD_CPU, ROOT } from './procs.mjs';

export const bot = await generateAgentKeyPair();
export const signer = await createAgentSigner(bot.privateJwk, 'bench-bot');

// Distinct bodies (cycled): the audit trail compresses what it records, and identical bodies would flatter that.
const WORDS =
  'invoice customer payment due amount total order shipped pending approved refund account billing period monthly annual discount tax net gross'.split(' ');
function makeBody(i) {
  const base = { customerId: `c-${100 + i}`, amount: (i * 37) % 1000, currency: i % 2 ? 'USD' : 'EUR', customer: { tier: 'gold' } };
  const pad = 1024 - JSON.stringify({ ...base, note: '' }).length;
  let note = '';
  while (note.length < pad) note += `${WORDS[Math.floor(Math.random() * WORDS.length)]} `;
  return JSON.stringify({ ...base, note: note.slice(0, pad) });
}
export const bodies = Array.from({ length: 512 }, (_, i) => makeBody(i));

export const policy = `version: 1
provider: { name: bench, issuer: https://bench.example.com }
capabilities:
  - { name: createInvoice, method: POST, path: /invoices }
agents:
  - { id: bench-bot, name: bench-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${bot.publicJwk.x}" } }
grants:
  - agent: bench-bot
    capability: createInvoice
    status: active
    constraints:
      amount: { max: 1000 }
      currency: { in: [USD, EUR] }
      customer.tier: { not_in: [internal] }
`;

// Minted with node:crypto synchronously, off the clock; the sidecar checks them like any other.
const signingKey = createPrivateKey({ key: bot.privateJwk, format: 'jwk' });
const header = Buffer.from(JSON.stringify({ alg: 'EdDSA', typ: 'agent+jwt' })).toString('base64url');
let minted = 0;
/**
 * `atSeconds(i)`, when given: when token i will be used, in seconds from now, so a long open-loop run's tokens
 * are not expired when their turn comes (iat 10 s before it, well within the 60 s lifetime).
 */
export function mint(n, atSeconds) {
  const out = new Array(n);
  const now = Math.floor(Date.now() / 1000);
  for (let i = 0; i < n; i++) {
    const iat = atSeconds ? now + Math.floor(atSeconds(i)) - 10 : now;
    const claims = { sub: 'bench-bot', iss: signer.thumbprint, aud: 'createInvoice', iat, exp: iat + 60, jti: `b${iat}-${minted++}` };
    const input = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    out[i] = `${input}.${sign(null, Buffer.from(input), signingKey).toString('base64url')}`;
  }
  return out;
}

/** Raw HTTP/1.1 requests (for the open-loop generator): token i and body i, pre-built. */
export function rawRequests(host, tokens) {
  return tokens.map((token, i) => {
    const body = bodies[i % bodies.length];
    return Buffer.from(
      `POST /invoices HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\nauthorization: Bearer ${token}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
}

/**
 * Closed loop at saturation: wrk on LOAD_CPU, `connections` connections, one thread, each request with the
 * next token of a file minted for this run (a replay would show as a non-2xx and fail the run).
 */
export async function wrk(dir, url, { seconds, connections, maxRps, checksTokens = true }) {
  // A target that checks no token (the app, the bare proxies) may see a token twice: a smaller file, cycled.
  const count = checksTokens ? Math.ceil(seconds * maxRps) : 4096;
  const tokens = join(dir, `tokens-${minted}.txt`);
  await writeFile(tokens, `${mint(count).join('\n')}\n`);
  const bodyFile = join(dir, 'bodies.txt');
  await writeFile(bodyFile, `${bodies.join('\n')}\n`);
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', join(ROOT, 'bench/wrk.lua'), `${url}/invoices`, '--', tokens, bodyFile];
  const [file, argv] = hasTaskset ? ['taskset', ['-c', LOAD_CPU, 'wrk', ...args]] : ['wrk', args];
  const out = await new Promise((resolve, reject) => {
    const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    child.stdout.on('data', (d) => (text += d));
    child.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
  });
  const line = out.split('\n').find((l) => l.startsWith('{"requests"'));
  if (!line) throw new Error(`wrk printed no summary: ${out}`);
  const r = JSON.parse(line);
  const bad = r.status + r.connect + r.read + r.write + r.timeout;
  if (bad) throw new Error(`${url}: ${JSON.stringify(r)} (non-2xx or socket errors; replays: raise BENCH_MAX_RPS)`);
  if (checksTokens && r.requests >= count) throw new Error(`${url}: used every token; raise BENCH_MAX_RPS`);
  return { requests: r.requests, rps: r.requests / (r.duration_us / 1e6), p50: r.p50 / 1000, p99: r.p99 / 1000 };
}
