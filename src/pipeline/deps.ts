import type { ApprovalService } from '../approvals/service.js';
import type { AuditTrail } from '../audit/trail.js';
import type { ReplayStore } from '../auth/replay.js';
import type { AgentSigner } from '../identity/client.js';
import type { Logger } from '../log.js';
import type { SidecarMetrics } from '../metrics/metrics.js';
import type { Policy } from '../policy/types.js';
import type { RegisteredAgents } from '../registration/directory.js';
import type { Upstream } from '../app/upstream.js';
import type { Limits } from '../sidecar/limits.js';
import type { McpSessionStore } from '../mcp/sessions.js';

/**
 * What the pipeline needs from outside the request: the policy, the stores,
 * the app. One object per policy version: a reload swaps it whole, so a call
 * finishes under the policy it started with.
 */
export interface Deps {
  policy: Policy;
  replay: ReplayStore;
  /** The header agents send their token in (Authorization unless configured). */
  tokenHeader: string;
  limits: Limits;
  now: () => number;
  log: Logger;
  upstream: Upstream;
  /** Present when request_permission is configured. */
  approvals?: ApprovalService;
  /** Present when an audit key is configured. */
  audit?: AuditTrail;
  metrics?: SidecarMetrics;
  /** Agents registered by hosts (consulted while the policy lists hosts). */
  registered?: RegisteredAgents;
  /** Which agent opened each MCP session (sessions of the mcp: section's servers). */
  mcpSessions: McpSessionStore;
  /** Egress mode: the agent's signer and the provider credential header set on every checked call. */
  egress?: { signer: AgentSigner; credential?: [name: string, value: string] };
}
