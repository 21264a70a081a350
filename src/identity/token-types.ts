import { createHash } from 'node:crypto';

// The token types and bounds both sides share. Kept apart from the signers (client.ts, which loads jose)
// so the sidecar's verifying path does not load a JWT library it never calls.

export const AGENT_TOKEN_TYPE = 'agent+jwt';
export const HOST_TOKEN_TYPE = 'host+jwt';
export const AGENT_PROOF_TYPE = 'agent-proof+jwt';
/** The longest lifetime a verifier accepts (exp - iat). */
export const MAX_TOKEN_LIFETIME_SECONDS = 60;

/**
 * The `ath` of an agent proof: base64url SHA-256 of the host token's ASCII
 * text (RFC 9449 §4.2, DPoP's access-token hash), which binds the proof to
 * exactly one single-use registration token.
 */
export function hostTokenHash(hostToken: string): string {
  return createHash('sha256').update(hostToken, 'ascii').digest('base64url');
}
