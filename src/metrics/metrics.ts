import { Registry, collectDefaultMetrics, type Counter, type Gauge, type Histogram } from 'prom-client';
import { CellCounter, CellHistogram } from './cells.js';
import { counter, gauge, histogram, pendingGauge, scrapedCounter, scrapedGauge } from './instruments.js';
import { DENIAL_STATUS } from '../errors.js';
import type { KnownLabels } from './labels.js';

export { knownLabels, NO_ROUTE, PUBLIC_ROUTE, type KnownLabels } from './labels.js';

/** Seconds: 100 µs (the sidecar's own work) up to 10 s (a slow app). */
const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds a human takes to answer: a second up to the 24 h maximum lifetime of a request. */
const DECISION_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400];

export type Decision = 'allowed' | 'denied' | 'error';
export type Resolution = 'approved' | 'denied' | 'expired';
const DECISIONS: readonly Decision[] = ['allowed', 'denied', 'error'];
const RESOLUTIONS: readonly Resolution[] = ['approved', 'denied', 'expired'];
const RESET_CAUSES = ['marker_missing', 'epoch_changed', 'server_changed'] as const;
/** What the sidecar reports at scrape time (read, not pushed: gauges of current state). */
export interface MetricsSources {
  pendingAccessRequests?: () => Promise<number>;
  audit?: () => { recorded: number; buffered: number; spoolBytes: number; oldestUnexportedAgeSeconds: number; available: boolean };
  /** Calls being handled now, and --max-in-flight. */
  inFlight?: () => { current: number; limit: number };
}

export interface MetricsOptions {
  /** Adds agents_chain_agent_requests_total{agent,...}; agents past the cap are counted as "_other". */
  perAgent?: { maxAgents: number };
  /** Default process and Node.js metrics (off in tests that start many sidecars in one process). */
  processMetrics?: boolean;
}

/**
 * The sidecar's Prometheus metrics, on a registry of its own. Every label
 * value comes from a bounded set: capability names from the policy, the
 * fixed error codes, constraint fields named in the policy, exporter names.
 */
export class SidecarMetrics {
  readonly registry = new Registry();
  private readonly agents = new Set<string>();
  private sources: MetricsSources = {};

