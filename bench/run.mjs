// make bench: the sidecar against the app, nginx and bare Node proxies, one core each, and the targets of
// issue 20 as ratios measured in this run. docs/design/benchmarks.md says how to read it.
//
// Every proxy runs pinned to one core (BENCH_PROXY_CPU, 0); the load generators (wrk at saturation, the
// open-loop generator at fixed rates), the upstream (nginx answering itself) and Redis on the other
// (BENCH_LOAD_CPU, 1). Each figure is the median over BENCH_ROUNDS rounds with its range; the targets of
// small ratios (audit, Redis) come from the paired mode: both sidecars at the same fixed rate at once.
import { randomBytes } from 'node:crypto';
import { createPublicKey, verify as nodeVerify } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadVerifier } from '../dist/auth/ed25519-verify.js';
import { importAgentKey } from '../dist/identity/keys.js';
import { Redis } from 'ioredis';
import { REPLAY_NAMESPACE } from '../dist/auth/replay-redis.js';
import { openLoop } from './open-loop.mjs';
import {
  cpuByThread,
  cpuSeconds,
  has,
  hasTaskset,
  IMAGE_ENV,
  LOAD_CPU,
  median,
  nginx,
  node,
  pinSelf,
  PROXY_CPU,
  redis,
  rssMiB,
  spread,
  stopAll,
} from './procs.mjs';
import { bot, mint, policy, rawRequests, signer, wrk } from './workload.mjs';

const env = (name, fallback) => Number(process.env[name] ?? fallback);
const SECONDS = env('BENCH_SECONDS', 4);
const WARMUP_SECONDS = env('BENCH_WARMUP_SECONDS', 3);
const ROUNDS = env('BENCH_ROUNDS', 3);
const CONNECTIONS = env('BENCH_CONNECTIONS', 32);
// Upper bound on what a token-checking target serves per second: its tokens are minted up front.
const MAX_RPS = env('BENCH_MAX_RPS', 9000);
const RATE = env('BENCH_RATE', 1000);
const FIXED_SECONDS = env('BENCH_FIXED_SECONDS', 10);
const PAIRED_WINDOWS = env('BENCH_PAIRED_WINDOWS', 5);

pinSelf();
const dir = await mkdtemp(join(tmpdir(), 'agents-chain-bench-'));
await writeFile(join(dir, 'policy.yaml'), policy);

// The upstream: nginx answering a small JSON document itself (cheap, so the load core has room for the
// generators); the Node app where nginx is missing.
const upstream = has('nginx')
  ? await nginx(dir, 'upstream', { cpus: LOAD_CPU })
  : await node(['bench/app.mjs', '0'], { cpus: LOAD_CPU, match: /listening (\d+)/ });
const proxyNginx = has('nginx') ? await nginx(dir, 'proxy', { cpus: PROXY_CPU, upstream: upstream.url }) : undefined;
const bare = (kind) => node(['bench/bare-proxy.mjs', kind, '0', upstream.url], { cpus: PROXY_CPU, match: /listening (\d+)/ });
const bareHp3 = await bare('http-proxy-3');
const bareUndici = await bare('undici');
const serve = (extra = [], { cpus = PROXY_CPU, cli = 'dist/cli/main.js', env } = {}) =>
  node([cli, 'serve', '--policy', join(dir, 'policy.yaml'), '--upstream', upstream.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', ...extra], {
    cpus,
    env,
    match: /"listen":"(http:\/\/[^"]+)"/,
  });
