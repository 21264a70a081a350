import { describe, expect, it } from 'vitest';
import { MemoryReplayStore, ReplayStoreUnavailableError, type ReplayStore } from '../../../src/auth/replay.js';
import { isDenial } from '../../../src/errors.js';
import type { Deps } from '../../../src/pipeline/deps.js';
import type { HostAuthenticated } from '../../../src/pipeline/phases.js';
import { checkHostReplay } from '../../../src/pipeline/stages/authenticate.js';

const NOW = 1_700_000_000_000;

function deps(replay: ReplayStore): Deps {
  return { replay, now: () => NOW } as unknown as Deps;
}

function hostCall(jti: string): HostAuthenticated {
  return { host: { claims: { iss: 'THUMB', jti, iat: NOW / 1000 - 1 } } } as unknown as HostAuthenticated;
}

function codeOf(out: unknown): string {
  return isDenial(out) ? out.code : 'passed';
}

/** The memory store behind a promise, as Redis answers. */
function asynchronous(store: ReplayStore): ReplayStore {
  return { claim: async (key, ttl) => store.claim(key, ttl) };
}

describe('spending a token id (step 8)', () => {
  it('takes no promise when the store answers at once (in memory), and awaits one when it does not (Redis)', async () => {
    const sync = deps(new MemoryReplayStore(10));
    const first = checkHostReplay(hostCall('j1'), sync);
    expect(first).not.toBeInstanceOf(Promise);
    expect(codeOf(first)).toBe('passed');
    const again = checkHostReplay(hostCall('j1'), sync);
    expect(again).not.toBeInstanceOf(Promise);
    expect(codeOf(again)).toBe('token_replayed');

    const later = deps(asynchronous(new MemoryReplayStore(10)));
    const pending = checkHostReplay(hostCall('j1'), later);
    expect(pending).toBeInstanceOf(Promise);
    expect(codeOf(await pending)).toBe('passed');
    expect(codeOf(await checkHostReplay(hostCall('j1'), later))).toBe('token_replayed');
  });

  it('refuses with replay_store_unavailable whether the store throws or rejects, never lets the call through', async () => {
    const full = new MemoryReplayStore(1);
    full.claim('other', 60_000);
    const thrown = checkHostReplay(hostCall('j2'), deps(full));
    expect(thrown).not.toBeInstanceOf(Promise);
    expect(codeOf(thrown)).toBe('replay_store_unavailable');
    expect(codeOf(await checkHostReplay(hostCall('j2'), deps(asynchronous(full))))).toBe('replay_store_unavailable');

    const broken: ReplayStore = {
      claim: () => {
        throw new Error('boom');
      },
    };
    const out = checkHostReplay(hostCall('j3'), deps(broken));
    expect(isDenial(out) && out.code + ': ' + out.message).toBe('replay_store_unavailable: replay store failed: boom');
    const rejecting: ReplayStore = { claim: () => Promise.reject(new ReplayStoreUnavailableError('down')) };
    expect(codeOf(await checkHostReplay(hostCall('j4'), deps(rejecting)))).toBe('replay_store_unavailable');
  });

  it('asks about a lost window before and after the claim, on both paths', async () => {
    let resetAt: number | undefined;
    const store = new MemoryReplayStore(10);
    const sync: ReplayStore = { claim: (k, t) => store.claim(k, t), lastReset: () => resetAt };
    resetAt = NOW - 1000;
    expect(codeOf(checkHostReplay(hostCall('j5'), deps(sync)))).toBe('replay_window_reset');
    // Found by the claim itself (Redis finds a loss while claiming): refused after it.
    const finding: ReplayStore = {
      claim: async () => {
        resetAt = NOW;
        return true;
      },
      lastReset: () => resetAt,
    };
    resetAt = undefined;
    expect(codeOf(await checkHostReplay(hostCall('j6'), deps(finding)))).toBe('replay_window_reset');
  });
});
