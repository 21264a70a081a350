import type { AccessRequest, AccessRequestState, ValueApproval } from './types.js';

/**
 * Where access requests and value approvals live. Resolution is a
 * compare-and-set from `pending`, so a request is resolved once even if two
 * humans click at once. Memory now; Redis for replicas behind the same shape.
 */
export interface AccessRequestStore {
  create(request: AccessRequest): Promise<void>;
  get(id: string): Promise<AccessRequest | undefined>;
  pending(): Promise<AccessRequest[]>;
  /** Moves a pending request to `state`; undefined when it was not pending. */
  resolve(id: string, state: Exclude<AccessRequestState, 'pending'>, patch: Partial<AccessRequest>): Promise<AccessRequest | undefined>;
  update(id: string, patch: Partial<AccessRequest>): Promise<AccessRequest | undefined>;
  addValueApproval(approval: ValueApproval): Promise<void>;
  valueApprovals(nowMs: number): Promise<ValueApproval[]>;
  deleteValueApproval(id: string): Promise<boolean>;
  /** For shared stores: called with a request id whenever another process changes it. */
  onChange?(listener: (id: string) => void): () => void;
}

export class MemoryAccessRequestStore implements AccessRequestStore {
  private readonly requests = new Map<string, AccessRequest>();
  private readonly approvals = new Map<string, ValueApproval>();

  constructor(private readonly keepResolvedMs = 24 * 3_600_000) {}

  async create(request: AccessRequest): Promise<void> {
    this.requests.set(request.id, { ...request });
    this.prune(request.createdAt);
  }

  async get(id: string): Promise<AccessRequest | undefined> {
    const r = this.requests.get(id);
    return r && { ...r };
  }

  async pending(): Promise<AccessRequest[]> {
    return [...this.requests.values()].filter((r) => r.state === 'pending').map((r) => ({ ...r }));
  }

  async resolve(id: string, state: Exclude<AccessRequestState, 'pending'>, patch: Partial<AccessRequest>): Promise<AccessRequest | undefined> {
    const r = this.requests.get(id);
    if (!r || r.state !== 'pending') return undefined;
    Object.assign(r, patch, { state });
    this.prune(r.resolvedAt ?? Date.now());
    return { ...r };
  }

  async update(id: string, patch: Partial<AccessRequest>): Promise<AccessRequest | undefined> {
    const r = this.requests.get(id);
    if (!r) return undefined;
    Object.assign(r, patch);
    return { ...r };
  }

  async addValueApproval(approval: ValueApproval): Promise<void> {
    this.approvals.set(approval.id, { ...approval });
  }

  async valueApprovals(nowMs: number): Promise<ValueApproval[]> {
    for (const [id, a] of this.approvals) if (a.expiresAt <= nowMs) this.approvals.delete(id);
    return [...this.approvals.values()].map((a) => ({ ...a }));
  }

  async deleteValueApproval(id: string): Promise<boolean> {
    return this.approvals.delete(id);
  }

  /** Resolved requests are kept a while for status polls, then forgotten. */
  private prune(nowMs: number): void {
    for (const [id, r] of this.requests) {
      if (r.state !== 'pending' && (r.resolvedAt ?? r.expiresAt) + this.keepResolvedMs < nowMs) this.requests.delete(id);
    }
  }
}
