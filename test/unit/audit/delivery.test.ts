import { describe, expect, it } from 'vitest';
import { AuditDelivery } from '../../../src/audit/delivery.js';
import { Spool } from '../../../src/audit/spool.js';
import { emptyStats } from '../../../src/audit/stats.js';
import { createLogger } from '../../../src/log.js';

const line = (seq: number) => ({ seq, line: Buffer.from(`batch-${seq}`), hash: String(seq).padStart(64, '0'), first: seq });

describe('AuditDelivery', () => {
  it('delivers to each exporter in order, retrying a refused batch before the next; the backlog counts the slowest exporter', async () => {
    const spool = new Spool(undefined, 1 << 20, ['flaky', 'steady']);
    await spool.append(line(1), false);
    await spool.append(line(2), false);
    const seen: string[] = [];
    let failOnce = true;
    let done!: () => void;
    const finished = new Promise<void>((r) => {
      done = r;
    });
    const logs: string[] = [];
    const stats = emptyStats();
    let acks = 0;
    const delivery = new AuditDelivery(
      spool,
      [
        {
          name: 'flaky',
          export: async (l) => {
            seen.push(`flaky:${l.toString()}`);
            if (failOnce) {
              failOnce = false;
              throw new Error('collector down');
            }
          },
        },
        {
          name: 'steady',
          export: async (l) => {
            seen.push(`steady:${l.toString()}`);
          },
        },
      ],
      {
        backoffMs: () => 0,
        log: createLogger('warn', (l) => logs.push(l)),
        observer: undefined,
        stats,
        acknowledged: () => {
          if (++acks === 4) done();
        },
      },
    );
    expect(delivery.backlog(2)).toBe(2);
    delivery.start();
    await finished;
    expect(seen.filter((s) => s.startsWith('flaky'))).toEqual(['flaky:batch-1', 'flaky:batch-1', 'flaky:batch-2']);
    expect(seen.filter((s) => s.startsWith('steady'))).toEqual(['steady:batch-1', 'steady:batch-2']);
    expect(stats.exported).toEqual({ flaky: 2, steady: 2 });
    expect(stats.exportFailures).toBe(1);
    expect(logs.filter((l) => l.includes('audit export failed'))).toHaveLength(1);
    expect(delivery.backlog(2)).toBe(0);
    expect(spool.after(0)).toEqual([]); // every exporter has both: removed from the spool
    delivery.stop();
  });

  it('waits for a new batch and delivers it when woken', async () => {
    const spool = new Spool(undefined, 1 << 20, ['x']);
    let got!: (l: string) => void;
    const delivered = new Promise<string>((r) => {
      got = r;
    });
    const delivery = new AuditDelivery(
      spool,
      [
        {
          name: 'x',
          export: async (l) => {
            got(l.toString());
          },
        },
      ],
      {
        backoffMs: undefined,
        log: createLogger('error', () => {}),
        observer: undefined,
        stats: emptyStats(),
        acknowledged: () => {},
      },
    );
    delivery.start();
    await spool.append(line(1), false);
    delivery.wake();
    expect(await delivered).toBe('batch-1');
    delivery.stop();
  });
});
