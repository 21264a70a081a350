// make bench: the same load against (a) the app, (b) bare proxies, (c) the sidecar.
// Each server is its own process so its peak RSS is its own. Ratios, not absolute
// numbers, are the result: they were measured in the same run on the same machine.
import { spawn } from 'node:child_process';
import { createPrivateKey, createPublicKey, randomBytes, sign, verify as nodeVerify } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { compactVerify } from 'jose';
import { loadVerifier } from '../dist/auth/ed25519-verify.js';
import { REPLAY_NAMESPACE } from '../dist/auth/replay-redis.js';
import { createAgentSigner } from '../dist/identity/client.js';
import { generateAgentKeyPair, importAgentKey } from '../dist/identity/keys.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
// Upper bound on what any target can serve per second here; tokens are minted up front.
const MAX_RPS = Number(process.env.BENCH_MAX_RPS ?? 8000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
// Each ratio comes from blocks of adjacent runs (x y y x), one block per round; medians over rounds are reported.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);

/**
 * A Redis no sidecar has checked is a possible loss of the replay window (fail closed: tokens issued up to
 * 30 s after the sidecar found it are refused for two minutes), and the bench mints its tokens up front.
 * So the bench Redis is marked as checked long ago, as test/support/global-setup.ts does for the test
 * Redis: an old epoch marker and the server key naming this Redis process. Never do this to a Redis in service.
 */
async function markReplayWindowIntact(url) {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    const runId = /^run_id:(\S+)/m.exec(await redis.info('server'))?.[1];
    if (!runId) throw new Error(`${url}: INFO server named no run_id`);
    const tag = `${REPLAY_NAMESPACE}:{0}:`;
    const written = Number((await redis.get(`${tag}epoch`))?.split('-')[0]);
    if (!(written <= Date.now() - 120_000)) await redis.set(`${tag}epoch`, `${Date.now() - 1_200_000}-00000000`);
    await redis.set(`${tag}server`, runId);
  } finally {
    redis.disconnect();
  }
}

const children = [];
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});
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
// CPU seconds a process has used (user + system), from /proc: steadier than req/s on a shared VM.
function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
// The same per thread: the main thread, and the others summed by name (Node 24 names its pool "libuv-worker").
function cpuByThread(pid) {
  const out = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      // Node 20 names every thread "node": the main thread is the one whose id is the process id.
      const comm = tid === String(pid) ? 'main' : readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const fields = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
      out[`${comm} user`] = (out[`${comm} user`] ?? 0) + Number(fields[11]) / 100;
      out[`${comm} sys`] = (out[`${comm} sys`] ?? 0) + Number(fields[12]) / 100;
    } catch {
      /* thread gone */
    }
  }
  return out;
}
function peakRssMiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
}

// The load: a 1 KiB JSON body with three constrained fields, one fresh token per request.
const bot = await generateAgentKeyPair();
const signer = await createAgentSigner(bot.privateJwk, 'bench-bot');
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
const bodies = Array.from({ length: 512 }, (_, i) => makeBody(i));
const body = bodies[0];
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

// Minted with node:crypto synchronously (fast, off the clock); the sidecar checks them like any other.
const signingKey = createPrivateKey({ key: bot.privateJwk, format: 'jwk' });
const header = Buffer.from(JSON.stringify({ alg: 'EdDSA', typ: 'agent+jwt' })).toString('base64url');
function mint(n) {
  const out = new Array(n);
  const iat = Math.floor(Date.now() / 1000);
  for (let i = 0; i < n; i++) {
    const claims = {
      sub: 'bench-bot',
      iss: signer.thumbprint,
      aud: 'createInvoice',
      iat,
      exp: iat + 60,
      jti: `b${iat}-${i}-${Math.random().toString(36).slice(2)}`,
    };
    const input = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    out[i] = `${input}.${sign(null, Buffer.from(input), signingKey).toString('base64url')}`;
  }
  return out;
}

/** `rate`: a fixed request rate (all connections together) instead of as fast as the target answers. */
async function load(url, seconds, rate) {
  // Wall clock around the run: autocannon's own per-second samples are too coarse for short runs.
  const tokens = mint(Math.ceil(seconds * MAX_RPS));
  let next = 0;
  const t0 = process.hrtime.bigint();
  const result = await autocannon({
    url: `${url}/invoices`,
    connections: CONNECTIONS,
    duration: seconds,
    ...(rate ? { overallRate: rate } : {}),
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    requests: [
      {
        setupRequest(req) {
          // Only the sidecar checks tokens; if it ever got a reused one the run fails on non-2xx.
          const n = next++;
          req.headers = { ...req.headers, authorization: `Bearer ${tokens[n % tokens.length]}` };
          req.body = bodies[n % bodies.length];
          return req;
        },
      },
    ],
  });
  const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
  if (result.non2xx || result.errors)
    throw new Error(`${url}: ${result.non2xx} non-2xx (${JSON.stringify(result.statusCodeStats)}), ${result.errors} errors (if replays: raise BENCH_MAX_RPS)`);
  return { ...result, rps: result.requests.total / elapsed };
}

