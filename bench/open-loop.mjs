// An open-loop (fixed-rate) HTTP/1.1 load generator, as wrk2 is one: request i is due at a time fixed in
// advance (t0 + i / rate), whether or not earlier ones were answered, and its latency is measured from that
// time. A target that falls behind is charged for the queue it built (no coordinated omission).
//
//   import { openLoop } from './open-loop.mjs';
//   const r = await openLoop({ host, port, rate: 2000, seconds: 10, connections: 256, request: (i) => bytes[i] });
//   r.latency(99); r.statuses; r.windows(100);
//
// Cheap on purpose (it shares a core with the upstream in `make bench`): raw `net` sockets with keep-alive,
// requests handed over as ready bytes, responses read only as far as the status line, Content-Length,
// chunked framing and Connection: close. It reports its own CPU per request.
import { connect } from 'node:net';

const CRLF2 = Buffer.from('\r\n\r\n');

/**
 * options:
 * - host, port: the target.
 * - rate, seconds: one phase; or phases: [{ rate, seconds, name? }, ...] run back to back on the same
 *   connections and queue (a burst's backlog carries into the phase after it).
 * - connections: at most this many sockets at once (default 256). A request due while none is free opens
 *   one more, up to this; past it the request waits for the next free socket (its latency still counts
 *   from the time it was due).
 * - preconnect: this many sockets are opened before the clock starts (in steps of 128, so the target's
 *   accept queue never overflows), as a fleet of clients with keep-alive connections would hold them.
 * - request(i): the full raw bytes of request i (Buffer or latin1 string), built ahead (it is called at send time).
 * - timeoutMs: a request unanswered this long after it was sent is given up (its socket is closed; status 0,
 *   error "timeout"). Default 30 000.
 * - drainMs: after the last request was due, how long answers are still awaited (default timeoutMs).
 * - sampleStatuses: the first response of each of these statuses is kept whole (head and body), in `samples`.
 *
 * Resolves with:
 * - total (requests due), sent (written), completed (answered), unanswered (never sent or given up),
 *   statuses {code: count}, errors {code: count} (ECONNRESET, timeout, ...);
 * - maxInFlight (written and not yet answered, at most), maxQueued (due, waiting for a socket),
 *   connectionsOpened, maxConnections (open at once);
 * - latency(p, filter?): the p-th percentile in ms of answered requests, from the time each was due;
 *   filter { status?, phase?, fromMs?, toMs?, fromSent? } (phase by index or name; fromMs/toMs: due time
 *   since t0; fromSent: from the write instead, i.e. without the time spent waiting for a socket);
 * - windows(ms, filter?): per window of due time: { startMs, due, answered, statuses, p50, p99, max };
 *   perSecond is windows(1000);
 * - phases: [{ name, rate, seconds, startMs, first, count }]; dueMs(i), latencyMs (Float64Array, NaN when
 *   unanswered), status (Uint16Array, 0 when unanswered), sentMs and doneMs (Float64Array: write and answer
 *   time since t0); t0 (performance.now() at the start, to line other samples up with due times);
 * - lag: { p99, max } ms by which the generator itself was late to hand a due request over (its timers);
 * - cpu: { userMs, systemMs, perRequestUs } of this process over the run (per request sent);
 * - samples: { [status]: 'raw response' }.
 */
