import { describe, expect, it } from 'vitest';
import type { DurableWaiter, SealedLine } from '../../../src/audit/batcher.js';
import { Spool } from '../../../src/audit/spool.js';
import { SpoolWriter } from '../../../src/audit/spool-writer.js';
import { emptyStats } from '../../../src/audit/stats.js';
import { createLogger } from '../../../src/log.js';

/** The spool stores lines as they are (it parses them only when loading a directory): any bytes do here. */
function line(seq: number, waiters: DurableWaiter[] = [], bytes = 100): SealedLine {
  return { seq, line: Buffer.alloc(bytes, 0x61), hash: String(seq).padStart(64, '0'), count: 2, first: 1000 + seq, waiters };
}

function waiter() {
  const w = {
    settled: 'no' as 'no' | 'resolved' | 'rejected',
    resolve: () => {
      w.settled = 'resolved';
    },
    reject: () => {
      w.settled = 'rejected';
    },
  };
  return w;
}

function writer(spoolMaxBytes: number, maxHeldBytes: number) {
  const spool = new Spool(undefined, spoolMaxBytes, ['x']);
  const logs: string[] = [];
  const stats = emptyStats();
  let spooled = 0;
  let droppedSeen = 0;
  const w = new SpoolWriter(spool, {
    sync: false,
    maxHeldBytes,
    log: createLogger('info', (l) => logs.push(l)),
    stats,
    observer: {
      exported() {},
      exportFailed() {},
      servedWhileUnavailable() {},
      dropped: (n) => {
        droppedSeen += n;
      },
    },
    spooled: () => {
      spooled++;
    },
  });
  return { w, spool, logs, stats, spooled: () => spooled, droppedSeen: () => droppedSeen };
}

describe('SpoolWriter', () => {
  it('appends held batches in order and tells delivery of each', async () => {
    const { w, spool, stats, spooled } = writer(1 << 20, 1 << 20);
    const a = waiter();
    w.hold(line(1, [a]));
    w.hold(line(2));
    expect(w.buffered).toBe(4);
    await w.writeHeld();
    expect(spool.after(0)).toEqual([1, 2]);
    expect(a.settled).toBe('resolved');
    expect(spooled()).toBe(2);
    expect(w.buffered).toBe(0);
    expect(stats.spoolBytes).toBe(200);
  });

  it('holds what a full spool refuses, refuses its strict callers at once, and recovers once space is freed', async () => {
    const { w, spool, logs, stats } = writer(150, 1 << 20);
    w.hold(line(1));
    await w.writeHeld(); // an empty spool always takes one batch
    const strict = waiter();
    w.hold(line(2, [strict]));
    await w.writeHeld();
    expect(w.available).toBe(false);
    expect(stats.available).toBe(false);
    expect(w.waiting).toBe(true);
    expect(strict.settled).toBe('rejected');
    expect(w.oldestFirst).toBe(1002);
    await spool.ack('x', 1); // delivery frees the space
    await w.writeHeld();
    expect(w.available).toBe(true);
    expect(w.waiting).toBe(false);
    expect(w.oldestFirst).toBe(Infinity);
    expect(spool.after(1)).toEqual([2]);
    expect(logs.filter((l) => l.includes('spool write failed'))).toHaveLength(1);
    expect(logs.filter((l) => l.includes('writable again'))).toHaveLength(1);
  });

  it('past the held bound, refuses records (counted, one log line per outage) until the spool recovers', async () => {
    const { w, spool, logs, stats, droppedSeen } = writer(150, 50);
    w.hold(line(1));
    await w.writeHeld();
    expect(w.overflowing).toBe(false); // healthy: the bound applies only during an outage
    w.hold(line(2));
    await w.writeHeld();
    expect(w.overflowing).toBe(true);
    await expect(w.refuse()).rejects.toThrow(/backlog full/);
    await expect(w.refuse()).rejects.toThrow(/backlog full/);
    expect(stats.dropped).toBe(2);
    expect(droppedSeen()).toBe(2);
    await spool.ack('x', 1);
    await w.writeHeld();
    expect(w.overflowing).toBe(false);
    w.hold(line(3, [], 200)); // a second outage logs again
    await w.writeHeld();
    await expect(w.refuse()).rejects.toThrow(/backlog full/);
    expect(logs.filter((l) => l.includes('in-memory backlog is full'))).toHaveLength(2);
  });
});
