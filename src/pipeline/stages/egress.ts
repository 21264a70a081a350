import { deny, type Denial } from '../../errors.js';
import { parseStrictJsonBytes } from '../../json/strict.js';
import type { Capability } from '../../policy/types.js';
import type { Deps } from '../deps.js';
import { advance, type Buffered, type CapabilityCall, type Variants, type WithToken } from '../phases.js';

/**
 * Egress: one route may be several capabilities (Anthropic's /v1/messages is
 * message, message.stream with "stream": true, message.beta with an
 * anthropic-beta header). The first variant that applies names the call; a
 * call that is several variants at once (a streamed beta message) needs a grant for each.
 */
export function selectVariant<P extends CapabilityCall & Buffered>(call: P): (P & Variants) | Denial {
  const { route } = call;
  if (!route.variants) return advance(call, { alsoRequires: [] });
  const applies: Capability[] = [];
  let json: Record<string, unknown> | undefined;
  for (const v of route.variants) {
    if (v.header && call.req.headers[v.header] !== undefined) applies.push(v.capability);
    if (!v.bodyFlag || !call.body?.length) continue;
    if (json === undefined) {
      try {
        const parsed = parseStrictJsonBytes(call.body);
        json = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
      } catch (err) {
        return deny('invalid_body', `the body is not valid JSON: ${(err as Error).message}`);
      }
    }
    const flag = json[v.bodyFlag];
    // Only a real boolean: a provider that coerced "true" or 1 would stream what was checked as a plain call.
    if (flag !== undefined && typeof flag !== 'boolean') return deny('invalid_body', `"${v.bodyFlag}" must be true or false`);
    if (flag === true) applies.push(v.capability);
  }
  const [first, ...also] = applies;
  if (!first) return advance(call, { alsoRequires: [] });
  return advance(call, { route: { ...route, capability: first }, alsoRequires: also.map((c) => c.name) });
}

/** Egress: the sidecar holds the agent's key and signs each call itself, then verifies it like any other. */
export async function signAsAgent<P extends CapabilityCall>(call: P, deps: Deps): Promise<(P & WithToken) | Denial> {
  if (!deps.egress) return deny('internal_error', 'egress mode without an agent key');
  return advance(call, { token: await deps.egress.signer.sign(call.route.capability.name) });
}
