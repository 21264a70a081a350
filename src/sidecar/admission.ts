import type { ServerResponse } from 'node:http';
import { monitorEventLoopDelay, PerformanceObserver, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks';
import type { Limits } from './limits.js';

/** Why a call was shed: past --max-in-flight, or past the bound the event loop's delay set. */
export type ShedReason = 'in_flight' | 'event_loop_delay';

/** How often the adaptive bound is revised from the loop's delay over the window just ended. */
export const ADMISSION_WINDOW_MS = 10;
/**
 * The adaptive bound never goes below this: so few calls cannot queue for long (32 calls are about 6 ms
 * of the sidecar's CPU), and a client that keeps up to 32 calls open at once is never shed for the loop.
 */
export const ADAPTIVE_FLOOR = 32;
/**
 * After a late, busy window, a call read while the loop is this many times --max-event-loop-delay-ms behind
 * is shed at once: when a burst begins, the bound has not come down yet and one turn of the loop could admit
 * hundreds. (Not after a window on time or mostly idle: a single long pause, a collector's or a descheduled
 * process's, sheds nothing.)
 */
export const HARD_DELAY_FACTOR = 10;
/** After this many windows without a call the probe stops: an idle sidecar is not woken 1000 times a second. */
const IDLE_WINDOWS = 100;
/**
 * A late window counts only when the loop was busy this share of the last BUSY_WINDOWS windows (Node's
 * event-loop utilization): a late turn between idle ones was a burst, already served; past the sidecar's
 * capacity the loop never idles.
 */
export const BUSY_SHARE = 0.9;
const BUSY_WINDOWS = 2;

/**
 * The bound on calls in flight that the event loop's delay sets, like Envoy's adaptive concurrency with
 * the loop as the resource. While the loop keeps up, the bound grows back to --max-in-flight. When two
 * windows in a row end with the loop later than maxDelayMs and busy nearly all the time (garbage
 * collection left out of both; a single late window is usually the catch-up after a pause), calls arrive
 * faster than the CPU serves them: they wait in the kernel's socket buffers, unseen, and the bound drops
 * below the calls in flight, by a fifth, or by half when far behind.
 */
export class AdaptiveBound {
  limit: number;
  /** The last window ended late with the loop busy nearly all the time (the hard cut is armed). */
  behind = false;

  constructor(
    private readonly max: number,
    private readonly maxDelayMs: number,
  ) {
    this.limit = max;
  }

  /** A window ended: the loop's worst delay in it, the most calls in flight seen, the loop's recent busy share. */
  revise(delayMs: number, peakInFlight: number, busy: number): void {
    const late = delayMs > this.maxDelayMs;
    const congested = late && busy >= BUSY_SHARE;
    if (congested && this.behind) {
      const factor = Math.min(0.8, Math.max(0.5, this.maxDelayMs / delayMs));
      this.limit = Math.max(Math.min(ADAPTIVE_FLOOR, this.max), Math.floor(Math.min(this.limit, peakInFlight) * factor));
    } else if (!late) {
      this.limit = Math.min(this.max, this.limit + Math.max(1, Math.floor(this.limit / 16)));
    }
    this.behind = congested;
  }

  /** Idle: nothing is queued, the next call starts from the static bound. */
  reset(): void {
    this.limit = this.max;
    this.behind = false;
  }
}

/**
 * The admission decision for each call on the agent port: past --max-in-flight, or past the adaptive
 * bound, or read while the loop is far behind again, a call is shed (503 overloaded) instead of queued. The
 * loop's delay is read from Node's event-loop delay monitor (a 1 ms native timer) and a window timer; both
 * run only while calls come in. Garbage collection (observed) is not counted as delay. The adaptive bound
 * counts calls until their response is done (not until their audit record is): a client's next call on the
 * same connection never finds its last one counted.
 */
export class Admission {
  private readonly bound?: AdaptiveBound;
  private readonly delays?: IntervalHistogram;
  private timer?: NodeJS.Timeout;
  /** When the window timer is next due: a call read well past it is read by a loop that is far behind. */
  private due = 0;
  private peak = 0;
  private calls = 0;
  private quiet = 0;
  /** Admitted calls whose response is not done yet. */
  private serving = 0;
  /** The loop's utilization at the end of each recent window, oldest first. */
  private busy: EventLoopUtilization[] = [];
  /** Milliseconds of garbage collection since the last window, and in each of the last BUSY_WINDOWS. */
  private gcMs = 0;
  private gcWindows: number[] = [];
  private readonly gc?: PerformanceObserver;
  private readonly done = (): void => void this.serving--;

  constructor(private readonly limits: Pick<Limits, 'maxInFlight' | 'maxEventLoopDelayMs'>) {
    if (limits.maxEventLoopDelayMs <= 0) return;
    this.bound = new AdaptiveBound(limits.maxInFlight, limits.maxEventLoopDelayMs);
    this.delays = monitorEventLoopDelay({ resolution: 1 });
    // A collection delays the loop with no more work waiting than before it: its time is not counted as delay.
    this.gc = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) this.gcMs += e.duration;
    });
  }

  /** The bound in force now (the adaptive one, or --max-in-flight). */
  get limit(): number {
    return this.bound?.limit ?? this.limits.maxInFlight;
  }

  /** undefined: admitted (counted until `res` closes); else why the call is shed. `inFlight`: calls being handled. */
  check(inFlight: number, res: ServerResponse): ShedReason | undefined {
    if (inFlight >= this.limits.maxInFlight) return 'in_flight';
    const bound = this.bound;
    if (!bound) return undefined;
    if (!this.timer) this.start();
    this.calls++;
    const serving = this.serving;
    if (serving >= this.peak) this.peak = serving + 1;
    if (serving >= bound.limit) return 'event_loop_delay';
    if (bound.behind && performance.now() - this.due > HARD_DELAY_FACTOR * this.limits.maxEventLoopDelayMs) return 'event_loop_delay';
    this.serving++;
    res.once('close', this.done);
    return undefined;
  }

  private start(): void {
    this.busy = [performance.eventLoopUtilization()];
    this.gcWindows = [];
    this.delays?.reset();
    this.delays?.enable();
    this.gc?.observe({ entryTypes: ['gc'] });
    this.gcMs = 0;
    this.due = performance.now() + ADMISSION_WINDOW_MS;
    this.quiet = 0;
    this.timer = setInterval(() => this.window(), ADMISSION_WINDOW_MS).unref();
  }

  private window(): void {
    const t = performance.now();
    // The native monitor sees every turn of the loop; the timer's own lateness covers a turn still running.
    const delayMs = Math.max(0, Math.max(t - this.due, (this.delays?.max ?? 0) / 1e6) - this.gcMs);
    this.delays?.reset();
    this.due = t + ADMISSION_WINDOW_MS;
    // The loop's busy share over the last BUSY_WINDOWS windows, collections left out.
    const elu = performance.eventLoopUtilization();
    this.busy.push(elu);
    this.gcWindows.push(this.gcMs);
    this.gcMs = 0;
    if (this.busy.length > BUSY_WINDOWS + 1) this.busy.shift();
    if (this.gcWindows.length > BUSY_WINDOWS) this.gcWindows.shift();
    const span = performance.eventLoopUtilization(elu, this.busy[0]);
    const gc = this.gcWindows.reduce((a, b) => a + b, 0);
    const busy = Math.max(0, span.active - gc) / (span.active + span.idle || 1);
    this.bound?.revise(delayMs, Math.max(this.peak, this.serving), busy);
    this.peak = 0;
    this.quiet = this.calls === 0 ? this.quiet + 1 : 0;
    this.calls = 0;
    if (this.quiet >= IDLE_WINDOWS) this.stop();
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.delays?.disable();
    this.gc?.disconnect();
    this.bound?.reset();
  }

  close(): void {
    this.stop();
  }
}
