import { bodyHash } from '../auth/binding.js';
import { randomUUID } from 'node:crypto';
import { importJWK, SignJWT, type JWK } from 'jose';
import { thumbprintOf } from './keys.js';

import { AGENT_PROOF_TYPE, AGENT_TOKEN_TYPE, HOST_TOKEN_TYPE, hostTokenHash, MAX_TOKEN_LIFETIME_SECONDS } from './token-types.js';

export { AGENT_PROOF_TYPE, AGENT_TOKEN_TYPE, HOST_TOKEN_TYPE, hostTokenHash, MAX_TOKEN_LIFETIME_SECONDS };

/**
 * A token lifetime the sidecar accepts (src/auth/claims.ts, checkTimes: exp after iat, at most
 * MAX_TOKEN_LIFETIME_SECONDS, integer seconds), or a RangeError at the source: a signer that
 * minted a longer-lived token would only see every call refused as token_invalid.
 */
export function tokenLifetime(ttlSeconds: number | undefined): number {
  const ttl = ttlSeconds ?? MAX_TOKEN_LIFETIME_SECONDS;
  if (!Number.isSafeInteger(ttl) || ttl < 1 || ttl > MAX_TOKEN_LIFETIME_SECONDS) {
    throw new RangeError(
      `ttlSeconds must be a whole number of seconds from 1 to ${MAX_TOKEN_LIFETIME_SECONDS} (the sidecar refuses a token that lives longer), got ${ttl}`,
    );
  }
  return ttl;
}

/**
 * The request a token is bound to (claims htm, htu, ath): the sidecar then accepts it on that request only.
 * `url` is the URL the agent calls the service at (its public one: the issuer's origin); query and fragment are not bound.
 */
export interface RequestToBind {
  method: string;
  url: string | URL;
  /** The exact body bytes that will be sent (none: an empty body). */
  body?: string | Uint8Array;
}

export interface AgentSigner {
  agentId: string;
  /** The key thumbprint, sent as `iss`. */
  thumbprint: string;
  /** Mints a fresh single-use token for one call of `capability`; `ttlSeconds` 1 to 60 [60], anything else throws a RangeError. */
  sign(capability: string, options?: { ttlSeconds?: number; now?: number; jti?: string; bind?: RequestToBind }): Promise<string>;
}

/**
 * Client helper for agents written in TypeScript: one signer per agent key,
 * one fresh token per call.
 *
 *   const signer = await createAgentSigner(privateJwk, 'agent-billing-bot');
 *   fetch(url, { headers: { authorization: `Bearer ${await signer.sign('createInvoice')}` } });
 */
export async function createAgentSigner(privateJwk: JWK, agentId: string, profile?: AgentAuthProfile): Promise<AgentSigner> {
  const { key, thumbprint } = await signingKey(privateJwk);
  return {
    agentId,
    thumbprint,
    async sign(capability, options = {}) {
      const ttl = tokenLifetime(options.ttlSeconds);
      const iat = options.now ?? Math.floor(Date.now() / 1000);
      const claims: Record<string, unknown> = options.bind ? bindingClaims(options.bind) : {};
      if (profile) {
        // agent-auth-v1: the service is the audience, the key is named by kid, and the token is for this one capability.
        claims.capabilities = [capability];
        const jwt = new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ: AGENT_TOKEN_TYPE, kid: thumbprint }).setSubject(agentId);
        if (profile.hostId !== undefined) jwt.setIssuer(profile.hostId);
        return jwt
          .setAudience(profile.issuer)
          .setIssuedAt(iat)
          .setExpirationTime(iat + ttl)
          .setJti(options.jti ?? randomUUID())
          .sign(key);
      }
      return new SignJWT(claims)
        .setProtectedHeader({ alg: 'EdDSA', typ: AGENT_TOKEN_TYPE })
        .setSubject(agentId)
        .setIssuer(thumbprint)
        .setAudience(capability)
        .setIssuedAt(iat)
        .setExpirationTime(iat + ttl)
        .setJti(options.jti ?? randomUUID())
        .sign(key);
    },
  };
}

/**
 * Tokens in the Agent Auth Protocol's form (a service whose policy says
 * `tokenProfile: agent-auth-v1`): `aud` the service's issuer URL, `kid` the
 * key's thumbprint, `capabilities` the one capability, `iss` the host (or none).
 */
export interface AgentAuthProfile {
  profile: 'agent-auth-v1';
  /** The service's issuer, as its discovery document publishes it. */
  issuer: string;
  /** The host that registered the agent (its id or key thumbprint), sent as iss; omitted: no iss. */
  hostId?: string;
}

function bindingClaims(bind: RequestToBind): { htm: string; htu: string; ath: string } {
  const url = new URL(String(bind.url));
  const body = typeof bind.body === 'string' ? Buffer.from(bind.body) : bind.body;
  return { htm: bind.method.toUpperCase(), htu: `${url.origin}${url.pathname}`, ath: bodyHash(body) };
}

