import { request } from '../http/undici.js';
import { redactForReview } from '../audit/redact.js';
import type { Logger } from '../log.js';
import { slackRequestText, slackResolvedText } from './slack.js';
import type { AccessRequest } from './types.js';

/** Tells humans about access requests. A failing notifier never loses a request: it stays pending and approvable. */
export interface Notifier {
  notify(request: AccessRequest, code: string): Promise<void>;
  onResolved(request: AccessRequest): Promise<void>;
}

export const silentNotifier: Notifier = { notify: async () => {}, onResolved: async () => {} };

export interface WebhookOptions {
  url: string;
  format: 'json' | 'slack';
  headers: Record<string, string>;
  retries: number;
  /** Where a human approves, for the message (the admin listener's URL). */
  adminUrl?: string;
  log: Logger;
  /** Backoff before retry n (ms); exponential from 200 ms by default. */
  backoffMs?: (attempt: number) => number;
}

/**
 * POSTs requests and outcomes to a webhook (generic JSON or Slack incoming-webhook format), with retries.
 * The JSON format carries the agent's text as JSON strings: a receiver that renders them must escape them itself.
 */
export class WebhookNotifier implements Notifier {
  constructor(private readonly opts: WebhookOptions) {}

  async notify(r: AccessRequest, code: string): Promise<void> {
    const approvePath = `/approvals/${r.id}/approve`;
    // Secrets are hidden from the reviewer, and the message says which ones: the approved call sends them all.
    const shown = redactForReview(r.args);
    const payload =
      this.opts.format === 'slack'
        ? { text: slackRequestText(r, code, shown.value, shown.redacted) }
        : {
            event: 'access_request',
            requestId: r.id,
            code,
            agentId: r.agentId,
            agentName: r.agentName,
            capability: r.capability,
            method: r.method,
            path: r.target,
            args: shown.value,
            redacted: shown.redacted,
            reason: r.reason,
            violations: r.violations,
            expiresAt: new Date(r.expiresAt).toISOString(),
            approve: { method: 'POST', url: `${this.opts.adminUrl ?? ''}${approvePath}`, body: { code, scope: 'once | value' } },
            deny: { method: 'POST', url: `${this.opts.adminUrl ?? ''}/approvals/${r.id}/deny`, body: { code, reason: '...' } },
          };
    await this.post(payload, r.id);
  }

  async onResolved(r: AccessRequest): Promise<void> {
    const payload =
      this.opts.format === 'slack'
        ? { text: slackResolvedText(r) }
        : {
            event: 'access_request_resolved',
            requestId: r.id,
            agentId: r.agentId,
            capability: r.capability,
            outcome: r.state,
            scope: r.scope,
            reason: r.denyReason,
          };
    await this.post(payload, r.id);
  }

  private async post(payload: unknown, requestId: string): Promise<void> {
    const body = JSON.stringify(payload);
    const backoff = this.opts.backoffMs ?? ((n) => 200 * 2 ** n);
    let lastError = '';
    for (let attempt = 0; attempt <= this.opts.retries; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, backoff(attempt - 1)));
      try {
        const res = await request(this.opts.url, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', ...this.opts.headers },
          headersTimeout: 5_000,
          bodyTimeout: 5_000,
        });
        await res.body.dump();
        if (res.statusCode < 300) return;
        lastError = `HTTP ${res.statusCode}`;
      } catch (err) {
        lastError = (err as Error).message;
      }
    }
    // The URL may itself be a secret (Slack): never log it.
    this.opts.log.error('notifier failed', { requestId, attempts: this.opts.retries + 1, error: lastError });
    throw new Error(`notifier failed after ${this.opts.retries + 1} attempts: ${lastError}`);
  }
}
