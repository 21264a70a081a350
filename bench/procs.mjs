// Processes for the bench: started pinned to a core, read from /proc (CPU per thread, RSS), stopped at exit.
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { imageEnv } from '../test/image/env.mjs';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** The proxy under test runs on PROXY_CPU; load generator, upstream and Redis on LOAD_CPU. */
export const PROXY_CPU = process.env.BENCH_PROXY_CPU ?? '0';
export const LOAD_CPU = process.env.BENCH_LOAD_CPU ?? '1';

const children = [];
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});
export function stopAll() {
  for (const c of children) c.kill('SIGKILL');
}

export const hasTaskset = spawnSync('taskset', ['-p', String(process.pid)]).status === 0;
export const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

/** Pins this process (the load generator) to LOAD_CPU; its children inherit it unless started with their own core. */
export function pinSelf() {
  if (hasTaskset) spawnSync('taskset', ['-a', '-cp', LOAD_CPU, String(process.pid)]);
}

/** Starts `cmd args` on `cpus` (a taskset list); resolves when stdout matches `match` (its first group: a port or URL). */
export function start(cmd, args, { cpus, match, cwd = ROOT, env } = {}) {
  const [file, argv] = cpus && hasTaskset ? ['taskset', ['-c', cpus, cmd, ...args]] : [cmd, args];
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { cwd, stdio: ['ignore', 'pipe', 'inherit'], env: env ? { ...process.env, ...env } : process.env });
    children.push(child);
    let out = '';
    const done = (url) => resolve({ child, pid: child.pid, url });
    if (!match) return setTimeout(() => done(undefined), 300);
    child.stdout.on('data', (d) => {
      out += d;
      const m = match.exec(out);
      if (m) done(m[1].startsWith('http') ? m[1] : `http://127.0.0.1:${m[1]}`);
    });
    child.on('exit', (code) => reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${out}`)));
  });
}

/** Node processes (the sidecar and the bare proxies alike) start with the image's environment: its NODE_OPTIONS. */
export const IMAGE_ENV = imageEnv();
export function node(args, opts = {}) {
  return start(process.execPath, args, { ...opts, env: { ...IMAGE_ENV, ...opts.env } });
}

export async function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** nginx, one process (no master), one worker connection pool: `upstream` set makes it a reverse proxy, else it answers itself. */
export async function nginx(dir, name, { cpus, upstream }) {
  const port = await freePort();
  const conf = join(dir, `nginx-${name}.conf`);
  const up = upstream ? new URL(upstream) : undefined;
  await writeFile(
    conf,
    `daemon off; master_process off; worker_processes 1; error_log stderr error; pid ${join(dir, `nginx-${name}.pid`)};
events { worker_connections 4096; }
http {
  access_log off; client_body_temp_path ${dir}; proxy_temp_path ${dir}; keepalive_requests 1000000; keepalive_timeout 65s;
  ${up ? `upstream app { server ${up.host}; keepalive 128; }` : ''}
  server {
    listen 127.0.0.1:${port};
    location / {
      ${
        up
          ? 'proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering on;'
          : `client_body_buffer_size 16k; default_type application/json; return 200 '{"ok":true}';`
      }
    }
  }
}
`,
  );
  const started = await start('nginx', ['-c', conf, '-p', dir], { cpus });
  await waitListening(port);
  return { ...started, url: `http://127.0.0.1:${port}` };
}

/** A Redis of the bench's own (no persistence), so nothing else on the machine touches its replay window. */
export async function redis(cpus) {
  const port = await freePort();
  const started = await start('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { cpus });
  await waitListening(port);
  return { ...started, url: `redis://127.0.0.1:${port}` };
}

async function waitListening(port) {
  const { connect } = await import('node:net');
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise((resolve) => {
      const s = connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

/** CPU seconds a process has used (user + system, all threads), from /proc. */
export function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The same per thread: the main thread, and the others summed by name. */
export function cpuByThread(pid) {
  const out = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const comm = tid === String(pid) ? 'main' : readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const fields = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
      out[comm] = (out[comm] ?? 0) + (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      /* thread gone */
    }
  }
  return out;
}

/** Resident set now and its peak (VmRSS, VmHWM), MiB. */
export function rssMiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return { now: Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024, peak: Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024 };
}

export function median(xs) {
  const v = xs.filter((x) => Number.isFinite(x)).sort((p, q) => p - q);
  if (!v.length) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** "median (min–max)" of a list. */
export function spread(xs, digits = 0) {
  const v = xs.filter((x) => Number.isFinite(x));
  if (!v.length) return 'n/a';
  const f = (n) => n.toFixed(digits);
  return v.length === 1 ? f(v[0]) : `${f(median(v))} (${f(Math.min(...v))}–${f(Math.max(...v))})`;
}

/**
 * A `--cpu-prof` profile's self time per function (name, file, line), idle left out, most first; `busy` is
 * the total (µs of sampled wall time).
 */
export function selfTimes(profile) {
  const byNode = new Map();
  profile.samples.forEach((id, i) => byNode.set(id, (byNode.get(id) ?? 0) + profile.timeDeltas[i]));
  const self = new Map();
  let busy = 0;
  for (const n of profile.nodes) {
    const us = byNode.get(n.id) ?? 0;
    if (n.callFrame.functionName === '(idle)') continue;
    busy += us;
    const { functionName, url, lineNumber } = n.callFrame;
    const where = url ? ` ${url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${lineNumber + 1}` : '';
    const key = `${functionName || '(anonymous)'}${where}`;
    self.set(key, (self.get(key) ?? 0) + us);
  }
  return { busy, entries: [...self].sort((a, b) => b[1] - a[1]) };
}
