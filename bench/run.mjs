// make bench: the same load against (a) the app, (b) bare proxies, (c) the sidecar.
// Each server is its own process so its peak RSS is its own. Ratios, not absolute
// numbers, are the result: they were measured in the same run on the same machine.
import { spawn } from 'node:child_process';
import { createPublicKey, verify as nodeVerify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { compactVerify } from 'jose';
import { createAgentSigner } from '../dist/identity/client.js';
import { generateAgentKeyPair, importAgentKey } from '../dist/identity/keys.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 20000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

const children = [];
function start(args, match) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = match.exec(out);
      if (m) resolve({ child, url: m[1].startsWith('http') ? m[1] : `http://127.0.0.1:${m[1]}` });
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${out}`)));
  });
}
function peakRssMiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
}

// The load: a 1 KiB JSON body with three constrained fields, one fresh token per request.
const bot = await generateAgentKeyPair();
const signer = await createAgentSigner(bot.privateJwk, 'bench-bot');
const base = { customerId: 'c-100', amount: 500, currency: 'USD', customer: { tier: 'gold' } };
const pad = 1024 - JSON.stringify({ ...base, note: '' }).length;
const body = JSON.stringify({ ...base, note: 'n'.repeat(pad) });
const policy = `version: 1
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
const dir = await mkdtemp(join(tmpdir(), 'agents-chain-bench-'));
await writeFile(join(dir, 'policy.yaml'), policy);

async function mint(n) {
  const out = new Array(n);
  for (let i = 0; i < n; i++) out[i] = await signer.sign('createInvoice');
  return out;
}

async function load(url, amount) {
  const tokens = await mint(amount + CONNECTIONS * 2);
  let next = 0;
  const result = await autocannon({
    url: `${url}/invoices`,
    connections: CONNECTIONS,
    amount,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    requests: [{
      setupRequest(req) {
        req.headers = { ...req.headers, authorization: `Bearer ${tokens[next++]}` };
        return req;
      },
    }],
  });
  if (result.non2xx || result.errors) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result;
}

async function measure(name, target) {
  await load(target.url, WARMUP);
  const r = await load(target.url, REQUESTS);
  return { name, rps: r.requests.total / r.duration, p50: r.latency.p50, p99: r.latency.p99, rss: peakRssMiB(target.child.pid) };
}

// One Ed25519 verification, through jose (what the sidecar runs) and node:crypto directly.
async function verifyCost() {
  const token = await signer.sign('createInvoice');
  const key = await importAgentKey(bot.publicJwk);
  const n = 3000;
  for (let i = 0; i < 300; i++) await compactVerify(token, key, { algorithms: ['EdDSA'] });
  let t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await compactVerify(token, key, { algorithms: ['EdDSA'] });
  const joseUs = Number(process.hrtime.bigint() - t) / n / 1000;
  const [h, p, s] = token.split('.');
  const pub = createPublicKey({ key: bot.publicJwk, format: 'jwk' });
  const data = Buffer.from(`${h}.${p}`);
  const sig = Buffer.from(s, 'base64url');
  t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) nodeVerify(null, data, pub, sig);
  const nodeUs = Number(process.hrtime.bigint() - t) / n / 1000;
  return { joseUs, nodeUs };
}

try {
  const app = await start(['bench/app.mjs', '0'], /listening (\d+)/);
  const bareUndici = await start(['bench/bare-proxy.mjs', 'undici', '0', app.url], /listening (\d+)/);
  const bareHp3 = await start(['bench/bare-proxy.mjs', 'http-proxy-3', '0', app.url], /listening (\d+)/);
  // info level: the "sidecar listening" line says where it is; allowed calls log nothing at info.
  const sidecar = await start(
    ['dist/cli/main.js', 'serve', '--policy', join(dir, 'policy.yaml'), '--upstream', app.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'],
    /"listen":"(http:\/\/[^"]+)"/,
  );

  const rows = [];
  rows.push(await measure('(a) app directly', app));
  rows.push(await measure('(b) bare proxy, undici', bareUndici));
  rows.push(await measure("(b') bare proxy, http-proxy-3", bareHp3));
  rows.push(await measure('(c) agents-chain sidecar', sidecar));
  const cost = await verifyCost();

  const fmt = (n, d = 0) => n.toFixed(d);
  console.log(`\nagents-chain bench — ${REQUESTS} POSTs of a ${Buffer.byteLength(body)}-byte JSON body, 3 constraints, ${CONNECTIONS} connections, node ${process.version}\n`);
  console.log('| target | req/s | p50 ms | p99 ms | peak RSS MiB |');
  console.log('|---|---:|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.name} | ${fmt(r.rps)} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${fmt(r.rss, 1)} |`);
  const [a, b, , c] = rows;
  console.log('\n| ratio | req/s | p50 | p99 | peak RSS |');
  console.log('|---|---:|---:|---:|---:|');
  console.log(`| c/b (sidecar vs bare undici proxy) | ${fmt(c.rps / b.rps, 2)} | ${fmt(c.p50 / b.p50, 2)} | ${fmt(c.p99 / b.p99, 2)} | ${fmt(c.rss / b.rss, 2)} |`);
  console.log(`| c/a (sidecar vs app directly) | ${fmt(c.rps / a.rps, 2)} | ${fmt(c.p50 / a.p50, 2)} | ${fmt(c.p99 / a.p99, 2)} | ${fmt(c.rss / a.rss, 2)} |`);
  console.log(`\nOne Ed25519 verification: ${fmt(cost.joseUs, 1)} µs through jose (WebCrypto), ${fmt(cost.nodeUs, 1)} µs with node:crypto directly.`);
} finally {
  for (const c of children) c.kill('SIGKILL');
}
