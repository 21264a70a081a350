import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { deny, type Denial } from '../errors.js';
import type { Logger } from '../log.js';

/** The flag (and its environment variable) that lets the admin API run without a token. */
export const INSECURE_FLAG = '--admin-insecure-no-token';
export const INSECURE_ENV = 'AGENTS_CHAIN_ADMIN_INSECURE_NO_TOKEN';

/** At most one "admin call without a valid token" line per this interval (the others are counted into the next line). */
export const UNAUTHORIZED_LOG_INTERVAL_MS = 10_000;

/**
 * Why the admin listener must not start as configured, or undefined. With
 * approvals on, the admin API changes state (approve, deny, value grants):
 * without a token nobody could approve, and opening it to whoever reaches the
 * port (in a pod: anything on the pod network) needs the explicit flag.
 */
export function adminStartupProblem(o: { adminToken?: string; insecureNoToken?: boolean; approvals: boolean }): string | undefined {
  if (o.adminToken && o.insecureNoToken) return `give an admin token or ${INSECURE_FLAG}, not both`;
  if (o.approvals && !o.adminToken && !o.insecureNoToken) {
    return (
      'the policy turns on human approval (accessRequests), whose admin API approves and denies calls: ' +
      `set an admin token (AGENTS_CHAIN_ADMIN_TOKEN or --admin-token-file), or pass ${INSECURE_FLAG} (${INSECURE_ENV}=true) ` +
      'to serve it to anyone who reaches the admin listener'
    );
  }
  return undefined;
}

/**
 * A gate for a log line: returns how many calls were held back since the last
 * line when it is time to write one, undefined while it is not. Pure but for
 * the clock it is given.
 */
export function throttled(now: () => number, intervalMs: number): () => number | undefined {
  let last = -Infinity;
  let held = 0;
  return () => {
    const t = now();
    if (t - last < intervalMs) {
      held++;
      return undefined;
    }
    last = t;
    const n = held;
    held = 0;
    return n;
  };
}

/**
 * The one guard of the admin API: the bearer token compared in constant time
 * (of its digest); no token configured closes the API (admin_disabled) unless
 * it was opened explicitly. Refused calls are logged at most once per
 * interval, with a count: anything on the pod network can reach this port.
 */
export function adminGuard(o: {
  adminToken?: string;
  insecureNoToken?: boolean;
  log: Logger;
  now?: () => number;
}): (req: IncomingMessage) => Denial | undefined {
  const expected = o.adminToken ? digest(o.adminToken) : undefined;
  const open = !expected && o.insecureNoToken === true;
  const refusedLog = throttled(o.now ?? Date.now, UNAUTHORIZED_LOG_INTERVAL_MS);
  return (req) => {
    if (open) return undefined;
    const what = `${req.method ?? ''} ${(req.url ?? '').split('?')[0] ?? ''}`;
    if (!expected) return deny('admin_disabled', `set AGENTS_CHAIN_ADMIN_TOKEN or --admin-token-file to use ${what} on the admin listener`);
    const m = /^Bearer +(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (m?.[1] !== undefined && timingSafeEqual(digest(m[1]), expected)) return undefined;
    const suppressed = refusedLog();
    if (suppressed !== undefined)
      o.log.warn('admin call without a valid token', {
        method: req.method,
        path: (req.url ?? '').split('?')[0],
        ...(suppressed ? { alsoRefusedSinceLastLine: suppressed } : {}),
      });
    return deny('unauthorized', 'admin bearer token required');
  };
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
