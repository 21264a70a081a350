/**
 * The request headers the sidecar never forwards from a caller, by family,
 * in one place (docs/reference/request-handling.md lists them from here). A name is in a
 * family when it equals one of `names` or starts with one of `prefixes`
 * (lower case). Beside these, any name with a character outside
 * [A-Za-z0-9-] is dropped (see forwardableName).
 */
export interface HeaderFamily {
  family: string;
  why: string;
  names: readonly string[];
  prefixes: readonly string[];
}

export const DROPPED_HEADER_FAMILIES: readonly HeaderFamily[] = [
  {
    family: 'identity',
    why: 'identity reaches the app only through the X-Agent-* headers the sidecar sets',
    // and what auth proxies in front of an app assert (oauth2-proxy, Apache's REMOTE_USER, mTLS terminators)
    // (AWS ALB's X-Amzn-Oidc-*, Google IAP's X-Goog-Authenticated-User-*, Azure App Service's X-Ms-Client-Principal*, Apache's X-Webauth-*)
    names: ['remote-user', 'x-remote-user', 'x-remote-group', 'x-client-cert', 'ssl-client-cert', 'x-ssl-client-cert'],
    prefixes: ['x-agent-', 'x-auth-request-', 'x-amzn-oidc-', 'x-goog-authenticated-user-', 'x-ms-client-principal', 'x-webauth-'],
  },
  {
    family: 'client address',
    why: 'apps and their frameworks read the caller address from these; the sidecar sets X-Forwarded-For from the socket instead',
    names: [
      'forwarded',
      'forwarded-for',
      'x-forwarded',
      'x-forward-for',
      'x-forwarder-for',
      'x-real-ip',
      'real-ip',
      'x-real-client-ip',
      'true-client-ip',
      'x-true-client-ip',
      'client-ip',
      'x-client-ip',
      'cluster-client-ip',
      'x-cluster-client-ip',
      'cf-connecting-ip',
      'cf-connecting-ipv6',
      'cf-pseudo-ipv4',
      'fastly-client-ip',
      'akamai-client-ip',
      'incap-client-ip',
      'ali-cdn-real-ip',
      'cdn-src-ip',
      'cloudfront-viewer-address',
      'x-proxyuser-ip',
      'proxy-client-ip',
      'wl-proxy-client-ip',
      'x-originating-ip',
      'x-remote-ip',
      'x-remote-addr',
      'remote-addr',
      'x-arr-clientip',
      'x-azure-clientip',
      'x-azure-socketip',
      'x-appengine-user-ip',
      'x-device-ip',
      'x-custom-ip-authorization',
    ],
    prefixes: ['x-forwarded-', 'forwarded-', 'x-envoy-'],
  },
  {
    family: 're-routing',
    why: 'IIS, Symfony, Laravel and some proxies route by these instead of the request line the sidecar checked',
    names: [
      'x-original-url',
      'x-rewrite-url',
      'x-host',
      'x-http-host-override',
      'x-http-destinationurl',
      'x-proxy-url',
      'proxy-url',
      'proxy-host',
      'x-original-host',
      'x-original-uri',
      'x-original-path',
      'x-override-url',
      'request-uri',
      'x-request-uri',
      // the scheme and script path frameworks build URLs and routes from (Werkzeug/Django, gunicorn, Rack)
      'front-end-https',
      'x-url-scheme',
      'x-scheme',
      'x-script-name',
    ],
    prefixes: ['x-original-'],
  },
  {
    family: 'method override',
    why: 'method-override, Symfony and Laravel turn the checked method into another',
    names: ['x-http-method-override', 'x-http-method', 'x-method-override'],
    prefixes: [],
  },
  {
    family: 'httpoxy',
    why: 'CGI hosts turn it into HTTP_PROXY, which HTTP clients in the app take as their outbound proxy (httpoxy.org)',
    names: ['proxy'],
    prefixes: [],
  },
  {
    family: 'hop-by-hop',
    why: "they describe the caller's connection, not the call (RFC 9110 §7.6.1); Node answers 100-continue itself",
    names: [
      'connection',
      'keep-alive',
      'proxy-connection',
      'proxy-authenticate',
      'proxy-authorization',
      'te',
      'trailer',
      'transfer-encoding',
      'upgrade',
      'expect',
    ],
    prefixes: [],
  },
  {
    family: 'sidecar-owned',
    why: 'the sidecar sets its own',
    names: ['x-request-id'],
    prefixes: [],
  },
];

const NAMES = new Set(DROPPED_HEADER_FAMILIES.flatMap((f) => f.names));
const PREFIXES = DROPPED_HEADER_FAMILIES.flatMap((f) => f.prefixes);

/** True for a (lower-case) name in one of the dropped families. */
export function inDroppedFamily(lower: string): boolean {
  if (NAMES.has(lower)) return true;
  for (const p of PREFIXES) if (lower.startsWith(p)) return true;
  return false;
}

/** The exact names of one family (e.g. hop-by-hop, also dropped from the app's response). */
export function familyNames(family: string): string[] {
  return [...(DROPPED_HEADER_FAMILIES.find((f) => f.family === family)?.names ?? [])];
}

/**
 * Only letters, digits and "-" pass, as Apache httpd forwards to CGI: PHP,
 * CGI and WSGI servers turn "." , "_" and other token characters into "_",
 * so "X-Agent.Id" or "X_Agent_Id" would be read as the sidecar's X-Agent-Id.
 */
export function forwardableName(name: string): boolean {
  return /^[A-Za-z0-9-]+$/.test(name);
}