export async function openLoop(o) {
  const phases = (o.phases ?? [{ rate: o.rate, seconds: o.seconds }]).map((p, k) => ({ name: p.name ?? String(k), rate: p.rate, seconds: p.seconds }));
  let total = 0;
  let at = 0;
  for (const p of phases) {
    if (!(p.rate > 0 && p.seconds > 0)) throw new RangeError(`openLoop: phase ${p.name} needs rate > 0 and seconds > 0`);
    p.startMs = at;
    p.first = total;
    p.count = Math.round(p.rate * p.seconds);
    total += p.count;
    at += p.seconds * 1000;
  }
  const due = new Float64Array(total);
  const phaseOf = new Uint8Array(total);
  phases.forEach((p, k) => {
    const step = 1000 / p.rate;
    for (let j = 0; j < p.count; j++) {
      due[p.first + j] = p.startMs + j * step;
      phaseOf[p.first + j] = k;
    }
  });
  const latencyMs = new Float64Array(total).fill(NaN);
  const doneMs = new Float64Array(total).fill(NaN);
  const sentMs = new Float64Array(total).fill(NaN);
  const status = new Uint16Array(total);
  const maxConnections = o.connections ?? 256;
  const timeoutMs = o.timeoutMs ?? 30_000;
  const drainMs = o.drainMs ?? timeoutMs;
  const sampleStatuses = new Set(o.sampleStatuses ?? []);
  const samples = {};
  const statuses = {};
  const errors = {};
  const lags = [];

  let next = 0; // the next request to hand over
  let sent = 0;
  let completed = 0;
  let settled = 0; // answered or given up
  let inFlight = 0;
  let maxInFlight = 0;
  let opened = 0;
  let open = 0;
  let connecting = 0;
  let maxOpen = 0;
  const idle = [];
  const pending = []; // due, waiting for a socket (FIFO: pendingHead is the oldest)
  let pendingHead = 0;
  let maxQueued = 0;
  const busy = new Set();
  let stopped = false;
  let t0 = performance.now();
  const now = () => performance.now() - t0;
  let timer;
  let finish;
  const finished = new Promise((resolve) => (finish = resolve));

  for (let left = Math.min(o.preconnect ?? 0, maxConnections); left > 0;) {
    const step = Math.min(left, 128);
    await Promise.all(Array.from({ length: step }, () => new Promise((resolve) => openOne(resolve))));
    left -= step;
  }

  const cpu0 = process.cpuUsage();
  t0 = performance.now();

  function settle(i, code, err) {
    settled++;
    if (err) errors[err] = (errors[err] ?? 0) + 1;
    else {
      completed++;
      status[i] = code;
      const t = now();
      doneMs[i] = t;
      latencyMs[i] = t - due[i];
      statuses[code] = (statuses[code] ?? 0) + 1;
    }
    if (next === total && settled === total) finish();
  }

  function takePending() {
    if (pendingHead === pending.length) return -1;
    const i = pending[pendingHead++];
    if (pendingHead > 4096 && pendingHead * 2 > pending.length) {
      pending.splice(0, pendingHead);
      pendingHead = 0;
    }
    return i;
  }

  function send(c, i) {
    c.i = i;
    c.sentAt = now();
    sentMs[i] = c.sentAt;
    c.buf = undefined;
    inFlight++;
    if (inFlight > maxInFlight) maxInFlight = inFlight;
    sent++;
    busy.add(c);
    const bytes = o.request(i);
    c.socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
  }

  /** A socket is free: the oldest waiting request, or the idle list. */
  function release(c) {
    const i = takePending();
    if (i >= 0) send(c, i);
    else idle.push(c);
  }

  function openOne(onOpen) {
    opened++;
    open++;
    connecting++;
    if (open > maxOpen) maxOpen = open;
    const c = { socket: connect({ host: o.host, port: o.port, noDelay: true }), i: -1, sentAt: 0, buf: undefined, connected: false, dead: false };
    c.socket.once('connect', () => {
      connecting--;
      c.connected = true;
      release(c);
      onOpen?.();
    });
    if (onOpen) c.socket.once('error', () => onOpen());
    c.socket.on('data', (chunk) => onData(c, chunk));
    c.socket.on('error', (err) => drop(c, err.code ?? 'error'));
    c.socket.on('close', () => drop(c, 'closed'));
  }

  /** The socket is gone: its request (if any) failed; a waiting request gets a new socket. */
  function drop(c, why) {
    if (c.dead) return;
    c.dead = true;
    open--;
    if (!c.connected) connecting--;
    else if (c.i < 0) {
      const k = idle.indexOf(c);
      if (k >= 0) idle.splice(k, 1);
    }
    if (c.i >= 0) {
      const i = c.i;
      c.i = -1;
      busy.delete(c);
      inFlight--;
      settle(i, 0, why);
    }
    c.socket.destroy();
    reopen();
  }

  /** Requests are waiting and a socket closed: another one, within the bound. */
  function reopen() {
    if (!stopped && open < maxConnections && connecting < pending.length - pendingHead) openOne();
  }

  function onData(c, chunk) {
    if (c.i < 0) return drop(c, 'unexpected_data');
    let buf = c.buf ? Buffer.concat([c.buf, chunk]) : chunk;
    let end = responseEnd(buf);
    // An interim response (100 Continue) is skipped: the final one follows.
    while (end && end.informational) {
      buf = buf.subarray(end.length);
      end = buf.length ? responseEnd(buf) : 0;
    }
    if (!end) {
      c.buf = buf.length ? buf : undefined;
      return;
    }
    const i = c.i;
    const code = (buf[9] - 48) * 100 + (buf[10] - 48) * 10 + (buf[11] - 48);
    if (sampleStatuses.has(code) && samples[code] === undefined) samples[code] = buf.toString('latin1', 0, end.length);
    c.i = -1;
    c.buf = undefined;
    busy.delete(c);
    inFlight--;
    settle(i, code);
    if (end.close) {
      c.dead = true;
      open--;
      c.socket.destroy();
      reopen();
    } else release(c);
  }

  /** Hands over every request due by now; a request with no free socket opens one or waits. */
  function tick() {
    const t = now();
    while (next < total && due[next] <= t) {
      const i = next++;
      lags.push(t - due[i]);
      const c = idle.pop();
      if (c) {
        send(c, i);
        continue;
      }
      pending.push(i);
      const queued = pending.length - pendingHead;
      if (queued > maxQueued) maxQueued = queued;
      if (open < maxConnections && connecting < queued) openOne();
    }
    if (next < total) timer = setTimeout(tick, Math.max(0, due[next] - now() - 0.5));
    else if (settled === total) finish();
  }
  // Gives up requests unanswered for timeoutMs (the socket goes with them).
  const watchdog = setInterval(() => {
    const t = now();
    for (const c of busy) if (t - c.sentAt > timeoutMs) drop(c, 'timeout');
  }, 100);

  tick();
  const drainedBy = phases.at(-1).startMs + phases.at(-1).seconds * 1000 + drainMs - now();
  await Promise.race([finished, new Promise((r) => setTimeout(r, Math.max(0, drainedBy)))]);
  stopped = true;
  clearTimeout(timer);
  clearInterval(watchdog);
  const wall = now();
  const cpu = process.cpuUsage(cpu0);
  for (const c of [...busy, ...idle]) {
    c.dead = true;
    c.socket.destroy();
  }
  const unanswered = total - completed;
  if (total - settled > 0) errors.unanswered = (errors.unanswered ?? 0) + (total - settled);

  const phaseIndex = (ph) => (typeof ph === 'number' ? ph : phases.findIndex((p) => p.name === ph));
  const pick = (filter = {}) => {
    const k = filter.phase === undefined ? -1 : phaseIndex(filter.phase);
    const from = filter.fromMs ?? -Infinity;
    const to = filter.toMs ?? Infinity;
    const out = [];
    for (let i = 0; i < total; i++) {
      if (status[i] === 0 || (k >= 0 && phaseOf[i] !== k) || due[i] < from || due[i] >= to) continue;
      if (filter.status !== undefined && status[i] !== filter.status) continue;
      out.push(filter.fromSent ? doneMs[i] - sentMs[i] : latencyMs[i]);
    }
    return Float64Array.from(out).sort();
  };
  const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] : NaN);
  const windows = (ms, filter = {}) => {
    const from = filter.fromMs ?? 0;
    const to = Math.min(filter.toMs ?? Infinity, at);
    const out = [];
    for (let start = from; start < to; start += ms) {
      const end = Math.min(start + ms, to);
      const w = { startMs: start, due: 0, answered: 0, statuses: {}, p50: NaN, p99: NaN, max: NaN };
      const ls = [];
      // due[] is sorted: a binary search would do, but this runs once per report.
      for (let i = lowerBound(due, start); i < total && due[i] < end; i++) {
        w.due++;
        if (status[i] === 0) continue;
        w.answered++;
        w.statuses[status[i]] = (w.statuses[status[i]] ?? 0) + 1;
        ls.push(latencyMs[i]);
      }
      const sorted = Float64Array.from(ls).sort();
      w.p50 = pct(sorted, 50);
      w.p99 = pct(sorted, 99);
      w.max = sorted.length ? sorted[sorted.length - 1] : NaN;
      out.push(w);
    }
    return out;
  };
  const lagSorted = Float64Array.from(lags).sort();
  return {
    total,
    sent,
    completed,
    unanswered,
    statuses,
    errors,
    maxInFlight,
    maxQueued,
    connectionsOpened: opened,
    maxConnections: maxOpen,
    wallMs: wall,
    phases,
    t0,
    dueMs: (i) => due[i],
    latencyMs,
    sentMs,
    doneMs,
    status,
    latency: (p, filter) => pct(pick(filter), p),
    windows,
    get perSecond() {
      return windows(1000);
    },
    lag: { p99: pct(lagSorted, 99), max: lagSorted.length ? lagSorted[lagSorted.length - 1] : NaN },
    cpu: { userMs: cpu.user / 1000, systemMs: cpu.system / 1000, perRequestUs: sent ? (cpu.user + cpu.system) / sent : NaN },
    samples,
  };
}