/** An Ed25519 private JWK, imported for signing, and its public key's thumbprint (the tokens' `iss`). */
async function signingKey(privateJwk: JWK) {
  if (privateJwk.kty !== 'OKP' || privateJwk.crv !== 'Ed25519' || !privateJwk.d) {
    throw new Error('an Ed25519 private JWK (kty OKP, crv Ed25519, with "d") is required');
  }
  return { key: await importJWK(privateJwk, 'EdDSA'), thumbprint: await thumbprintOf(privateJwk) };
}

/** One-shot form of createAgentSigner(...).sign(...). */
export async function mintAgentToken(opts: { privateJwk: JWK; agentId: string; capability: string; ttlSeconds?: number }): Promise<string> {
  const signer = await createAgentSigner(opts.privateJwk, opts.agentId);
  return signer.sign(opts.capability, { ttlSeconds: opts.ttlSeconds });
}

export interface HostSigner {
  thumbprint: string;
  /**
   * Mints a single-use host token for `audience` (the service's issuer). With
   * `agentPublicKey` it is a registration token for that agent key. `ttlSeconds` 1 to 60 [60], else a RangeError.
   */
  sign(audience: string, options?: { agentPublicKey?: JWK; ttlSeconds?: number; now?: number; jti?: string }): Promise<string>;
}

export interface HostSignerOptions {
  /**
   * A host the service's policy does not list, registering itself (the policy's dynamicHosts): every
   * token carries the host's public key as `host_public_key` (and `name` as `host_name`).
   */
  selfRegistering?: boolean;
  name?: string;
}

/**
 * A host identity: its private JWK (kept in a Secret, so it is stable across restarts) signs host+jwt tokens.
 *
 *   const host = await createHostSigner(hostPrivateJwk);
 *   fetch(`${url}/agent/status?agent_id=${id}`, { headers: { authorization: `Bearer ${await host.sign(issuer)}` } });
 */
export async function createHostSigner(privateJwk: JWK, opts: HostSignerOptions = {}): Promise<HostSigner> {
  const { key, thumbprint } = await signingKey(privateJwk);
  const self = opts.selfRegistering ? { host_public_key: { kty: 'OKP', crv: 'Ed25519', x: privateJwk.x }, ...(opts.name ? { host_name: opts.name } : {}) } : {};
  return {
    thumbprint,
    async sign(audience, options = {}) {
      const ttl = tokenLifetime(options.ttlSeconds);
      const iat = options.now ?? Math.floor(Date.now() / 1000);
      const agent = options.agentPublicKey ? { agent_public_key: { kty: 'OKP', crv: 'Ed25519', x: options.agentPublicKey.x } } : {};
      return new SignJWT({ ...self, ...agent })
        .setProtectedHeader({ alg: 'EdDSA', typ: HOST_TOKEN_TYPE })
        .setIssuer(thumbprint)
        .setAudience(audience)
        .setIssuedAt(iat)
        .setExpirationTime(iat + ttl)
        .setJti(options.jti ?? randomUUID())
        .sign(key);
    },
  };
}

/**
 * Proof of possession for POST /agent/register: a compact JWS signed by the
 * agent's own key (typ agent-proof+jwt), `iss` its thumbprint, `aud` the
 * service's issuer, `ath` the hash of the host token it accompanies, at most
 * 60 s of lifetime. Sent as `agent_proof` in the registration body.
 */
export async function createAgentProof(
  agentPrivateJwk: JWK,
  opts: { hostToken: string; audience: string; now?: number; ttlSeconds?: number },
): Promise<string> {
  const ttl = tokenLifetime(opts.ttlSeconds);
  const { key, thumbprint } = await signingKey(agentPrivateJwk);
  const iat = opts.now ?? Math.floor(Date.now() / 1000);
  return new SignJWT({ ath: hostTokenHash(opts.hostToken) })
    .setProtectedHeader({ alg: 'EdDSA', typ: AGENT_PROOF_TYPE })
    .setIssuer(thumbprint)
    .setAudience(opts.audience)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ttl)
    .setJti(randomUUID())
    .sign(key);
}

/**
 * Everything a host sends to register an agent whose private key it holds:
 * the host token (carrying the agent's public key) and the body with the
 * agent's proof bound to that token.
 */
export async function registrationRequest(
  host: HostSigner,
  agentPrivateJwk: JWK,
  audience: string,
  body: Record<string, unknown>,
): Promise<{ token: string; body: Record<string, unknown> }> {
  const token = await host.sign(audience, { agentPublicKey: agentPrivateJwk });
  return { token, body: { ...body, agent_proof: await createAgentProof(agentPrivateJwk, { hostToken: token, audience }) } };
}
