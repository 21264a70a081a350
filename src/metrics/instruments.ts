/** How the sidecar's metrics are made: plain instruments on a registry, and the ones read from a source when scraped. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { MetricsSources } from './metrics.js';

export function counter<L extends string = string>(r: Registry, name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  return new Counter<L>({ name, help, labelNames, registers: [r] });
}

export function histogram<L extends string = string>(r: Registry, name: string, help: string, buckets: number[], labelNames: readonly L[] = []): Histogram<L> {
  return new Histogram<L>({ name, help, labelNames, buckets, registers: [r] });
}

export function gauge<L extends string = string>(r: Registry, name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
  return new Gauge<L>({ name, help, labelNames, registers: [r] });
}

/** A counter set from its source's own total when scraped. */
export function scrapedCounter(r: Registry, name: string, help: string, read: () => number): Counter {
  return new Counter({
    name,
    help,
    registers: [r],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/** A gauge of current state, read from its source when scraped. */
export function scrapedGauge(r: Registry, name: string, help: string, read: () => number): Gauge {
  return new Gauge({
    name,
    help,
    registers: [r],
    collect() {
      this.set(read());
    },
  });
}

/** agents_chain_access_requests_pending: the store is asked when scraped; a store that fails keeps the last value. */
export function pendingGauge(r: Registry, source: () => MetricsSources['pendingAccessRequests']): Gauge {
  return new Gauge({
    name: 'agents_chain_access_requests_pending',
    help: 'Access requests waiting for a human.',
    registers: [r],
    async collect() {
      try {
        const pending = source();
        this.set(pending ? await pending() : 0);
      } catch {
        /* last value stays */
      }
    },
  });
}
