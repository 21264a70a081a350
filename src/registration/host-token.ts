import { audienceProblem, checkTimes, jtiProblem, stringProblem, timeProblem, type TimeClaims } from '../auth/claims.js';
import { decodeJws, signatureValid } from '../auth/jws.js';
import { deny, isDenial, type Denial } from '../errors.js';
import { HOST_TOKEN_TYPE } from '../identity/token-types.js';
import { DISPLAY_NAME, readPublicKey } from '../identity/keys.js';
import type { DynamicHosts, Host, Policy } from '../policy/types.js';

export interface HostClaims extends TimeClaims {
  iss: string;
  aud: string;
  jti: string;
  /** Registration tokens: the new agent's public key (an Ed25519 JWK, public part only). */
  agent_public_key?: Record<string, unknown>;
}

export interface VerifiedHostToken {
  host: Host;
  claims: HostClaims;
}

/** Form, header and claim types of a host token (the one reading both kinds of host use), its payload kept for the self-registering host's key. */
function readHostToken(token: string): { claims: HostClaims; payload: Record<string, unknown> } | Denial {
  const jws = decodeJws(token, HOST_TOKEN_TYPE);
  if (typeof jws === 'string') return deny('token_invalid', jws);
  const p = jws.payload;
  const key = p.agent_public_key;
  const problem =
    stringProblem(p, 'iss') ??
    audienceProblem(p, "the service's issuer") ??
    timeProblem(p) ??
    jtiProblem(p) ??
    (key !== undefined && (typeof key !== 'object' || key === null || Array.isArray(key)) ? 'agent_public_key must be a JWK object' : undefined);
  if (problem) return deny('token_invalid', problem);
  const claims: HostClaims = { iss: p.iss as string, aud: p.aud as string, iat: p.iat as number, exp: p.exp as number, jti: p.jti as string };
  if (p.nbf !== undefined) claims.nbf = p.nbf as number;
  if (key) claims.agent_public_key = key as Record<string, unknown>;
  return { claims, payload: p };
}

/**
 * A host's token (typ host+jwt), through the same decoder and claim rules as
 * an agent token (auth/jws.ts, auth/claims.ts) and in the same order: form and
 * header, claim types, `iss` names a trusted host (its key thumbprint), `aud`
 * is this service's issuer, the signature with that host's key only, the
 * lifetime (at most 60 s). The jti is spent by its own stage (the replay
 * store). Pure.
 */
export function verifyHostToken(token: string, hosts: ReadonlyMap<string, Host>, issuer: string, nowSeconds: number): VerifiedHostToken | Denial {
  const read = readHostToken(token);
  if (isDenial(read)) return read;
  const { claims } = read;
  const host = hosts.get(claims.iss);
  if (!host) return deny('host_not_found', 'no trusted host has this key (iss is not a host key thumbprint in the policy)');
  if (claims.aud !== issuer) return deny('token_invalid', `token is for "${claims.aud}", not this service ("${issuer}")`);
  if (!signatureValid(token, host.key)) return deny('token_invalid', 'token signature is invalid');
  return checkTimes(claims, nowSeconds) ?? { host, claims };
}

/** A self-registered host is named after its key (a listed host may not take an id beginning with this). */
export const SELF_REGISTERED_HOST_PREFIX = 'hst_';

/**
 * Any host token: a host the policy lists (verifyHostToken), else, when the
 * policy lets hosts register themselves (dynamicHosts), a host that proves
 * its own key: the token carries it as `host_public_key` (a safe Ed25519
 * public JWK), `iss` is that key's thumbprint and the token is signed by it.
 * Such a host is `hst_<thumbprint>`, with the policy's dynamicHosts defaults
 * and limit; it is the same host whenever it signs with that key. Without
 * dynamicHosts an unlisted host stays host_not_found.
 */
export async function verifyAnyHostToken(
  token: string,
  policy: Pick<Policy, 'hosts' | 'dynamicHosts' | 'provider'>,
  nowSeconds: number,
): Promise<VerifiedHostToken | Denial> {
  const issuer = policy.provider.issuer;
  const listed = verifyHostToken(token, policy.hosts, issuer, nowSeconds);
  if (!isDenial(listed) || listed.code !== 'host_not_found' || !policy.dynamicHosts) return listed;
  return verifySelfRegisteredHost(token, policy.dynamicHosts, issuer, nowSeconds);
}

async function verifySelfRegisteredHost(token: string, settings: DynamicHosts, issuer: string, nowSeconds: number): Promise<VerifiedHostToken | Denial> {
  const read = readHostToken(token);
  if (isDenial(read)) return read;
  const p = read.payload;
  const jwk = p.host_public_key;
  if (jwk === undefined)
    return deny('host_not_found', 'no listed host has this key; a host registers itself by sending its public key as host_public_key (iss its thumbprint)');
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) return deny('token_invalid', 'host_public_key must be a JWK object');
  const imported = await readPublicKey(jwk as Record<string, unknown>);
  if (typeof imported === 'string') return deny('token_invalid', `host_public_key is refused: ${imported}`);
  const { key, thumbprint } = imported;
  const { claims } = read;
  if (claims.iss !== thumbprint) return deny('token_invalid', 'iss is not the thumbprint of host_public_key');
  if (claims.aud !== issuer) return deny('token_invalid', `token is for "${claims.aud}", not this service ("${issuer}")`);
  if (!signatureValid(token, key)) return deny('token_invalid', 'token signature is not by host_public_key');
  const late = checkTimes(claims, nowSeconds);
  if (late) return late;
  const id = `${SELF_REGISTERED_HOST_PREFIX}${thumbprint}`;
  const name = typeof p.host_name === 'string' && DISPLAY_NAME.test(p.host_name) ? p.host_name : id;
  return { host: { id, name, key, thumbprint, defaults: settings.defaults, maxAgents: settings.maxAgents }, claims };
}

/** The host a registered agent belongs to, under the active policy: listed, or self-registered while the policy allows it. */
export function hostNamed(policy: Pick<Policy, 'hosts' | 'dynamicHosts'>, hostId: string): Pick<Host, 'id' | 'defaults' | 'maxAgents'> | undefined {
  for (const h of policy.hosts.values()) if (h.id === hostId) return h;
  if (policy.dynamicHosts && hostId.startsWith(SELF_REGISTERED_HOST_PREFIX))
    return { id: hostId, defaults: policy.dynamicHosts.defaults, maxAgents: policy.dynamicHosts.maxAgents };
  return undefined;
}