async function measure(name, target) {
  await load(target.url, WARMUP_SECONDS);
  const cpu0 = cpuSeconds(target.child.pid);
  const r = await load(target.url, SECONDS);
  const cpuUs = ((cpuSeconds(target.child.pid) - cpu0) / r.requests.total) * 1e6;
  return { name, cpuUs, rps: r.rps, p50: r.latency.p50, p99: r.latency.p99, rss: peakRssMiB(target.child.pid) };
}

function median(xs) {
  const v = [...xs].sort((p, q) => p - q);
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/**
 * BENCH_AB=d (or e): that sidecar and (c) under the same fixed rate (BENCH_AB_RATE, 1000 req/s each) at
 * the same time, so the VM's drift hits both alike; prints the CPU per call of each per window and the
 * median ratio, then exits. A steadier reading of a small cost than throughput at saturation.
 */
async function compareAtFixedRate(x, y) {
  const rate = Number(process.env.BENCH_AB_RATE ?? 1000);
  const ratios = [];
  console.log(`\n${x.name} vs ${y.name}, both at ${rate} req/s at once, ${SECONDS} s windows (the first is warm-up)\n`);
  console.log('| window | CPU µs/call x | CPU µs/call c | ratio |');
  console.log('|---|---:|---:|---:|');
  const perThread = [];
  for (let w = 0; w <= ROUNDS; w++) {
    const cx = cpuSeconds(x.target.child.pid);
    const cy = cpuSeconds(y.target.child.pid);
    const tx = cpuByThread(x.target.child.pid);
    const ty = cpuByThread(y.target.child.pid);
    const [rx, ry] = await Promise.all([load(x.target.url, SECONDS, rate), load(y.target.url, SECONDS, rate)]);
    const ux = ((cpuSeconds(x.target.child.pid) - cx) / rx.requests.total) * 1e6;
    const uy = ((cpuSeconds(y.target.child.pid) - cy) / ry.requests.total) * 1e6;
    if (w === 0) continue;
    const [tx1, ty1] = [cpuByThread(x.target.child.pid), cpuByThread(y.target.child.pid)];
    const per = (a, b, n) => Object.fromEntries(Object.keys(a).map((k) => [k, (((a[k] ?? 0) - (b[k] ?? 0)) / n) * 1e6]));
    perThread.push([per(tx1, tx, rx.requests.total), per(ty1, ty, ry.requests.total)]);
    ratios.push(ux / uy);
    console.log(`| ${w} | ${ux.toFixed(0)} | ${uy.toFixed(0)} | ${(ux / uy).toFixed(3)} |`);
  }
  // Where the difference goes: CPU µs per call by thread name, medians over the windows.
  console.log('\n| thread | µs/call x | µs/call c |\n|---|---:|---:|');
  for (const name of new Set(perThread.flatMap(([a, b]) => [...Object.keys(a), ...Object.keys(b)]))) {
    console.log(`| ${name} | ${median(perThread.map(([a]) => a[name] ?? 0)).toFixed(1)} | ${median(perThread.map(([, b]) => b[name] ?? 0)).toFixed(1)} |`);
  }
  console.log(`\nmedian CPU ratio: ${median(ratios).toFixed(3)}`);
  process.exit(0);
}

// One Ed25519 verification: through jose, node:crypto directly, and the sidecar's verifier (libsodium where it loads).
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
  const { verifier } = loadVerifier('libsodium');
  for (let i = 0; i < 300; i++) verifier.verify(data, sig, key);
  t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) verifier.verify(data, sig, key);
  const sidecarUs = Number(process.hrtime.bigint() - t) / n / 1000;
  return { joseUs, nodeUs, sidecarUs, verifier: verifier.name };
}