function lowerBound(sorted, x) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Where the response in `buf` ends: 0 while incomplete, else { length, close }. Reads the status line, then
 * Content-Length, Transfer-Encoding: chunked and Connection: close from the header block; nothing else.
 */
export function responseEnd(buf) {
  const headEnd = buf.indexOf(CRLF2);
  if (headEnd < 0) return 0;
  const head = buf.toString('latin1', 0, headEnd).toLowerCase();
  const bodyAt = headEnd + 4;
  const code = (buf[9] - 48) * 100 + (buf[10] - 48) * 10 + (buf[11] - 48);
  const close = headerHas(head, 'connection', 'close') || head.startsWith('http/1.0');
  if (code < 200) return { length: bodyAt, close, informational: true };
  if (code === 204 || code === 304) return { length: bodyAt, close };
  if (headerHas(head, 'transfer-encoding', 'chunked')) {
    let at = bodyAt;
    for (;;) {
      const lineEnd = buf.indexOf('\r\n', at);
      if (lineEnd < 0) return 0;
      const size = parseInt(buf.toString('latin1', at, lineEnd), 16);
      if (size === 0) {
        // Trailers (usually none), then the blank line.
        const trailerEnd = buf.indexOf('\r\n', lineEnd + 2) === lineEnd + 2 ? lineEnd + 4 : buf.indexOf(CRLF2, lineEnd) + 4;
        return trailerEnd >= 4 && trailerEnd <= buf.length ? { length: trailerEnd, close } : 0;
      }
      at = lineEnd + 2 + size + 2;
      if (at > buf.length) return 0;
    }
  }
  const cl = headerValue(head, 'content-length');
  if (cl !== undefined) {
    const end = bodyAt + Number(cl);
    return buf.length >= end ? { length: end, close } : 0;
  }
  // No length: the body runs to the end of the connection (not expected from the targets here).
  return 0;
}

function headerValue(head, name) {
  const at = head.indexOf(`\r\n${name}:`);
  if (at < 0) return undefined;
  const start = at + name.length + 3;
  const end = head.indexOf('\r\n', start);
  return head.slice(start, end < 0 ? head.length : end).trim();
}

function headerHas(head, name, token) {
  const v = headerValue(head, name);
  return v !== undefined && v.split(',').some((t) => t.trim() === token);
}
