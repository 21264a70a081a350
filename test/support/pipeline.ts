import { mcpSessionStore } from '../../src/mcp/sessions.js';
import type { IncomingMessage } from 'node:http';
import { readFileSync } from 'node:fs';
import { MemoryReplayStore } from '../../src/auth/replay.js';
import type { Upstream } from '../../src/app/upstream.js';
import { createLogger } from '../../src/log.js';
import type { Deps } from '../../src/pipeline/deps.js';
import type { Arrival } from '../../src/pipeline/phases.js';
import { loadPolicyText } from '../../src/policy/load.js';
import type { Policy } from '../../src/policy/types.js';
import { DEFAULT_LIMITS } from '../../src/sidecar/limits.js';

/** The billing example policy (config/examples/billing.yaml), loaded for real. */
export async function billingPolicy(): Promise<Policy> {
  return loadPolicyText(readFileSync(new URL('../../config/examples/billing.yaml', import.meta.url), 'utf8'), 'billing.yaml');
}

/**
 * The parts of an IncomingMessage the pure stages read (method, url, headers,
 * rawHeaders, complete). Stages under unit test never read the body stream.
 */
export function fakeRequest(method: string, url: string, headers: Record<string, string> = {}): IncomingMessage {
  const rawHeaders = Object.entries({ host: 'sidecar.test', ...headers }).flat();
  const lower: Record<string, string> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) lower[rawHeaders[i]!.toLowerCase()] = rawHeaders[i + 1]!;
  return { method, url, headers: lower, rawHeaders, complete: true, socket: { remoteAddress: '127.0.0.1' } } as unknown as IncomingMessage;
}

export function arrival(req: IncomingMessage): Arrival {
  return { req, requestId: 'req-1', startedAt: 1_000, startedHr: 0 };
}

/** Deps for stages that need no app and no Redis: an in-memory replay window, a silent logger. */
export function unitDeps(policy: Policy, over: Partial<Deps> = {}): Deps {
  return {
    policy,
    replay: new MemoryReplayStore(1000),
    tokenHeader: 'authorization',
    limits: { ...DEFAULT_LIMITS },
    now: () => Date.parse('2026-06-01T00:00:00Z'),
    log: createLogger('error', () => {}),
    upstream: {} as Upstream,
    mcpSessions: mcpSessionStore({ maxSessions: 100, perOwner: 10, idleMs: 60_000, now: () => Date.parse('2026-06-01T00:00:00Z') }),
    ...over,
  };
}
