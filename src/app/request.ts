import { upstreamRequestHeaders } from '../http/headers.js';

/** Who a checked call is, for the app's identity headers. */
export interface CheckedAs {
  agentId: string;
  agentName: string;
  capability: string;
}

/** How the sidecar runs: the agent token's header (stripped), and in egress the provider credential (added). */
export interface HeaderRules {
  tokenHeader: string;
  egress?: { credential?: [name: string, value: string] };
}

/**
 * The header list the app gets, by one rule for every way a call reaches it
 * (a checked capability call, a public route, a call a human approved):
 * ingress adds who the agent is and where it called from and strips its
 * token; egress tells the provider nothing of the agent and sends the
 * sidecar's credential, only on checked calls (an unmapped path passes
 * through as the agent sent it, never with the sidecar's key).
 */
export function appRequestHeaders(
  raw: readonly string[],
  o: { requestId: string; bodyLength?: number; clientAddress?: string; checked?: CheckedAs },
  rules: HeaderRules,
): string[] {
  const egress = rules.egress;
  const checked = o.checked;
  return upstreamRequestHeaders(raw, {
    tokenHeader: checked && !egress ? rules.tokenHeader : undefined,
    credential: checked ? egress?.credential : undefined,
    // Egress: the remote's own Host (undici sets it from the origin), checked or not.
    dropHost: egress !== undefined,
    identity: checked && !egress ? checked : undefined,
    // The app's client address is the sidecar's peer (the caller's own headers for it are dropped); egress tells the provider nothing.
    clientAddress: egress ? undefined : o.clientAddress,
    requestId: o.requestId,
    bodyLength: o.bodyLength,
  });
}

const NOT_KEPT = new Set(['prefer', 'content-type', 'content-length', 'x-request-id']);

/**
 * The caller's own headers (accept, user-agent, ...) kept with an access
 * request, to send when a human approves: what a normal call would forward,
 * minus the token and what belongs to request_permission itself.
 */
export function keptCallerHeaders(raw: readonly string[], tokenHeader: string): string[] {
  const kept = upstreamRequestHeaders(raw, { tokenHeader, requestId: '' });
  const out: string[] = [];
  for (let i = 0; i + 1 < kept.length; i += 2) {
    const name = kept[i] ?? '';
    if (!NOT_KEPT.has(name.toLowerCase())) out.push(name, kept[i + 1] ?? '');
  }
  return out;
}
