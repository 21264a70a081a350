import type { ConstraintViolation } from '../errors.js';

export type AccessRequestState = 'pending' | 'approved' | 'denied' | 'expired';
export type ApprovalScope = 'once' | 'value';

/** What the approved call returned (the app's answer, buffered). */
export interface ExecutionOutcome {
  status: number;
  contentType?: string;
  /** Parsed JSON when the app answered JSON, else the text. */
  body: unknown;
}

/** An agent's request for a call outside its limits, waiting for a human. */
export interface AccessRequest {
  id: string;
  agentId: string;
  agentName: string;
  capability: string;
  /** The exact call that runs if approved. */
  method: string;
  target: string;
  /** Base64 of the JSON body to forward (body methods), if any. */
  body?: string;
  args: unknown;
  reason: string;
  violations: ConstraintViolation[];
  /** Violated fields the call did not contain at all (never remembered by scope=value). */
  absentFields: string[];
  /** The caller's forwardable headers (accept, user-agent, ...), flat name/value pairs. */
  headers: string[];
  createdAt: number;
  expiresAt: number;
  /** SHA-256 (hex) of the single-use approval code; the code itself is only ever sent to the notifier. */
  codeHash: string;
  state: AccessRequestState;
  notified: boolean;
  scope?: ApprovalScope;
  resolvedAt?: number;
  denyReason?: string;
  outcome?: ExecutionOutcome;
}

/** A scope=value approval: these field values now pass for this agent and capability. */
export interface ValueApproval {
  id: string;
  agentId: string;
  capability: string;
  values: Record<string, unknown>;
  requestId: string;
  createdAt: number;
  expiresAt: number;
}
