#!/usr/bin/env node
// The in-process replay window's memory per id and CPU per claim (issue 20): the MemoryReplayStore in dist/
// (typed arrays, no object or string per id) against the Map of key strings it replaced, inlined below.
//
//   make build && node --expose-gc bench/replay-memory.mjs [rounds=3] [sizes=200000,1000000]
//
// Each measurement is its own child process (a fresh heap), run in interleaved rounds (old, new, old, new, ...).
// A child builds keys the way the sidecar does (replayKey: `agent:<43-char thumbprint>:<jti>`, jti like
// b1700000000-123-abc123, 100 agents), fills the store with n ids over a fake 120 s window, then rolls the window
// for min(n, 200,000) more claims (each expires one old id: the steady state of a pod under constant load; the
// Map's cost there grows with the deleted entries its iteration walks over until it rehashes, so 1,000,000 Map
// claims would take minutes). Memory: heap used, external (the typed arrays' ArrayBuffers) and
// RSS, after a full GC, minus the same before the fill, per id. CPU: process CPU time (every thread, so the
// garbage collector's helpers count) per claim, fill and rolling, including the ~0.1 µs to build a key (printed).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MemoryReplayStore, replayKey } from '../dist/auth/replay.js';

const TTL_MS = 120_000;
const MAX_ROLL = 200_000;

/** The store before issue 20 (src/auth/replay.ts at 1d5d7cf), synchronous here: a Map of key -> expiry in insertion order. */
class MapReplayStore {
  seen = new Map();
  constructor(maxEntries, clock) {
    this.maxEntries = maxEntries;
    this.clock = clock;
  }
  claim(key, ttlMs) {
    const now = this.clock();
    for (const [k, until] of this.seen) {
      if (until > now) break;
      this.seen.delete(k);
    }
    const until = this.seen.get(key);
    if (until !== undefined && until > now) return false;
    if (this.seen.size >= this.maxEntries) throw new Error('full');
    this.seen.delete(key);
    this.seen.set(key, now + ttlMs);
    return true;
  }
}

function memory() {
  globalThis.gc();
  globalThis.gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, external: m.external, rss: m.rss };
}

function vmHwm() {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

function cpuUs() {
  const u = process.cpuUsage();
  return u.user + u.system;
}

function child(impl, n) {
  const thumbs = Array.from({ length: 100 }, () => randomBytes(32).toString('base64url'));
  const tags = Array.from({ length: 1024 }, () => randomBytes(4).readUInt32LE(0).toString(36).slice(0, 6));
  let t = 1_700_000_000_000;
  const clock = () => t;
  const step = TTL_MS / n;
  const key = (i) => replayKey('agent', thumbs[i % 100], `b${Math.floor(t / 1000)}-${i}-${tags[i & 1023]}`);

  // Key building alone (the same in both), to tell it apart from the store's work.
  let sink = 0;
  let c0 = cpuUs();
  for (let i = 0; i < n; i++) sink += key(i).length;
  const keyUs = (cpuUs() - c0) / n;

  const before = memory();
  const hwmBefore = vmHwm();
  const store = impl === 'map' ? new MapReplayStore(n, clock) : new MemoryReplayStore(n, clock);
  c0 = cpuUs();
  for (let i = 0; i < n; i++) {
    if (!store.claim(key(i), TTL_MS)) throw new Error('a fresh id was refused');
    t += step;
  }
  const fillUs = (cpuUs() - c0) / n;
  const filled = memory();
  const roll = Math.min(n, MAX_ROLL);
  c0 = cpuUs();
  for (let i = n; i < n + roll; i++) {
    if (!store.claim(key(i), TTL_MS)) throw new Error('a fresh id was refused');
    t += step;
  }
  const rollUs = (cpuUs() - c0) / roll;
  const rolled = memory();
  const held = impl === 'map' ? store.seen.size : store.size;
  const per = (a, b) => (a - b) / held;
  return {
    impl,
    n,
    held,
    heap: per(filled.heap, before.heap),
    external: per(filled.external, before.external),
    rss: per(filled.rss, before.rss),
    rssRolled: per(rolled.rss, before.rss),
    hwm: vmHwm(),
    hwmBefore,
    keyUs,
    fillUs,
    rollUs,
    sink,
  };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function cell(xs, digits) {
  const f = (v) => v.toFixed(digits).replace(/^-(0\.?0*)$/, '$1');
  const m = f(median(xs));
  return xs.length > 1 ? `${m} (${f(Math.min(...xs))}–${f(Math.max(...xs))})` : m;
}

if (process.argv[2] === 'child') {
  process.stdout.write(JSON.stringify(child(process.argv[3], Number(process.argv[4]))));
} else {
  if (typeof globalThis.gc !== 'function') {
    console.error('run with node --expose-gc');
    process.exit(2);
  }
  const rounds = Number(process.argv[2] ?? 3);
  const sizes = (process.argv[3] ?? '200000,1000000').split(',').map(Number);
  const self = fileURLToPath(import.meta.url);
  const results = [];
  for (let r = 0; r < rounds; r++) {
    for (const n of sizes) {
      for (const impl of r % 2 ? ['typed', 'map'] : ['map', 'typed']) {
        const out = execFileSync(process.execPath, ['--expose-gc', ...process.execArgv.filter((a) => a !== '--expose-gc'), self, 'child', impl, String(n)], {
          encoding: 'utf8',
          maxBuffer: 1 << 20,
        });
        results.push(JSON.parse(out));
      }
    }
  }
  console.log(
    `replay window, node ${process.version}, ${rounds} interleaved rounds; per id: bytes after a full GC; per claim: process CPU µs (median (min–max))`,
  );
  console.log(
    '| store | ids | heap B/id | external B/id | RSS B/id | peak RSS growth (VmHWM) MiB | CPU µs/claim, filling | CPU µs/claim, rolling | of which key building |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const n of sizes) {
    for (const impl of ['map', 'typed']) {
      const rs = results.filter((x) => x.n === n && x.impl === impl);
      const name = impl === 'map' ? 'Map of key strings (before)' : 'MemoryReplayStore (typed arrays)';
      const col = (f, digits) => cell(rs.map(f), digits);
      const cells = [
        name,
        n.toLocaleString('en'),
        col((x) => x.heap, 0),
        col((x) => x.external, 0),
        col((x) => x.rss, 0),
        col((x) => (x.hwm - x.hwmBefore) / 2 ** 20, 0),
        col((x) => x.fillUs, 2),
        col((x) => x.rollUs, 2),
        col((x) => x.keyUs, 2),
      ];
      console.log(`| ${cells.join(' | ')} |`);
    }
  }
}