const sidecar = await serve();
const auditKey = join(dir, 'audit.key');
await writeFile(auditKey, `${randomBytes(32).toString('base64')}\n`);
const audited = await serve(['--audit-key-file', auditKey, '--audit-spool', join(dir, 'spool'), '--audit-export', `file:${join(dir, 'audit.jsonl')}`]);
// Its own Redis (on the load core): nothing else on this machine touches the replay window it holds.
const benchRedis = await redis(LOAD_CPU);
await markReplayWindowIntact(benchRedis.url);
const redisBacked = await serve(['--redis', benchRedis.url]);
// Only ever at the fixed rate, so its memory is what a pod at that rate holds.
const atRate = await serve();
// Given both cores (sharing the load core with wrk and the upstream): as it is, and with the signature
// checked on libuv's thread pool (AGENTS_CHAIN_ED25519=pool), which the second core can run.
const twoCores = await serve([], { cpus: `${PROXY_CPU},${LOAD_CPU}` });
const twoCoresPool = await serve([], { cpus: `${PROXY_CPU},${LOAD_CPU}`, env: { AGENTS_CHAIN_ED25519: 'pool' } });
const baseline = process.env.BENCH_BASELINE ? await serve([], { cli: join(process.env.BENCH_BASELINE, 'dist/cli/main.js') }) : undefined;

const T = {
  app: { name: 'app directly (nginx)', target: upstream, checksTokens: false },
  nginx: proxyNginx && { name: 'nginx, bare reverse proxy', target: proxyNginx, checksTokens: false },
  hp3: { name: 'bare http-proxy-3', target: bareHp3, checksTokens: false },
  undici: { name: 'bare undici (buffered body)', target: bareUndici, checksTokens: false },
  c: { name: 'sidecar (in-memory replay)', target: sidecar, checksTokens: true },
  d: { name: 'sidecar + audit trail', target: audited, checksTokens: true },
  e: { name: 'sidecar, replay in Redis', target: redisBacked, checksTokens: true },
};
const only = process.env.BENCH_ONLY?.split(',');
const saturated = Object.entries(T).filter(([k, t]) => t && (!only || only.includes(k)));

async function closedLoop(t, seconds) {
  const c0 = cpuSeconds(t.target.pid);
  const r = await wrk(dir, t.target.url, { seconds, connections: CONNECTIONS, maxRps: MAX_RPS, checksTokens: t.checksTokens }).catch(async (err) => {
    // What the target answers, to say why.
    const [token] = mint(1);
    const res = await fetch(`${t.target.url}/invoices`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{}',
    }).catch((e) => e);
    throw new Error(`${t.name}: ${err.message}; a probe got ${res.status ?? res.message}: ${res.text ? await res.text() : ''}`);
  });
  return { ...r, cpuUs: ((cpuSeconds(t.target.pid) - c0) / r.requests) * 1e6 };
}

async function fixedRate(t, seconds, rate = RATE, { warmUp = false } = {}) {
  const url = new URL(t.target.url);
  const requests = rawRequests(url.host, mint(Math.ceil(seconds * rate * 1.1) + 100));
  const pid = t.target.pid;
  const c0 = cpuSeconds(pid);
  const th0 = cpuByThread(pid);
  const w0 = process.hrtime.bigint();
  const r = await openLoop({ host: url.hostname, port: Number(url.port), rate, seconds, connections: 64, request: (i) => requests[i % requests.length] });
  const wall = Number(process.hrtime.bigint() - w0) / 1e9;
  const cpu = cpuSeconds(pid) - c0;
  const ok = r.statuses[200] ?? 0;
  if (!warmUp && (Object.keys(r.errors).length || ok !== r.total))
    throw new Error(`${t.target.url} at ${rate}/s: ${JSON.stringify({ total: r.total, statuses: r.statuses, errors: r.errors })}`);
  const th1 = cpuByThread(pid);
  const threads = Object.fromEntries(Object.keys(th1).map((k) => [k, ((th1[k] - (th0[k] ?? 0)) / r.total) * 1e6]));
  return {
    p50: r.latency(50),
    p99: r.latency(99),
    cores: cpu / wall,
    cpuUs: (cpu / r.total) * 1e6,
    threads,
    rss: rssMiB(pid),
    generatorUs: r.cpu.perRequestUs,
  };
}

