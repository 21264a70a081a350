import { checkTimes, stringProblem, audienceProblem, timeProblem } from '../auth/claims.js';
import { decodeJws, signatureValid } from '../auth/jws.js';
import { deny, type Denial } from '../errors.js';
import { AGENT_PROOF_TYPE, hostTokenHash } from '../identity/token-types.js';
import type { VerificationKey } from '../policy/types.js';

/**
 * Proof that whoever registers an agent key holds its private key: without
 * it a host could register another host's agent key first (the agent id is
 * derived from the key) and lock its real owner out. The proof is an
 * agent-proof+jwt signed by the agent key being registered, through the same
 * decoder and claim rules as every token: `iss` that key's thumbprint, `aud`
 * this service's issuer, `ath` the SHA-256 of the very host token it comes
 * with, at most 60 s of lifetime. The host token is single-use (its jti is
 * spent), so its proof cannot be used twice either, and it cannot be moved to
 * another host's token. Every refusal is proof_invalid. Pure.
 */
export function verifyAgentProof(
  proof: unknown,
  agent: { key: VerificationKey; thumbprint: string },
  hostToken: string,
  issuer: string,
  nowSeconds: number,
): Denial | undefined {
  const refuse = (why: string) => deny('proof_invalid', `agent_proof: ${why}`);
  if (proof === undefined)
    return refuse(
      `missing: sign an ${AGENT_PROOF_TYPE} with the agent's key (iss its thumbprint, aud the issuer, ath the host token's SHA-256) and send it as agent_proof`,
    );
  if (typeof proof !== 'string' || proof.length > 4096) return refuse('must be a compact JWS string of at most 4 KiB');
  const jws = decodeJws(proof, AGENT_PROOF_TYPE);
  if (typeof jws === 'string') return refuse(jws);
  const p = jws.payload;
  const problem = stringProblem(p, 'iss') ?? audienceProblem(p, "the service's issuer") ?? timeProblem(p) ?? stringProblem(p, 'ath');
  if (problem) return refuse(problem);
  if (p.iss !== agent.thumbprint) return refuse('iss is not the thumbprint of the agent key being registered');
  if (p.aud !== issuer) return refuse(`it is for "${p.aud as string}", not this service ("${issuer}")`);
  if (p.ath !== hostTokenHash(hostToken)) return refuse("ath is not the SHA-256 of this registration's host token (a proof made for another token)");
  if (!signatureValid(proof, agent.key)) return refuse('signature is not by the agent key being registered');
  const late = checkTimes({ iat: p.iat as number, exp: p.exp as number, ...(p.nbf !== undefined ? { nbf: p.nbf as number } : {}) }, nowSeconds);
  return late ? refuse(late.message) : undefined;
}
