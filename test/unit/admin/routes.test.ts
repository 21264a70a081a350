import { describe, expect, it } from 'vitest';
import { findAdminRoute } from '../../../src/admin/handler.js';

describe('the admin route table', () => {
  it('matches literal routes before parameters, and decodes parameters', () => {
    expect(findAdminRoute('GET', '/approvals/grants')?.route.path).toBe('/approvals/grants');
    expect(findAdminRoute('GET', '/approvals/ar_1')).toMatchObject({ route: { path: '/approvals/{id}' }, params: { id: 'ar_1' } });
    expect(findAdminRoute('POST', '/agents/agt%5Fx/revoke')).toMatchObject({ params: { id: 'agt_x' } });
    expect(findAdminRoute('POST', '/approvals/ar_1/approve')).toMatchObject({ params: { id: 'ar_1' } });
  });

  it('knows who may call what: probes and metrics open, the rest behind the token', () => {
    for (const p of ['/healthz', '/readyz', '/metrics', '/app-health/app/readiness']) expect(findAdminRoute('GET', p)?.route.access, p).toBe('open');
    for (const p of ['/stats', '/stats/entries', '/agents', '/approvals']) expect(findAdminRoute('GET', p)?.route.access, p).toBe('token');
    expect(findAdminRoute('GET', '/app-health/app/readiness')?.params).toEqual({ '*': 'app/readiness' });
  });

  it('refuses a malformed percent-encoding and finds nothing for unknown paths or methods', () => {
    expect(findAdminRoute('POST', '/agents/%zz/revoke')?.params).toMatchObject({ code: 'invalid_path' });
    expect(findAdminRoute('GET', '/nope')).toBeUndefined();
    expect(findAdminRoute('DELETE', '/healthz')).toBeUndefined();
    expect(findAdminRoute('GET', '/approvals/a/b/c')).toBeUndefined();
  });
});

describe('approval actions', () => {
  it('are literal segments: an encoded action is no action', () => {
    expect(findAdminRoute('POST', '/approvals/ar_1/approve')?.route.path).toBe('/approvals/{id}/approve');
    expect(findAdminRoute('POST', '/approvals/ar_1/%61pprove')?.route.path).toBe('/approvals/{id}/{action}');
  });
});