// One Ed25519 verification with the sidecar's verifier (and node:crypto), CPU time of this process, on an idle moment.
async function verifyCost() {
  const token = await signer.sign('createInvoice');
  const key = await importAgentKey(bot.publicJwk);
  const [h, p, s] = token.split('.');
  const data = Buffer.from(`${h}.${p}`);
  const sig = Buffer.from(s, 'base64url');
  const pub = createPublicKey({ key: bot.publicJwk, format: 'jwk' });
  const { verifier } = loadVerifier('libsodium');
  const time = (f) => {
    for (let i = 0; i < 500; i++) f();
    const n = 5000;
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) f();
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / n;
  };
  const rounds = Array.from({ length: 5 }, () => ({
    sidecar: time(() => verifier.verify(data, sig, key)),
    node: time(() => nodeVerify(null, data, pub, sig)),
  }));
  return { us: median(rounds.map((r) => r.sidecar)), nodeUs: median(rounds.map((r) => r.node)), verifier: verifier.name };
}

/**
 * A Redis no sidecar has checked is a possible loss of the replay window (fail closed: tokens issued up to
 * 30 s after the sidecar found it are refused for two minutes), and the bench mints its tokens up front.
 * So the bench's own fresh Redis is marked as checked long ago, as test/support/global-setup.ts does for
 * the test Redis: an old epoch marker and the server key naming this Redis process. Never do this to a
 * Redis in service.
 */
async function markReplayWindowIntact(url) {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await client.connect();
    const runId = /^run_id:(\S+)/m.exec(await client.info('server'))?.[1];
    if (!runId) throw new Error(`${url}: INFO server named no run_id`);
    const tag = `${REPLAY_NAMESPACE}:{0}:`;
    await client.set(`${tag}epoch`, `${Date.now() - 1_200_000}-00000000`);
    await client.set(`${tag}server`, runId);
  } finally {
    client.disconnect();
  }
}

