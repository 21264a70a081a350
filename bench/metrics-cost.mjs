// CPU cost of recording one call in the sidecar's metrics, as the pipeline does it: the token-verification
// histogram (authenticate.ts), then callMetrics() + callFinished() (filters.ts' metricsFilter). Also one scrape.
//   make build && node bench/metrics-cost.mjs [DIST...]   (default ../dist; several dists run interleaved, A/B)
// Reports µs of process CPU time (user + system, process.cpuUsage) per call: the CPU is shared, wall time is not.
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const dists = process.argv.slice(2).length ? process.argv.slice(2) : [new URL('../dist', import.meta.url).pathname];
const N = Number(process.env.METRICS_BENCH_CALLS ?? 1_000_000);
const ROUNDS = Number(process.env.METRICS_BENCH_ROUNDS ?? 7);

async function load(dist) {
  const url = (p) => pathToFileURL(resolve(dist, p)).href;
  const { SidecarMetrics } = await import(url('metrics/metrics.js'));
  const { callMetrics } = await import(url('pipeline/observe/call-metrics.js'));
  const m = new SidecarMetrics({ processMetrics: false, perAgent: { maxAgents: 100 } });
  const capabilities = ['(none)', '(public)', 'orders.read', 'orders.write', 'invoices.list', 'discovery', 'register'];
  m.initialise({ callCapabilities: capabilities, constraintFields: [['orders.write', 'amount']], approvalCapabilities: [], mcpTools: [] });
  // A finished, allowed call as the pipeline hands it to the filters (only the fields callMetrics reads).
  const capability = { name: 'orders.read' };
  const done = {
    call: { route: { kind: 'capability', capability }, verified: { agent: { id: 'agent-7' } }, startedHr: 0 },
    outcome: { kind: 'forwarded', status: 200 },
    upstreamSeconds: 0.0004,
  };
  // A shed call (503 overloaded, refused before routing): what the sidecar records most under overload.
  const shed = { call: { startedHr: 0 }, outcome: { kind: 'refused', status: 503, denial: { code: 'overloaded' } } };
  const token = m.tokenVerification;
  return {
    dist,
    m,
    // One allowed call: what authenticate.ts and metricsFilter do (their timer reads included).
    allowed(i) {
      const t0 = performance.now();
      token.observe((performance.now() - t0) / 1000);
      // The filter reads the clock once; the call started 0.9–1.6 ms before (the pipeline's clock read, not counted here).
      const now = performance.now();
      done.call.startedHr = now - 0.9 - (i & 7) * 0.1;
      m.callFinished(callMetrics(done, now));
    },
    shed(i) {
      m.callFinished(callMetrics(shed, shed.call.startedHr + 0.05 + (i & 3) * 0.01));
    },
  };
}

function cpuMicros() {
  const u = process.cpuUsage();
  return u.user + u.system;
}

function round(v, kind) {
  const start = cpuMicros();
  for (let i = 0; i < N; i++) v[kind](i);
  return (cpuMicros() - start) / N;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const range = (xs) => `${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)}`;
const variants = [];
for (const d of dists) variants.push(await load(d));
for (const kind of ['allowed', 'shed']) {
  for (const v of variants) for (let i = 0; i < 200_000; i++) v[kind](i); // warm up (JIT)
  const results = variants.map(() => []);
  for (let r = 0; r < ROUNDS; r++) variants.forEach((v, k) => results[k].push(round(v, kind)));
  for (const [k, v] of variants.entries())
    console.log(
      `${kind} call, ${v.dist}: ${median(results[k]).toFixed(3)} µs CPU per call (median of ${ROUNDS} rounds × ${N} calls; range ${range(results[k])})`,
    );
  if (variants.length === 2) console.log(`  ratio (2nd / 1st) per round: ${results[1].map((x, r) => (x / results[0][r]).toFixed(3)).join(' ')}`);
}
// A scrape (every 15 s or so) pays for what the calls no longer do: the cells are turned into prom-client values.
for (const v of variants) {
  const times = [];
  let bytes = 0;
  for (let r = 0; r < 40; r++) {
    for (let i = 0; i < 1000; i++) v.allowed(i);
    const s0 = cpuMicros();
    bytes = (await v.m.metrics()).length;
    times.push((cpuMicros() - s0) / 1000);
  }
  console.log(`scrape, ${v.dist}: ${median(times).toFixed(2)} ms CPU (median of 40; range ${range(times)}), ${bytes} bytes`);
}
