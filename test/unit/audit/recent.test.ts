import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { batchLine, GENESIS, parseKeyring } from '../../../src/audit/crypto.js';
import { RecentEntries } from '../../../src/audit/recent.js';
import { sealBatch } from '../../support/audit.js';

const keys = parseKeyring(randomBytes(32).toString('base64'));
const batch = async (id: string, args?: unknown) =>
  batchLine(await sealBatch([{ timestamp: 1, id, args }], { chain: 'c', seq: 1, prev: GENESIS }, keys.current));

describe('RecentEntries (GET /stats/entries)', () => {
  it('decrypts the newest entries on demand, newest last, from at most 8 batches', async () => {
    const recent = new RecentEntries(keys);
    for (let i = 1; i <= 10; i++) recent.add(await batch(`e${i}`));
    expect(recent.entries(50).map((e) => e.id)).toEqual(['e3', 'e4', 'e5', 'e6', 'e7', 'e8', 'e9', 'e10']);
    expect(recent.entries(2).map((e) => e.id)).toEqual(['e9', 'e10']);
  });

  it('keeps at most 2 MiB of batches, but always the newest one', async () => {
    const recent = new RecentEntries(keys);
    recent.add(await batch('small-1'));
    const big = await batch('big', randomBytes(1_700_000).toString('base64')); // random: does not compress
    expect(big.length).toBeGreaterThan(2 * 1024 * 1024);
    recent.add(big);
    expect(recent.entries(50).map((e) => e.id)).toEqual(['big']);
    recent.add(await batch('small-2'));
    expect(recent.entries(50).map((e) => e.id)).toEqual(['small-2']);
  });
});
