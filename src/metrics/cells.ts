/**
 * Per-call metrics as plain numbers, published when scraped. prom-client
 * builds a label hash string and validates the labels on every inc() and
 * observe(), and a histogram finds its bucket through a property keyed by the
 * bound's decimal string: about 1.5 µs for one call's metrics. Here a call
 * finds its series' cell through one Map per label (nothing allocated) and
 * adds to numbers; the scrape turns them into the same exposition.
 */
import { Counter, type Registry } from 'prom-client';

type Labels<L extends string> = Partial<Record<L, string>>;
type Level = Map<string, unknown>;

/** Cells by label values, one Map level per label, made on first use. Label values are bounded by the callers (metrics.ts). */
class CellTree<L extends string, C> {
  private readonly root: Level = new Map();
  private only?: C;
  /** In order of creation: the order of the series in /metrics. */
  readonly all: C[] = [];

  constructor(
    private readonly labelNames: readonly L[],
    private readonly create: (labels: Labels<L>) => C,
  ) {
    if (labelNames.length > 3) throw new Error('a metric kept in cells has at most three labels');
  }

  at(a = '', b = '', c = ''): C {
    const depth = this.labelNames.length;
    if (depth === 0) return (this.only ??= this.made([]));
    let level = this.root;
    if (depth > 1) level = step(level, a);
    if (depth > 2) level = step(level, b);
    const last = depth === 1 ? a : depth === 2 ? b : c;
    let cell = level.get(last) as C | undefined;
    if (!cell) level.set(last, (cell = this.made([a, b, c])));
    return cell;
  }

  private made(values: string[]): C {
    const labels: Labels<L> = {};
    this.labelNames.forEach((name, i) => (labels[name] = values[i]));
    const cell = this.create(labels);
    this.all.push(cell);
    return cell;
  }
}

function step(level: Level, key: string): Level {
  let next = level.get(key) as Level | undefined;
  if (!next) level.set(key, (next = new Map()));
  return next;
}

/** One counter series: incremented in place, added to the prom-client counter at the next scrape. */
export class CounterCell {
  pending = 0;
  constructor(readonly labels: Labels<string>) {}
  inc(): void {
    this.pending++;
  }
}

/**
 * A prom-client counter (registered as usual, so /metrics is unchanged) whose
 * hot increments go through cells: at(...labelValues).inc(). A series exists
 * at 0 from its cell's creation, as inc(labels, 0) made it before.
 */
export class CellCounter<L extends string> {
  readonly counter: Counter<L>;
  private readonly cells: CellTree<L, CounterCell>;

  constructor(r: Registry, name: string, help: string, labelNames: readonly L[]) {
    const flush = (): void => this.flush();
    this.counter = new Counter<L>({ name, help, labelNames, registers: [r], collect: flush });
    this.cells = new CellTree(labelNames, (labels) => {
      this.counter.inc(labels, 0);
      return new CounterCell(labels);
    });
  }

  /** The series of these label values, in labelNames' order. */
  at(a?: string, b?: string, c?: string): CounterCell {
    return this.cells.at(a, b, c);
  }

  private flush(): void {
    for (const cell of this.cells.all) {
      if (cell.pending === 0) continue;
      this.counter.inc(cell.labels, cell.pending);
      cell.pending = 0;
    }
  }
}

/** One histogram series: counts per bucket (the last is +Inf only), sum and count, as prom-client keeps them. */
export class HistogramCell {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly labels: Labels<string>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    // A duration that is not a number is dropped: a metric must not fail the call (prom-client threw).
    if (!Number.isFinite(value)) return;
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

interface Sample {
  value: number;
  metricName: string;
  exemplar: null | undefined;
  labels: Record<string, string | number | undefined>;
}

/**
 * A histogram kept in cells and registered on the registry as a metric of its
 * own: the registry asks it for its values when scraped (get(), the shape
 * prom-client's Histogram returns), so the text is the same, line for line.
 */
export class CellHistogram<L extends string = string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private cells: CellTree<L, HistogramCell>;

  constructor(
    r: Registry,
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
    readonly labelNames: readonly L[] = [],
  ) {
    this.cells = this.tree();
    // prom-client's histogram without labels exports its one series at 0 from the start.
    if (labelNames.length === 0) this.cells.at();
    // The registry keeps any object with get(); prom-client's own types only name its four classes.
    r.registerMetric(this as never);
  }

  /** The series of these label values, in labelNames' order. */
  at(a?: string, b?: string, c?: string): HistogramCell {
    return this.cells.at(a, b, c);
  }

  /** The one series of a histogram without labels. */
  observe(value: number): void {
    this.cells.at().observe(value);
  }

  /** A series at 0 before any observation (as prom-client's zero()). */
  zero(a?: string, b?: string, c?: string): void {
    this.cells.at(a, b, c);
  }

  reset(): void {
    this.cells = this.tree();
  }

  get(): Promise<{ name: string; help: string; type: 'histogram'; values: Sample[]; aggregator: 'sum' }> {
    const values: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    for (const cell of this.cells.all) {
      let cumulative = 0;
      // le first, then the series' labels: prom-client prints them in this order.
      // Fields in prom-client's order too, so getMetricsAsJSON() is the same.
      this.buckets.forEach((le, i) => {
        cumulative += cell.counts[i]!;
        values.push({ value: cumulative, metricName: bucket, exemplar: null, labels: { le, ...cell.labels } });
      });
      values.push({ value: cell.count, metricName: bucket, exemplar: null, labels: { le: '+Inf', ...cell.labels } });
      values.push({ value: cell.sum, metricName: `${this.name}_sum`, exemplar: undefined, labels: { ...cell.labels } });
      values.push({ value: cell.count, metricName: `${this.name}_count`, exemplar: undefined, labels: { ...cell.labels } });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator });
  }

  /** What the registry calls for the text format. */
  getForPromString(): ReturnType<CellHistogram<L>['get']> {
    return this.get();
  }

  private tree(): CellTree<L, HistogramCell> {
    return new CellTree(this.labelNames, (labels) => new HistogramCell(labels, this.buckets));
  }
}