try {
  const app = await start(['bench/app.mjs', '0'], /listening (\d+)/);
  const bareUndici = await start(['bench/bare-proxy.mjs', 'undici', '0', app.url], /listening (\d+)/);
  const bareHp3 = await start(['bench/bare-proxy.mjs', 'http-proxy-3', '0', app.url], /listening (\d+)/);
  // info level: the "sidecar listening" line says where it is; allowed calls log nothing at info.
  const serve = (extra = [], cli = 'dist/cli/main.js') =>
    start(
      [cli, 'serve', '--policy', join(dir, 'policy.yaml'), '--upstream', app.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', ...extra],
      /"listen":"(http:\/\/[^"]+)"/,
    );
  // (c) is compared with every other target, and a sidecar's speed depends on what it has served (its
  // in-memory replay window holds every token id of the last two minutes: at full load, hundreds of
  // thousands, which the garbage collector walks). So each block gets its own (c), with the same history as
  // the target it is compared with. The (c) row is the median over all of them.
  // BENCH_BASELINE=<checkout>: (f), the sidecar built in another checkout (an earlier commit: `make build` there),
  // to compare a change with what it replaces: BENCH_AB=f runs (f) and (c) at the same fixed rate at once.
  const baseline = process.env.BENCH_BASELINE;
  const blocksWithC = [['c', 'b'], ['c', "b'"], ['d', 'c'], ['e', 'c'], ['c', 'a'], ...(baseline ? [['f', 'c']] : [])];
  const sidecars = new Map();
  for (const [x, y] of blocksWithC) sidecars.set(`${x}/${y}`, await serve());

  // (d) the same sidecar with the encrypted audit trail on: spool on disk, batches exported to a file.
  const auditKey = join(dir, 'audit.key');
  await writeFile(auditKey, `${randomBytes(32).toString('base64')}\n`);
  const audited = await serve(['--audit-key-file', auditKey, '--audit-spool', join(dir, 'spool'), '--audit-export', `file:${join(dir, 'audit.jsonl')}`]);

  // (e) the sidecar with its replay window in Redis (127.0.0.1:6379, a prefix of its own), as replicas run it.
  const benchRedis = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  await markReplayWindowIntact(benchRedis);
  const redisBacked = await serve(['--redis', benchRedis, '--redis-prefix', `agents-chain-bench:{${randomBytes(6).toString('hex')}}:`]);

  const before = baseline ? await serve([], join(baseline, 'dist/cli/main.js')) : undefined;

  const targets = [
    ['(a) app directly', app],
    ['(b) bare proxy, http-proxy-3', bareHp3],
    ["(b') bare proxy, undici (buffered body, like the sidecar)", bareUndici],
    ['(c) agents-chain sidecar', sidecars.get('d/c')],
    ['(d) sidecar + audit trail', audited],
    ['(e) sidecar, replay window in Redis', redisBacked],
    ...(before ? [['(f) sidecar built from BENCH_BASELINE', before]] : []),
  ];
  // This VM's speed drifts under sustained load, and not linearly: a target measured right after the
  // 20k req/s app runs in other conditions than one measured in a quiet stretch. So each ratio comes from
  // its own block of adjacent runs, x y y x (a linear drift within the block weighs both alike), and the
  // median over rounds of the per-block ratios is reported. A target's table row is the median of all its runs.
  // BENCH_ONLY=c,d measures a subset (a block runs only when both of its targets are chosen).
  const only = process.env.BENCH_ONLY?.split(',');
  const byKey = new Map(targets.map(([name, target]) => [/^\(([^)]+)\)/.exec(name)[1], { name, target }]));
  const chosen = (k) => !only || only.includes(k);
  const cFor = (block) => ({ ...byKey.get('c'), target: sidecars.get(block) });
  if (process.env.BENCH_AB) await compareAtFixedRate(byKey.get(process.env.BENCH_AB), cFor(`${process.env.BENCH_AB}/c`));
  const blocks = blocksWithC.filter(([x, y]) => chosen(x) && chosen(y));
  const targetOf = (k, block) => (k === 'c' ? cFor(block) : byKey.get(k));
  const runs = new Map(targets.map(([name]) => [name, []]));
  const blockRounds = new Map(blocks.map(([x, y]) => [`${x}/${y}`, []]));
  const mean = (p, q) => ({ rps: (p.rps + q.rps) / 2, cpuUs: (p.cpuUs + q.cpuUs) / 2, p50: (p.p50 + q.p50) / 2, p99: (p.p99 + q.p99) / 2 });
  // Every chosen target is warmed up once first (JIT, heap sizes), so the first block is not measured cold.
  const warm = new Set(blocks.flatMap(([x, y]) => [x, y].map((k) => targetOf(k, `${x}/${y}`).target.url)));
  for (const url of warm) await load(url, 2 * WARMUP_SECONDS);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [x, y] of blocks) {
      const got = [];
      for (const k of [x, y, y, x]) {
        const { name, target } = targetOf(k, `${x}/${y}`);
        const r = await measure(name, target);
        process.stderr.write(`round ${round + 1}, block ${x}/${y}: ${name}: ${r.rps.toFixed(0)} req/s, ${r.cpuUs.toFixed(0)} µs CPU/req\n`);
        runs.get(name).push(r);
        got.push(r);
      }
      blockRounds.get(`${x}/${y}`).push({ x: mean(got[0], got[3]), y: mean(got[1], got[2]) });
    }
  }
  const rows = targets.map(([name, target]) => {
    const rs = runs.get(name);
    if (!rs.length) return { name, cpuUs: NaN, rps: NaN, p50: NaN, p99: NaN, rss: NaN };
    const rss = name.startsWith('(c)')
      ? median(blocks.filter((b) => b.includes('c')).map(([x, y]) => peakRssMiB(sidecars.get(`${x}/${y}`).child.pid)))
      : peakRssMiB(target.child.pid);
    return {
      name,
      rps: median(rs.map((r) => r.rps)),
      cpuUs: median(rs.map((r) => r.cpuUs)),
      p50: median(rs.map((r) => r.p50)),
      p99: median(rs.map((r) => r.p99)),
      rss,
    };
  });
  /** Median over rounds of the block's x/y ratio for one field. */
  const ratio = (block, field) => {
    const rs = blockRounds.get(block);
    return rs?.length ? median(rs.map((r) => r.x[field] / r.y[field])) : NaN;
  };
  const perRound = (block) => (blockRounds.get(block) ?? []).map((r) => (r.x.rps / r.y.rps).toFixed(2)).join(', ');
  const cost = await verifyCost();

  const fmt = (n, d = 0) => n.toFixed(d);
  console.log(
    `\nagents-chain bench — ${ROUNDS} rounds; each ratio from its own blocks of adjacent runs (x y y x) of ${SECONDS} s of POSTs with ${bodies.length} distinct ${Buffer.byteLength(body)}-byte JSON bodies, 3 constraints, ${CONNECTIONS} connections, node ${process.version}\n`,
  );
  console.log('| target | req/s | p50 ms | p99 ms | CPU µs/req | peak RSS MiB |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.name} | ${fmt(r.rps)} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${fmt(r.cpuUs)} | ${fmt(r.rss, 1)} |`);
  const c = rows[3];
  console.log('\n| ratio (median of per-block ratios) | req/s | p50 | p99 | CPU µs/req | peak RSS | req/s per round |');
  console.log('|---|---:|---:|---:|---:|---:|---|');
  // Peak RSS of the block's own two processes (each (c) has served exactly what its counterpart has, or more when the counterpart is also in another block).
  const rssRatio = (block) => {
    const [x, y] = block.split('/');
    const pid = (k) => targetOf(k, block).target.child.pid;
    return blockRounds.get(block)?.length ? peakRssMiB(pid(x)) / peakRssMiB(pid(y)) : NaN;
  };
  const line = (label, block) =>
    console.log(
      `| ${label} | ${fmt(ratio(block, 'rps'), 2)} | ${fmt(ratio(block, 'p50'), 2)} | ${fmt(ratio(block, 'p99'), 2)} | ${fmt(ratio(block, 'cpuUs'), 2)} | ${fmt(rssRatio(block), 2)} | ${perRound(block)} |`,
    );
  line('c/b (sidecar vs bare http-proxy-3)', 'c/b');
  line("c/b' (sidecar vs bare undici)", "c/b'");
  line('d/c (audit on vs off; target >= 0.95)', 'd/c');
  line('e/c (Redis vs in-memory replay store; target >= 0.90)', 'e/c');
  line('c/a (sidecar vs app directly)', 'c/a');
  if (before) line('f/c (BENCH_BASELINE vs this checkout)', 'f/c');
  const cpuCost = (block) => {
    const rs = blockRounds.get(block) ?? [];
    return median(rs.map((r) => r.x.cpuUs - r.y.cpuUs));
  };
  console.log(
    `\nAudit cost in the sidecar's own CPU time: ${fmt(cpuCost('d/c'))} µs per call (median of per-block differences; the sidecar uses ${fmt(c.cpuUs)} µs).`,
  );
  console.log(`Redis replay store cost in the sidecar's own CPU time: ${fmt(cpuCost('e/c'))} µs per call.`);
  console.log(
    `One Ed25519 verification: ${fmt(cost.joseUs, 1)} µs through jose (WebCrypto), ${fmt(cost.nodeUs, 1)} µs with node:crypto directly, ${fmt(cost.sidecarUs, 1)} µs with the sidecar's verifier (${cost.verifier}).`,
  );
} finally {
  for (const c of children) c.kill('SIGKILL');
}
