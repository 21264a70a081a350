import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CellCounter, CellHistogram } from '../../../src/metrics/cells.js';

const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.1, 1, 10];
/** Durations on, between and past the bounds, in an order that adds them up as floats do. */
const VALUES = [0, 0.0001, 0.00010001, 0.0003, 0.00042, 0.0009999, 0.001, 0.0031, 0.07, 0.7, 3, 10, 11, 250];

/** The same metrics twice: prom-client's own, and the cell-backed ones the sidecar uses, each on its registry. */
function pair() {
  const plain = new Registry();
  const cells = new Registry();
  return {
    plain,
    cells,
    counter: new Counter({ name: 'c_total', help: 'c', labelNames: ['capability', 'decision'], registers: [plain] }),
    cellCounter: new CellCounter(cells, 'c_total', 'c', ['capability', 'decision']),
    three: new Counter({ name: 't_total', help: 't', labelNames: ['server', 'tool', 'reason'], registers: [plain] }),
    cellThree: new CellCounter(cells, 't_total', 't', ['server', 'tool', 'reason']),
    labelled: new Histogram({ name: 'h_seconds', help: 'h', labelNames: ['capability'], buckets: BUCKETS, registers: [plain] }),
    cellLabelled: new CellHistogram(cells, 'h_seconds', 'h', BUCKETS, ['capability']),
    bare: new Histogram({ name: 'b_seconds', help: 'b "quoted"\\', buckets: BUCKETS, registers: [plain] }),
    cellBare: new CellHistogram(cells, 'b_seconds', 'b "quoted"\\', BUCKETS),
  };
}

describe('cell-backed metrics', () => {
  it('expose the same text and JSON as prom-client for the same events, scrape after scrape', async () => {
    const p = pair();
    // Before any event: the histogram without labels has its series at 0, the others none.
    expect(await p.cells.metrics()).toBe(await p.plain.metrics());
    p.counter.inc({ capability: 'a', decision: 'allowed' }, 0);
    p.cellCounter.at('a', 'allowed');
    for (const [round, capability] of ['a', 'b "x"\n', 'a', '(none)'].entries()) {
      for (const v of VALUES) {
        const value = v * (round + 1);
        p.labelled.observe({ capability }, value);
        p.cellLabelled.at(capability).observe(value);
        p.bare.observe(value / 7);
        p.cellBare.observe(value / 7);
        p.counter.inc({ capability, decision: value > 1 ? 'denied' : 'allowed' });
        p.cellCounter.at(capability, value > 1 ? 'denied' : 'allowed').inc();
        p.three.inc({ server: '/mcp', tool: capability, reason: 'unknown_tool' });
        p.cellThree.at('/mcp', capability, 'unknown_tool').inc();
      }
      p.labelled.zero({ capability: `z${round}` });
      p.cellLabelled.zero(`z${round}`);
      expect(await p.cells.metrics(), `round ${round}`).toBe(await p.plain.metrics());
      expect(await p.cells.getMetricsAsJSON()).toEqual(await p.plain.getMetricsAsJSON());
    }
  });

  it('keep one series per label set, found again without a new one', async () => {
    const p = pair();
    for (let i = 0; i < 1000; i++) p.cellCounter.at('a', i % 2 ? 'allowed' : 'denied').inc();
    expect(p.cellCounter.at('a', 'allowed')).toBe(p.cellCounter.at('a', 'allowed'));
    const json = await p.cells.getSingleMetric('c_total')!.get();
    expect(json.values).toEqual([
      { value: 500, labels: { capability: 'a', decision: 'denied' } },
      { value: 500, labels: { capability: 'a', decision: 'allowed' } },
    ]);
  });

  it('drop a duration that is not a number instead of throwing into the call', async () => {
    const p = pair();
    p.cellBare.observe(Number.NaN);
    p.cellBare.observe(Number.POSITIVE_INFINITY);
    expect(await p.cells.metrics()).toContain('b_seconds_count 0');
  });
});
