import type { KeyObject } from 'node:crypto';
import type { PathTemplate } from '../routing/template.js';

/** An Ed25519 public key, imported once when the policy loads. */
export type VerificationKey = KeyObject;

/** One argument rule, as written in the policy (the seed's five operators). */
export interface ConstraintRule {
  max?: number;
  min?: number;
  in?: Scalar[];
  not_in?: Scalar[];
  exact?: Scalar;
}
export type Scalar = string | number | boolean;
export type Constraints = Record<string, ConstraintRule>;

export interface Capability {
  name: string;
  description?: string;
  method: string;
  path: string;
  inputSchema?: Record<string, unknown>;
  maxBodyBytes?: number;
}

export interface Agent {
  id: string;
  name: string;
  /** Verification key imported once at load; the only key a token is checked with. */
  key: VerificationKey;
  /** RFC 7638 thumbprint of the public key: the token's expected `iss`. */
  thumbprint: string;
}

export interface Grant {
  agent: string;
  capability: string;
  status: 'active' | 'revoked';
  /** Unix ms, or undefined for no expiry. */
  expiresAt?: number;
  constraints: Constraints;
}

export type Route =
  | { kind: 'capability'; method: string; template: PathTemplate; capability: Capability }
  | { kind: 'public'; method: string; template: PathTemplate };

export interface Provider {
  name: string;
  issuer: string;
  description?: string;
}

/** A loaded, validated policy: everything the request path needs, precomputed. */
export interface Policy {
  file: string;
  /** SHA-256 of the policy file's bytes, hex. */
  hash: string;
  provider: Provider;
  capabilities: ReadonlyMap<string, Capability>;
  routes: readonly Route[];
  agents: ReadonlyMap<string, Agent>;
  /** Keyed by grantKey(agent, capability). */
  grants: ReadonlyMap<string, Grant>;
}

export function grantKey(agent: string, capability: string): string {
  return `${agent}\u0000${capability}`;
}
