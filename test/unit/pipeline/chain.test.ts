import { describe, expect, it } from 'vitest';
import { deny, isDenial } from '../../../src/errors.js';
import { Chain, type Progress } from '../../../src/pipeline/chain.js';
import type { Arrival } from '../../../src/pipeline/phases.js';
import { arrival, fakeRequest } from '../../support/pipeline.js';

const start = (): Arrival => arrival(fakeRequest('GET', '/'));

describe('Chain', () => {
  it('runs its stages in order, sync and async alike, each on what the one before returned', async () => {
    const seen: string[] = [];
    const chain = Chain.of<Arrival, null>()
      .then((p) => {
        seen.push('a');
        return { ...p, a: 1 };
      })
      .then(async (p) => {
        seen.push(`b${p.a}`);
        return { ...p, b: p.a + 1 };
      })
      .then((p) => {
        seen.push(`c${p.b}`);
        return { ...p, c: true as const };
      });
    const progress: Progress = { reached: start() };
    const out = await chain.run(start(), null, progress);
    expect(seen).toEqual(['a', 'b1', 'c2']);
    expect(out).toMatchObject({ a: 1, b: 2, c: true, requestId: 'req-1' });
    expect(progress.reached).toBe(out);
  });

  it('stops at the first denial and keeps the last phase reached for the observers', async () => {
    let ranAfter = false;
    const chain = Chain.of<Arrival, null>()
      .then((p) => ({ ...p, verified: 'yes' }))
      .then(async () => deny('token_replayed', 'spent'))
      .then((p) => {
        ranAfter = true;
        return p;
      });
    const progress: Progress = { reached: start() };
    const out = await chain.run(start(), null, progress);
    expect(isDenial(out) && out.code).toBe('token_replayed');
    expect(ranAfter).toBe(false);
    expect(progress.reached).toMatchObject({ verified: 'yes' });
  });

  it('an empty chain returns its input', async () => {
    const input = start();
    expect(await Chain.of<Arrival, null>().run(input, null, { reached: input })).toBe(input);
  });
});
