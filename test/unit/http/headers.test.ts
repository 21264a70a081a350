import { describe, expect, it } from 'vitest';
import { DROPPED_HEADER_FAMILIES, forwardableName, inDroppedFamily } from '../../../src/http/header-families.js';
import { DEFAULT_MAX_HEADERS, downstreamResponseHeaders, tooManyHeaders, upstreamRequestHeaders } from '../../../src/http/headers.js';

const names = (flat: string[]): string[] => flat.filter((_, i) => i % 2 === 0);
const identity = { agentId: 'agent-1', agentName: 'bot', capability: 'getInvoice' };

describe('upstreamRequestHeaders', () => {
  it("puts the sidecar's own headers first, then the caller's in order", () => {
    const out = upstreamRequestHeaders(['Host', 'app', 'Accept', 'a/b', 'X-Kept', '1'], { identity, requestId: 'r-1', clientAddress: '10.0.0.7' });
    expect(out).toEqual([
      'x-request-id',
      'r-1',
      'x-agent-id',
      'agent-1',
      'x-agent-name',
      'bot',
      'x-agent-capability',
      'getInvoice',
      'x-forwarded-for',
      '10.0.0.7',
      'Host',
      'app',
      'Accept',
      'a/b',
      'X-Kept',
      '1',
    ]);
  });

  it('sends an IPv4 peer of a dual-stack socket as plain IPv4, and IPv6 as it is', () => {
    expect(upstreamRequestHeaders([], { requestId: 'r', clientAddress: '::ffff:10.1.2.3' })).toContain('10.1.2.3');
    expect(upstreamRequestHeaders([], { requestId: 'r', clientAddress: '2001:db8::1' })).toContain('2001:db8::1');
  });

  it('sets no client address when none is given (egress)', () => {
    expect(names(upstreamRequestHeaders(['X-Forwarded-For', '1.2.3.4'], { requestId: 'r' }))).toEqual(['x-request-id']);
  });

  it.each([
    'X-Agent.Id',
    'X_Agent_Id',
    'X-HTTP.Method-Override',
    'X-Forwarded.For',
    'X~Agent',
    "X'Agent",
    'X*A',
    'X|A',
    'X^A',
    'X`A',
    'X!A',
    'X#A',
    'X$A',
    'X%A',
    'X&A',
    'X+A',
  ])('drops the name %s (outside [A-Za-z0-9-])', (name) => {
    expect(names(upstreamRequestHeaders([name, 'v', 'X-Kept', '1'], { requestId: 'r' }))).toEqual(['x-request-id', 'X-Kept']);
  });

  it.each([
    'X-Real-IP',
    'True-Client-IP',
    'X-Client-IP',
    'CF-Connecting-IP',
    'Fastly-Client-IP',
    'X-Cluster-Client-IP',
    'X-ProxyUser-Ip',
    'Client-IP',
    'X-Original-URL',
    'X-Rewrite-URL',
    'X-Original-Host',
    'X-Host',
    'X-HTTP-Destinationurl',
    'X-Forwarded-Host',
    'X-Forwarded-Proto',
    'X-Forwarded-Port',
    'X-Forwarded-Prefix',
    'X-Forwarded-For',
    'Forwarded',
    'X-Envoy-Original-Path',
    'X-Originating-IP',
    'X-Remote-Addr',
    'Remote-User',
    'X-HTTP-Method-Override',
    'X-Agent-Role',
    'Connection',
    'Transfer-Encoding',
    'X-Request-Id',
    // second round: httpoxy, scheme and script path, auth-proxy identity assertions
    'Proxy',
    'Front-End-Https',
    'X-Url-Scheme',
    'X-Scheme',
    'X-Script-Name',
    'X-Amzn-Oidc-Data',
    'X-Amzn-Oidc-Identity',
    'X-Goog-Authenticated-User-Email',
    'X-Goog-Authenticated-User-Id',
    'X-Ms-Client-Principal',
    'X-Ms-Client-Principal-Name',
    'X-Webauth-User',
    'X-Remote-Group',
  ])('drops %s (a dropped family)', (name) => {
    expect(names(upstreamRequestHeaders([name, 'v', 'X-Kept', '1'], { requestId: 'r' }))).toEqual(['x-request-id', 'X-Kept']);
  });

  it("replaces the caller's Content-Length when the body was buffered", () => {
    const out = upstreamRequestHeaders(['Content-Length', '999', 'Content-Type', 'application/json'], { requestId: 'r', bodyLength: 12 });
    expect(out).toEqual(['x-request-id', 'r', 'Content-Type', 'application/json', 'content-length', '12']);
  });
});

describe('header families', () => {
  it('are lower-case data with a reason each', () => {
    for (const f of DROPPED_HEADER_FAMILIES) {
      expect(f.why.length).toBeGreaterThan(10);
      for (const n of [...f.names, ...f.prefixes]) expect(n).toBe(n.toLowerCase());
    }
    expect(inDroppedFamily('x-forwarded-anything')).toBe(true);
    expect(inDroppedFamily('x-originality')).toBe(false);
    expect(inDroppedFamily('accept')).toBe(false);
  });

  it('forwardableName accepts only letters, digits and "-"', () => {
    expect(forwardableName('X-Kept-2')).toBe(true);
    expect(forwardableName('X_Kept')).toBe(false);
    expect(forwardableName('')).toBe(false);
  });
});

describe('tooManyHeaders', () => {
  it(`counts name/value pairs against the limit [${DEFAULT_MAX_HEADERS}]`, () => {
    const raw = (n: number): string[] => Array.from({ length: n }, () => ['x', '1']).flat();
    expect(tooManyHeaders(raw(DEFAULT_MAX_HEADERS), DEFAULT_MAX_HEADERS)).toBe(false);
    expect(tooManyHeaders(raw(DEFAULT_MAX_HEADERS + 1), DEFAULT_MAX_HEADERS)).toBe(true);
  });
});

describe('downstreamResponseHeaders', () => {
  it('drops Alt-Svc: it would send the agent to the app over HTTP/3 (UDP), which capture does not redirect', () => {
    expect(downstreamResponseHeaders({ 'alt-svc': 'h3=":443"; ma=86400', 'content-type': 'text/plain', connection: 'keep-alive' })).toEqual({
      'content-type': 'text/plain',
    });
  });
});
