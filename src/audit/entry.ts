/** One audited decision: a call (success, denied, error) or an approval event. The seed's fields plus HTTP ones. */
export interface AuditEntry {
  id: string;
  agentId: string | null;
  agentName: string | null;
  capability: string | null;
  /** Redacted arguments. */
  args: unknown;
  result: 'success' | 'denied' | 'error';
  denialReason?: string;
  jti: string | null;
  /** Unix ms. */
  timestamp: number;
  durationMs: number;
  method: string;
  path: string;
  status: number;
  upstreamStatus?: number;
  /** Response body bytes relayed (for a stream, counted when it ended). */
  responseBytes?: number;
  requestId: string;
  permission?: 'not_required' | 'approved' | 'constraint_violated' | 'denied' | 'expired';
  /** For approval events: what happened (created, approved, denied, expired, wrong_code). */
  event?: string;
}