  // Registered in this order (the order of /metrics); the scrape-time gauges read their sources when scraped.
  // What every call records is kept in cells (cells.ts): plain numbers per call, handed to prom-client when scraped.
  readonly requests = new CellCounter(this.registry, 'agents_chain_requests_total', 'Calls by capability and decision (allowed, denied, error).', [
    'capability',
    'decision',
  ]);
  readonly denials = new CellCounter(this.registry, 'agents_chain_denials_total', 'Refused calls by capability and reason (the stable error code).', [
    'capability',
    'reason',
  ]);
  readonly mcpDenials = new CellCounter(
    this.registry,
    'agents_chain_mcp_denials_total',
    'Refused MCP messages by server path, tool (prompt name, resource template; "(session)" for session traffic, "(undeclared)" for a name the policy does not declare, "(unread)" for a message refused before it was read) and reason.',
    ['server', 'tool', 'reason'],
  );
  readonly violations = new CellCounter(
    this.registry,
    'agents_chain_constraint_violations_total',
    'Constraint violations that refused a call, by capability and constrained field.',
    ['capability', 'field'],
  );
  readonly overhead = new CellHistogram(
    this.registry,
    'agents_chain_overhead_seconds',
    'Time the sidecar adds to a call: total time minus the upstream exchange.',
    LATENCY_BUCKETS,
    ['capability'],
  );
  readonly upstream = new CellHistogram(
    this.registry,
    'agents_chain_upstream_duration_seconds',
    'Time from forwarding a call to the app until its response was relayed.',
    LATENCY_BUCKETS,
    ['capability'],
  );
  readonly tokenVerification = new CellHistogram(
    this.registry,
    'agents_chain_token_verification_seconds',
    'Time to verify one agent token (steps 1-7: header, claims, Ed25519 signature, lifetime).',
    LATENCY_BUCKETS,
  );
  readonly replayStoreErrors: Counter = counter(
    this.registry,
    'agents_chain_replay_store_errors_total',
    'Calls refused because the replay store could not be asked.',
  );
  // Tokens refused for a reset are counted by agents_chain_denials_total{reason="replay_window_reset"}.
  readonly replayStoreResets: Counter<'cause'> = counter(
    this.registry,
    'agents_chain_replay_store_resets_total',
    'Times this sidecar found the shared replay store had lost token ids (marker_missing, epoch_changed, server_changed); older tokens are then refused for one window.',
    ['cause'],
  );
  readonly accessRequestsCreated: Counter<'capability'> = counter(
    this.registry,
    'agents_chain_access_requests_created_total',
    'Access requests (request_permission) created, by capability.',
    ['capability'],
  );
  readonly accessRequestsResolved: Counter<'capability' | 'outcome'> = counter(
    this.registry,
    'agents_chain_access_requests_resolved_total',
    'Access requests resolved, by capability and outcome (approved, denied, expired).',
    ['capability', 'outcome'],
  );
  readonly accessRequestDecision: Histogram<'outcome'> = histogram(
    this.registry,
    'agents_chain_access_request_decision_seconds',
    'Time from an access request to its resolution, by outcome.',
    DECISION_BUCKETS,
    ['outcome'],
  );
  // A store that does not answer (Redis down) must not fail the whole scrape: the gauge keeps its last value.
  private readonly accessRequestsPending = pendingGauge(this.registry, () => this.sources.pendingAccessRequests);
  readonly auditBatchesExported: Counter<'exporter'> = counter(
    this.registry,
    'agents_chain_audit_batches_exported_total',
    'Audit batches acknowledged, by exporter.',
    ['exporter'],
  );
  readonly auditExportFailures: Counter<'exporter'> = counter(
    this.registry,
    'agents_chain_audit_export_failures_total',
    'Failed audit export attempts (each is retried), by exporter.',
    ['exporter'],
  );
  readonly auditDropped: Counter = counter(
    this.registry,
    'agents_chain_audit_entries_dropped_total',
    'Audit records not kept: the spool was down and the in-memory backlog full (those calls were refused), or a batch could not be sealed (logged).',
  );
  readonly auditUnaudited: Counter = counter(
    this.registry,
    'agents_chain_audit_unaudited_calls_total',
    'Calls served while the audit trail could not record them (policy audit.onAuditFailure: allow).',
  );
  // Read from the trail's own count when scraped: nothing to do per call on the request path.
  readonly auditEntries: Counter = scrapedCounter(
    this.registry,
    'agents_chain_audit_entries_total',
    'Audit entries recorded.',
    () => this.audit()?.recorded ?? 0,
  );
  private readonly auditEntriesBuffered = scrapedGauge(
    this.registry,
    'agents_chain_audit_entries_buffered',
    'Audit entries recorded but not yet in the spool (the open batch and batches waiting for space).',
    () => this.audit()?.buffered ?? 0,
  );
  private readonly auditSpoolBytes = scrapedGauge(
    this.registry,
    'agents_chain_audit_spool_bytes',
    'Bytes of sealed batches not yet acknowledged by every exporter.',
    () => this.audit()?.spoolBytes ?? 0,
  );
  private readonly auditOldestUnexportedAgeSeconds = scrapedGauge(
    this.registry,
    'agents_chain_audit_oldest_unexported_age_seconds',
    'Age of the oldest entry not yet acknowledged by every exporter (0 when all are delivered).',
    () => this.audit()?.oldestUnexportedAgeSeconds ?? 0,
  );
  private readonly callsInFlight = scrapedGauge(
    this.registry,
    'agents_chain_calls_in_flight',
    'Calls on the agent port being handled now (past agents_chain_calls_in_flight_limit they are shed: 503 overloaded).',
    () => this.sources.inFlight?.().current ?? 0,
  );
  private readonly callsInFlightLimit = scrapedGauge(
    this.registry,
    'agents_chain_calls_in_flight_limit',
    'The in-flight bound (--max-in-flight).',
    () => this.sources.inFlight?.().limit ?? 0,
  );
  private readonly auditAvailable = scrapedGauge(
    this.registry,
    'agents_chain_audit_available',
    '1 when the audit trail can take entries, 0 when the spool is full or failing (calls are then refused).',
    () => Number(this.audit()?.available ?? true),
  );
  readonly policyReloads: Counter<'result'> = counter(this.registry, 'agents_chain_policy_reloads_total', 'Policy reloads by result (success, failure).', [
    'result',
  ]);
  readonly policyInfo: Gauge<'hash'> = gauge(this.registry, 'agents_chain_policy_info', 'The active policy: 1, labelled with its SHA-256.', ['hash']);
  readonly policyLoadedAt: Gauge = gauge(this.registry, 'agents_chain_policy_loaded_timestamp_seconds', 'When the active policy was loaded (Unix seconds).');
  readonly policyReloadOk: Gauge = gauge(
    this.registry,
    'agents_chain_policy_last_reload_successful',
    '1 when the last policy (re)load succeeded, 0 when it failed and the previous policy is still active.',
  );
  readonly agentRequests?: CellCounter<'agent' | 'capability' | 'decision'>;

