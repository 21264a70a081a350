import { describe, expect, it } from 'vitest';
import { ENDPOINTS } from '../../../src/endpoints/index.js';
import { discoveryDocument } from '../../../src/registration/discovery.js';
import { billingPolicy } from '../../support/pipeline.js';

describe('the endpoint registry', () => {
  it('holds each endpoint under its own name', () => {
    for (const [key, e] of Object.entries(ENDPOINTS)) expect(e.name).toBe(key);
  });

  it('is what the policy compiler routes and discovery publishes', async () => {
    const policy = await billingPolicy();
    const routed = policy.routes
      .filter((r) => r.kind === 'endpoint')
      .map((r) => r.kind === 'endpoint' && `${r.method} ${r.template.source} ${r.endpoint} ${r.auth}`);
    // billing.yaml lists hosts and no accessRequests: the request_permission endpoints are not served.
    const expected = Object.values(ENDPOINTS)
      .filter((e) => e.needs !== 'accessRequests')
      .map((e) => `${e.method} ${e.path} ${e.name} ${e.auth}`);
    expect(routed).toEqual(expected);
    // Published as absolute URLs on the issuer's origin.
    const published = discoveryDocument(policy).endpoints as Record<string, string>;
    const origin = new URL(policy.provider.issuer).origin;
    expect(published).toEqual(
      Object.fromEntries(
        Object.values(ENDPOINTS)
          .filter((e) => e.discoveryName && e.needs !== 'accessRequests')
          .map((e) => [e.discoveryName, `${origin}${e.path}`]),
      ),
    );
  });
});
