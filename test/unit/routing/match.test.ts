import { describe, expect, it } from 'vitest';
import type { Capability, Route } from '../../../src/policy/types.js';
import { matchRoute } from '../../../src/routing/match.js';
import { parseTemplate, type PathTemplate } from '../../../src/routing/template.js';

function template(source: string): PathTemplate {
  const p = parseTemplate(source);
  if (typeof p === 'string') throw new Error(p);
  return p;
}

function capability(name: string, method: string, path: string): Route {
  const cap: Capability = { name, method, path };
  return { kind: 'capability', method, template: template(path), capability: cap };
}

const routes: Route[] = [
  capability('getInvoice', 'GET', '/invoices/{id}'),
  capability('deleteInvoice', 'DELETE', '/invoices/{id}'),
  capability('listInvoices', 'GET', '/invoices'),
  capability('createInvoice', 'POST', '/invoices'),
  { kind: 'public', method: 'GET', template: template('/healthz') },
];

const seg = (path: string): string[] => path.slice(1).split('/');

describe('matchRoute', () => {
  it('finds the capability route for the method and returns its decoded parameters', () => {
    const m = matchRoute(routes, 'GET', seg('/invoices/in%20v1'));
    expect(m?.route).toMatchObject({ kind: 'capability', capability: { name: 'getInvoice' } });
    expect(m?.params).toEqual({ id: 'in v1' });
  });

  it('selects by method on the same path', () => {
    expect(matchRoute(routes, 'DELETE', seg('/invoices/7'))?.route).toMatchObject({ capability: { name: 'deleteInvoice' } });
    expect(matchRoute(routes, 'POST', seg('/invoices'))?.route).toMatchObject({ capability: { name: 'createInvoice' } });
    expect(matchRoute(routes, 'GET', seg('/invoices'))?.route).toMatchObject({ capability: { name: 'listInvoices' } });
  });

  it('matches public routes with an empty parameter set', () => {
    const m = matchRoute(routes, 'GET', seg('/healthz'));
    expect(m?.route.kind).toBe('public');
    expect(m?.params).toEqual({});
  });

  it('returns undefined when no route fits', () => {
    expect(matchRoute(routes, 'PUT', seg('/invoices/7'))).toBeUndefined();
    expect(matchRoute(routes, 'GET', seg('/invoices/7/lines'))).toBeUndefined();
    expect(matchRoute(routes, 'GET', seg('/invoices/'))).toBeUndefined();
    expect(matchRoute(routes, 'GET', seg('/healthz/'))).toBeUndefined();
    expect(matchRoute(routes, 'POST', seg('/healthz'))).toBeUndefined();
    expect(matchRoute([], 'GET', seg('/'))).toBeUndefined();
  });

  it('compares methods exactly (case-sensitive)', () => {
    expect(matchRoute(routes, 'get', seg('/invoices'))).toBeUndefined();
  });
});
