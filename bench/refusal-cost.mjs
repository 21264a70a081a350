// node bench/refusal-cost.mjs (after make build): what one shed call (503 overloaded) costs the sidecar. A sidecar
// with the audit trail on and --max-in-flight 1, whose one slot is held by a call to an app that never answers;
// wrk (32 connections, the bench's POSTs) gets only refusals. Prints refusals/s and CPU µs per refusal (/proc);
// BENCH_PROFILE=1 adds a --cpu-prof summary by self time (share of the busy time).
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { cpuSeconds, LOAD_CPU, node, PROXY_CPU, ROOT, selfTimes, stopAll } from './procs.mjs';
import { policy, mint, bodies } from './workload.mjs';
const dir = await mkdtemp(join(tmpdir(), 'shed-'));
await writeFile(join(dir, 'policy.yaml'), policy);
const hold = createServer(() => {}).listen(0, '127.0.0.1');
await new Promise((r) => hold.once('listening', r));
const up = `http://127.0.0.1:${hold.address().port}`;
const key = join(dir, 'k');
await writeFile(key, randomBytes(32).toString('base64') + '\n');
const prof = process.env.BENCH_PROFILE === '1';
const sc = await node(
  [
    ...(prof ? ['--cpu-prof', '--cpu-prof-dir', join(dir, 'p')] : []),
    'dist/cli/main.js',
    'serve',
    '--policy',
    join(dir, 'policy.yaml'),
    '--upstream',
    up,
    '--listen',
    '127.0.0.1:0',
    '--admin',
    '127.0.0.1:0',
    '--max-in-flight',
    '1',
    '--audit-key-file',
    key,
    '--audit-spool',
    join(dir, 'spool'),
    '--audit-export',
    `file:${join(dir, 'a.jsonl')}`,
  ],
  { cpus: PROXY_CPU, match: /"listen":"(http:\/\/[^"]+)"/ },
);
const [t] = mint(1);
fetch(`${sc.url}/invoices`, { method: 'POST', headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' }, body: bodies[0] }).catch(() => {});
await new Promise((r) => setTimeout(r, 300));
await writeFile(join(dir, 'tokens.txt'), mint(4096).join('\n') + '\n');
await writeFile(join(dir, 'bodies.txt'), bodies.join('\n') + '\n');
const wrk = (s) =>
  spawnSync(
    'taskset',
    [
      '-c',
      LOAD_CPU,
      'wrk',
      '-t1',
      '-c32',
      `-d${s}s`,
      '-s',
      join(ROOT, 'bench/wrk.lua'),
      `${sc.url}/invoices`,
      '--',
      join(dir, 'tokens.txt'),
      join(dir, 'bodies.txt'),
    ],
    { encoding: 'utf8' },
  ).stdout;
wrk(3);
const c0 = cpuSeconds(sc.pid);
const out = wrk(10);
const cpu = cpuSeconds(sc.pid) - c0;
const r = JSON.parse(out.split('\n').find((l) => l.startsWith('{"requests"')));
console.log('shed rps', (r.requests / (r.duration_us / 1e6)).toFixed(0), 'µs CPU per refusal', ((cpu / r.requests) * 1e6).toFixed(1), 'status', r.status);
if (prof) {
  sc.child.kill('SIGTERM');
  await new Promise((res) => sc.child.once('exit', res));
  const [f] = await readdir(join(dir, 'p'));
  const p = JSON.parse(await readFile(join(dir, 'p', f), 'utf8'));
  const { busy, entries } = selfTimes(p);
  for (const [k, us] of entries.slice(0, 35)) console.log(((us / busy) * 100).toFixed(1).padStart(5), '%', k);
}
stopAll();
process.exit(0);
