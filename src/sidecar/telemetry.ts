import type { ApprovalService } from '../approvals/service.js';
import { AuditTrail, type AuditObserver } from '../audit/trail.js';
import type { Logger } from '../log.js';
import { knownLabels, SidecarMetrics, type MetricsSources } from '../metrics/metrics.js';
import type { SidecarOptions } from './options.js';

/** The sidecar's metrics, with the startup policy recorded. */
export function startMetrics(opts: SidecarOptions, now: () => number): SidecarMetrics {
  const metrics = new SidecarMetrics(opts.metrics);
  metrics.policyLoaded(opts.policy.hash, now());
  // Series with labels known now start at 0, so the first denial, expiry or export failure shows in increase().
  metrics.initialise(knownLabels(opts.policy));
  if (opts.audit) metrics.auditExporters(opts.audit.exporters.map((e) => e.name));
  return metrics;
}

/** The encrypted audit trail, started (its spool opened), or undefined without an audit key. */
export async function startAudit(opts: SidecarOptions, log: Logger, metrics: SidecarMetrics): Promise<AuditTrail | undefined> {
  if (!opts.audit) {
    log.warn('audit trail disabled: no audit key (--audit-key-file or AGENTS_CHAIN_AUDIT_KEY)');
    return undefined;
  }
  const audit = new AuditTrail({ ...opts.audit, redactPatterns: opts.policy.audit.redact, log, observer: auditObserver(metrics) });
  await audit.start();
  return audit;
}

/** The audit trail's events, as metrics. */
function auditObserver(m: SidecarMetrics): AuditObserver {
  return {
    exported: (exporter) => m.auditBatchesExported.inc({ exporter }),
    exportFailed: (exporter) => m.auditExportFailures.inc({ exporter }),
    servedWhileUnavailable: () => m.auditUnaudited.inc(),
    dropped: (entries) => m.auditDropped.inc(entries),
  };
}

/** The gauges read at scrape time: pending access requests, and the audit trail's backlog. */
export function metricSources(approvals: ApprovalService | undefined, audit: AuditTrail | undefined, now: () => number): MetricsSources {
  return {
    pendingAccessRequests: approvals ? async () => (await approvals.pending()).length : undefined,
    audit:
      audit &&
      (() => ({
        recorded: audit.stats.recorded,
        buffered: audit.buffered,
        spoolBytes: audit.stats.spoolBytes,
        oldestUnexportedAgeSeconds: audit.oldestUnexportedAgeSeconds(now()),
        available: audit.available,
      })),
  };
}