const log = (s) => process.stderr.write(`${s}\n`);
try {
  const verify0 = await verifyCost();
  // Warm-up: JIT, heap sizes, pools, for every target once.
  for (const [, t] of saturated) await closedLoop(t, WARMUP_SECONDS);
  await closedLoop({ ...T.c, target: twoCores }, WARMUP_SECONDS);
  await closedLoop({ ...T.c, target: twoCoresPool }, WARMUP_SECONDS);

  // 1. Saturation, closed loop: each round runs every target once, starting one further along each time.
  const sat = Object.fromEntries(saturated.map(([k]) => [k, []]));
  const satTwo = [];
  const satTwoPool = [];
  for (let round = 0; round < ROUNDS; round++) {
    const order = [...saturated.slice(round % saturated.length), ...saturated.slice(0, round % saturated.length)];
    for (const [k, t] of order) {
      const r = await closedLoop(t, SECONDS);
      sat[k].push(r);
      log(`saturation ${round + 1}/${ROUNDS} ${t.name}: ${r.rps.toFixed(0)} req/s, ${r.cpuUs.toFixed(0)} µs CPU/req`);
    }
    const r = await closedLoop({ ...T.c, target: twoCores }, SECONDS);
    satTwo.push(r);
    const p = await closedLoop({ ...T.c, target: twoCoresPool }, SECONDS);
    satTwoPool.push(p);
    log(`saturation ${round + 1}/${ROUNDS} sidecar on two cores: ${r.rps.toFixed(0)} req/s; verifying on the thread pool: ${p.rps.toFixed(0)} req/s`);
  }

  // 2. Fixed rate, open loop (latency from each request's scheduled time): app, bare proxies, the sidecar that only ever sees this rate.
  const fixedTargets = [
    ['app', T.app],
    ['nginx', T.nginx],
    ['undici', T.undici],
    ['c', { ...T.c, target: atRate }],
  ].filter(([, t]) => t);
  // A fresh process warms up (JIT) at the rate; what it sheds while cold is not counted.
  await fixedRate({ ...T.c, target: atRate }, WARMUP_SECONDS, RATE, { warmUp: true });
  const fixed = Object.fromEntries(fixedTargets.map(([k]) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [k, t] of fixedTargets) {
      const r = await fixedRate(t, FIXED_SECONDS);
      fixed[k].push(r);
      log(`${RATE}/s ${round + 1}/${ROUNDS} ${t.name}: p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, ${r.cores.toFixed(3)} cores`);
    }
  }

  // 3. Paired: x and the sidecar at the same fixed rate at the same time, so the machine's drift hits both alike.
  async function paired(x) {
    const ratios = [];
    for (let w = 0; w <= PAIRED_WINDOWS; w++) {
      const warmUp = { warmUp: w === 0 };
      const [rx, rc] = await Promise.all([fixedRate(x, SECONDS, RATE, warmUp), fixedRate(T.c, SECONDS, RATE, warmUp)]);
      if (w > 0) ratios.push(rx.cpuUs / rc.cpuUs); // the first window warms up
    }
    return ratios;
  }
  const pairs = { d: await paired(T.d), e: await paired(T.e), ...(baseline ? { f: await paired({ name: 'BENCH_BASELINE', target: baseline }) } : {}) };
  const verify1 = await verifyCost();
  const tVerify = Math.min(verify0.us, verify1.us) / 1e6;

  // The table.
  const med = (rs, f) => median(rs.map(f));
  const perRound = (a, b, f) => a.map((r, i) => f(r, b[i]));
  console.log(
    `\nagents-chain bench, node ${process.version}: proxies on CPU ${PROXY_CPU}, load (wrk, open loop), upstream and Redis on CPU ${LOAD_CPU}${hasTaskset ? '' : ' (taskset missing: NOT pinned)'}; ${ROUNDS} rounds of ${SECONDS} s at saturation (${CONNECTIONS} connections) and ${FIXED_SECONDS} s at ${RATE} req/s; 1 KiB JSON POSTs, 3 constraints, single-use tokens; Node processes with the image's NODE_OPTIONS (${IMAGE_ENV.NODE_OPTIONS ?? 'none'}); median (min–max)\n`,
  );
  console.log(`| target | saturation req/s | CPU µs/call | p99 ms | at ${RATE}/s: p50 ms | p99 ms | CPU µs/call | cores | RSS MiB (peak) |`);
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const [k, t] of saturated) {
    const s = sat[k];
    const f = fixed[k];
    const fx = (g, d) => (f ? spread(f.map(g), d) : '');
    const rss = rssMiB(k === 'c' ? atRate.pid : t.target.pid);
    console.log(
      `| ${t.name} | ${spread(s.map((r) => r.rps))} | ${spread(s.map((r) => r.cpuUs))} | ${spread(
        s.map((r) => r.p99),
        1,
      )} | ${fx((r) => r.p50, 2)} | ${fx((r) => r.p99, 2)} | ${fx((r) => r.cpuUs)} | ${fx((r) => r.cores, 3)} | ${rss.now.toFixed(0)} (${rss.peak.toFixed(0)}) |`,
    );
  }
  const rowOf = (name, rs) =>
    console.log(
      `| ${name} | ${spread(rs.map((r) => r.rps))} | ${spread(rs.map((r) => r.cpuUs))} | ${spread(
        rs.map((r) => r.p99),
        1,
      )} | | | | | |`,
    );
  rowOf('sidecar on two cores', satTwo);
  rowOf('sidecar on two cores, verifying on the thread pool', satTwoPool);
  console.log(
    `\nOne Ed25519 verification (t_verify): ${(tVerify * 1e6).toFixed(1)} µs with the sidecar's verifier (${verify0.verifier}), ${verify0.nodeUs.toFixed(1)} µs with node:crypto (CPU time, this run).`,
  );
  const fc = fixed.c;
  const threads = fc ? Object.keys(fc.at(-1).threads).map((n) => `${n} ${med(fc, (r) => r.threads[n] ?? 0).toFixed(0)}`) : [];
  if (fc) console.log(`The sidecar at ${RATE}/s, CPU µs per call by thread: ${threads.join(', ')}.`);

  const rows = [];
  const target = (id, what, value, limit, ok, per) => rows.push({ id, what, value, limit, ok, per });
  const fmt = (n, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
  if (sat.c && sat.undici) {
    const r = perRound(sat.c, sat.undici, (c, u) => c.cpuUs / (u.cpuUs + tVerify * 1e6));
    target('(a)', 'sidecar CPU/call ÷ (bare undici + t_verify), saturation', median(r), '≤ 1.15', median(r) <= 1.15, r);
    const b = perRound(sat.c, sat.undici, (c, u) => c.rps / (1 / (1 / u.rps + tVerify)));
    target('(b)', 'single-core req/s ÷ 1/(1/bare_rps + t_verify)', median(b), '≥ 0.90', median(b) >= 0.9, b);
  }
  if (fixed.c && fixed.undici) {
    const r = perRound(fixed.c, fixed.undici, (c, u) => c.cpuUs / (u.cpuUs + tVerify * 1e6));
    target('(a)', `the same at ${RATE}/s`, median(r), '≤ 1.15', median(r) <= 1.15, r);
  }
  if (sat.c) {
    const r = perRound(satTwo, sat.c, (two, one) => two.rps / one.rps);
    target('(b)', 'two cores ÷ one core, req/s', median(r), '≥ 1.6', median(r) >= 1.6, r);
    const q = perRound(satTwoPool, sat.c, (two, one) => two.rps / one.rps);
    target('(b)', 'the same, verifying on the thread pool', median(q), '≥ 1.6', median(q) >= 1.6, q);
  }
  if (fixed.c && fixed.undici && fixed.app) {
    for (const p of ['p50', 'p99']) {
      // Added over direct, per round; a bare proxy that measures as adding nothing (within this generator's
      // resolution, 0.05 ms) is taken as adding 0.05 ms, so the ratio stays finite and errs against the sidecar.
      const added = (t, i) => Math.max(t[i][p] - fixed.app[i][p], 0.05);
      const r = fixed.c.map((_, i) => added(fixed.c, i) / added(fixed.undici, i));
      const ms = `${median(fixed.c.map((_, i) => added(fixed.c, i))).toFixed(2)} vs ${median(fixed.undici.map((_, i) => added(fixed.undici, i))).toFixed(2)} ms`;
      target('(c)', `added latency at ${RATE}/s, ${p}: sidecar ÷ bare undici (${ms})`, median(r), '≤ 1.5', median(r) <= 1.5, r);
    }
    const cores = fixed.c.map((r) => r.cores);
    target('(d)', `cores busy at ${RATE}/s`, median(cores), '≤ 0.30', median(cores) <= 0.3, cores);
    const peak = rssMiB(atRate.pid).peak * 1.048576; // MiB → MB
    target('(d)', `peak RSS at ${RATE}/s, MB`, peak, '≤ 80', peak <= 80, [peak]);
  }
  target('(e)', `audit trail: CPU/call ratio, paired at ${RATE}/s`, median(pairs.d), '≤ 1.05', median(pairs.d) <= 1.05, pairs.d);
  target('(e)', `Redis replay store: CPU/call ratio, paired at ${RATE}/s`, median(pairs.e), '≤ 1.10', median(pairs.e) <= 1.1, pairs.e);
  if (pairs.f) target('', `BENCH_BASELINE ÷ this checkout, CPU/call, paired`, median(pairs.f), '', true, pairs.f);
  console.log('\n| target | measure | median | range | limit | met |');
  console.log('|---|---|---:|---|---|---|');
  for (const r of rows)
    console.log(
      `| ${r.id} | ${r.what} | ${fmt(r.value)} | ${fmt(Math.min(...r.per))}–${fmt(Math.max(...r.per))} | ${r.limit} | ${r.limit ? (r.ok ? 'yes' : '**no**') : ''} |`,
    );
  const missed = rows.filter((r) => r.limit && !r.ok).length;
  console.log(`\n${rows.length - missed} of ${rows.filter((r) => r.limit).length} targets met.`);
} finally {
  stopAll();
}
