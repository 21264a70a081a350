// node bench/profile.mjs (after make build): where a call's CPU goes. The sidecar under `node --cpu-prof`, pinned
// like make bench (PROXY_CPU; nginx and wrk on LOAD_CPU), the bench's load at saturation (a warm-up, then
// BENCH_PROFILE_SECONDS, 15), then the profile summarised by self time: µs per call (every call the profile
// saw, warm-up included; idle time left out) and share of the busy time, the top BENCH_PROFILE_TOP (30).
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuSeconds, LOAD_CPU, nginx, node, PROXY_CPU, selfTimes, stopAll } from './procs.mjs';
import { policy, wrk } from './workload.mjs';

const SECONDS = Number(process.env.BENCH_PROFILE_SECONDS ?? 15);
const TOP = Number(process.env.BENCH_PROFILE_TOP ?? 30);
const dir = await mkdtemp(join(tmpdir(), 'agents-chain-profile-'));
try {
  await writeFile(join(dir, 'policy.yaml'), policy);
  const upstream = await nginx(dir, 'upstream', { cpus: LOAD_CPU });
  const profiles = join(dir, 'profiles');
  const serve = [
    'dist/cli/main.js',
    'serve',
    '--policy',
    join(dir, 'policy.yaml'),
    '--upstream',
    upstream.url,
    '--listen',
    '127.0.0.1:0',
    '--admin',
    '127.0.0.1:0',
  ];
  const sidecar = await node(['--cpu-prof', '--cpu-prof-dir', profiles, ...serve], { cpus: PROXY_CPU, match: /"listen":"(http:\/\/[^"]+)"/ });
  const warm = await wrk(dir, sidecar.url, { seconds: 4, connections: 32, maxRps: 9000 });
  const before = cpuSeconds(sidecar.pid);
  const run = await wrk(dir, sidecar.url, { seconds: SECONDS, connections: 32, maxRps: 9000 });
  const cpu = cpuSeconds(sidecar.pid) - before;
  sidecar.child.kill('SIGTERM');
  await new Promise((resolve) => sidecar.child.once('exit', resolve));
  const [file] = await readdir(profiles);
  const profile = JSON.parse(await readFile(join(profiles, file), 'utf8'));

  const { busy, entries } = selfTimes(profile);
  const calls = warm.requests + run.requests;
  console.log(
    `\nagents-chain profile, node ${process.version}: ${run.rps.toFixed(0)} req/s, ${((cpu / run.requests) * 1e6).toFixed(0)} µs CPU per call (all threads, /proc); the profile's busy main thread ${(busy / calls).toFixed(0)} µs per call over ${calls} calls (sampled wall time: a descheduled thread counts)\n`,
  );
  console.log('| µs/call | share | function |\n|---:|---:|---|');
  for (const [key, us] of entries.slice(0, TOP)) {
    console.log(`| ${(us / calls).toFixed(1)} | ${((us / busy) * 100).toFixed(1)} % | \`${key}\` |`);
  }
} finally {
  stopAll();
  await rm(dir, { recursive: true, force: true });
}
