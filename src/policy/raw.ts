import type { Capability, Constraints, Policy } from './types.js';
import type { Preset } from '../egress/presets.js';
import type { RawMcpServer } from './mcp.js';

/** A policy document as the schema (config/policy.schema.json) admits it, before compile.ts checks and compiles it. */
export interface RawPolicy {
  mode?: 'ingress' | 'egress';
  preset?: Preset['name'];
  unmapped?: 'pass' | 'deny';
  provider: Policy['provider'];
  constraintAware?: boolean;
  audit?: { onAuditFailure?: 'deny' | 'allow'; redact?: string[] };
  violationStatus?: number;
  envelope?: 'errors' | 'all';
  accessRequests?: {
    ttl?: number | string;
    valueApprovalTtl?: number | string;
    maxPending?: number;
    notifier?: {
      webhook?: {
        url?: string;
        urlEnv?: string;
        format?: 'json' | 'slack';
        headers?: Record<string, string>;
        headersEnv?: Record<string, string>;
        retries?: number;
      };
    };
  };
  capabilities?: Capability[];
  mcp?: RawMcpServer[];
  public?: { method: string; path: string }[];
  agents?: { id: string; name: string; publicKey: Record<string, string>; requireBinding?: boolean }[];
  hosts?: {
    id: string;
    name: string;
    publicKey: Record<string, string>;
    defaultCapabilities?: (string | { capability: string; constraints?: Constraints })[];
    maxAgents?: number;
  }[];
  dynamicHosts?: { defaultCapabilities?: (string | { capability: string; constraints?: Constraints })[]; maxAgents?: number };
  grants?: { agent: string; capability: string; status: 'active' | 'revoked'; expiresAt?: string; constraints?: Constraints }[];
}