  constructor(private readonly opts: MetricsOptions = {}) {
    const r = this.registry;
    if (opts.perAgent) {
      this.agentRequests = new CellCounter(
        r,
        'agents_chain_agent_requests_total',
        `Calls by agent (opt-in; agents past the first ${opts.perAgent.maxAgents} are counted as "_other").`,
        ['agent', 'capability', 'decision'],
      );
    }
    this.policyReloadOk.set(1);
    // Both results exist from the start, so rate() and absent-series alerts behave.
    this.policyReloads.inc({ result: 'success' }, 0);
    this.policyReloads.inc({ result: 'failure' }, 0);
    this.replayStoreErrors.inc(0);
    for (const cause of RESET_CAUSES) this.replayStoreResets.inc({ cause }, 0);
    this.auditUnaudited.inc(0);
    this.auditDropped.inc(0);
    for (const outcome of RESOLUTIONS) this.accessRequestDecision.zero({ outcome });
    if (opts.processMetrics !== false) {
      collectDefaultMetrics({ register: r });
      // Gauges named like counters (promtool check metrics flags them); the per-type gauges without _total stay.
      for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) r.removeSingleMetric(name);
    }
  }

  /** The audit trail's state, read at scrape time. */
  private audit(): ReturnType<NonNullable<MetricsSources['audit']>> | undefined {
    return this.sources.audit?.();
  }

  /**
   * Creates at 0 every series whose labels the policy makes known (calls by capability and decision, denials
   * by capability and every code of the catalogue in errors.ts, constraint fields, access requests by
   * capability and outcome). Called at start and after each reload: series of a capability a reload added
   * start at 0; those of a removed one stay (a counter does not go away while the process lives).
   * Per-agent series are not created: agents registered by hosts are not known ahead, and the per-agent
   * counter feeds top-k panels, not first-event alerts.
   */
  initialise(known: KnownLabels): void {
    const codes = Object.keys(DENIAL_STATUS);
    for (const capability of known.callCapabilities) {
      for (const decision of DECISIONS) this.requests.at(capability, decision);
      for (const reason of codes) this.denials.at(capability, reason);
    }
    for (const [capability, field] of known.constraintFields) this.violations.at(capability, field);
    for (const [server, tool] of known.mcpTools) for (const reason of codes) this.mcpDenials.at(server, tool, reason);
    for (const capability of known.approvalCapabilities) {
      this.accessRequestsCreated.inc({ capability }, 0);
      for (const outcome of RESOLUTIONS) this.accessRequestsResolved.inc({ capability, outcome }, 0);
    }
  }

  /** The audit exporters' names are known once the trail is configured: their delivery counters start at 0. */
  auditExporters(names: readonly string[]): void {
    for (const exporter of names) {
      this.auditBatchesExported.inc({ exporter }, 0);
      this.auditExportFailures.inc({ exporter }, 0);
    }
  }

  /** Where scrape-time gauges read from; set once the parts exist. */
  setSources(sources: MetricsSources): void {
    this.sources = { ...this.sources, ...sources };
  }

  policyLoaded(hash: string, nowMs: number): void {
    this.policyInfo.reset();
    this.policyInfo.set({ hash }, 1);
    this.policyLoadedAt.set(nowMs / 1000);
  }

  /** A reload attempt: a failed one keeps the previous policy active (and says so until the next success). */
  policyReloaded(result: { ok: true; hash: string; nowMs: number } | { ok: false }): void {
    this.policyReloads.inc({ result: result.ok ? 'success' : 'failure' });
    this.policyReloadOk.set(result.ok ? 1 : 0);
    if (result.ok) this.policyLoaded(result.hash, result.nowMs);
  }

  /** One finished call: its decision, why it was refused, and where the time went. */
  callFinished(c: {
    capability: string;
    decision: Decision;
    reason?: string;
    violatedFields?: readonly string[];
    agentId?: string;
    totalSeconds?: number;
    upstreamSeconds?: number;
    /** An MCP message: its server's path and what it named (bounded by the policy). */
    mcp?: { server: string; tool: string };
  }): void {
    const { capability, reason } = c;
    this.requests.at(capability, c.decision).inc();
    if (reason) {
      this.denials.at(capability, reason).inc();
      if (c.mcp) this.mcpDenials.at(c.mcp.server, c.mcp.tool, reason).inc();
      if (reason === 'replay_store_unavailable') this.replayStoreErrors.inc();
    }
    if (c.violatedFields) for (const field of new Set(c.violatedFields)) this.violations.at(capability, field).inc();
    if (c.upstreamSeconds !== undefined) this.upstream.at(capability).observe(c.upstreamSeconds);
    if (c.totalSeconds !== undefined) this.overhead.at(capability).observe(Math.max(0, c.totalSeconds - (c.upstreamSeconds ?? 0)));
    if (this.agentRequests && c.agentId) this.agentRequests.at(this.agentLabel(c.agentId), capability, c.decision).inc();
  }

  accessRequestResolved(capability: string, outcome: Resolution, seconds: number): void {
    this.accessRequestsResolved.inc({ capability, outcome });
    this.accessRequestDecision.observe({ outcome }, seconds);
  }

  metrics(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private agentLabel(id: string): string {
    if (this.agents.has(id)) return id;
    if (this.agents.size >= this.opts.perAgent!.maxAgents) return '_other';
    this.agents.add(id);
    return id;
  }
}
