import type { Grant } from '../policy/types.js';

/** One of the caller's grants as the capability endpoints show it: status (active, revoked, expired, none) and limits. */
export function grantView(g: Grant | undefined, now: number) {
  if (!g) return { status: 'none' } as const;
  const status = g.status === 'revoked' ? 'revoked' : g.expiresAt !== undefined && g.expiresAt <= now ? 'expired' : 'active';
  return { status, constraints: g.constraints, ...(g.expiresAt !== undefined ? { expires_at: new Date(g.expiresAt).toISOString() } : {}) };
}
