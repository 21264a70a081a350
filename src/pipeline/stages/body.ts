import { isDenial, type Denial } from '../../errors.js';
import { hasBody, readBodyLimited } from '../../http/body.js';
import { bodyOverrideDenial } from '../../http/method-override.js';
import type { Deps } from '../deps.js';
import { advance, type Buffered, type Routed } from '../phases.js';

/**
 * Buffers the body (bounded) so the bytes checked are the bytes forwarded.
 * A body that overrides the method ("_method" in a form or JSON body) is
 * refused on every route that has one, public ones included: the app would
 * route it as another method, one the policy may guard with a token.
 */
export async function readBody<P extends Routed>(call: P, deps: Deps): Promise<(P & Buffered) | Denial> {
  if (!hasBody(call.req)) return advance(call, { body: undefined });
  const { route } = call;
  const limit = route.kind === 'capability' ? (route.capability.maxBodyBytes ?? deps.limits.maxBodyBytes) : deps.limits.maxBodyBytes;
  const body = await readBodyLimited(call.req, limit);
  if (isDenial(body)) return body;
  return (await bodyOverrideDenial(call.req, body, limit)) ?? advance(call, { body });
}
