import type { ServerResponse } from 'node:http';
import { maxHeaderSize } from 'node:http';
import type { Duplex } from 'node:stream';
import { denialBody, statusOf, type Denial, type DenialCode } from '../errors.js';

/**
 * Every answer the sidecar writes goes through this file: JSON replies, text
 * replies, refusals (status from the catalogue, WWW-Authenticate, the
 * envelope the caller prepared), raw socket errors, and the app's own answer
 * relayed. Nothing else calls writeHead.
 */

/** An answer the sidecar gives itself (its endpoints, the admin API). */
export type Reply =
  | { readonly status: number; readonly json: unknown; readonly headers?: Readonly<Record<string, string>> }
  | {
      readonly status: number;
      readonly text: string;
      readonly contentType: string;
      readonly headers?: Readonly<Record<string, string>>;
      readonly headOnly?: boolean;
    };

export function jsonReply(status: number, json: unknown, headers?: Record<string, string>): Reply {
  return headers ? { status, json, headers } : { status, json };
}

export function writeReply(res: ServerResponse, reply: Reply, headers?: Readonly<Record<string, string>>): void {
  if ('json' in reply) return sendJson(res, reply.status, reply.json, { ...headers, ...reply.headers });
  res.writeHead(reply.status, {
    'content-type': reply.contentType,
    'content-length': String(Buffer.byteLength(reply.text)),
    'cache-control': 'no-store',
    ...headers,
    ...reply.headers,
  });
  res.end(reply.headOnly ? undefined : reply.text);
}

/** One JSON answer. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/** A refusal already presented (status and body decided by the caller: plain body or envelope). */
export interface PresentedDenial {
  status: number;
  body: unknown;
  /** Headers the presentation adds (a protocol's Retry-After). */
  headers?: Readonly<Record<string, string>>;
}

/**
 * A refusal on the agent port. A 401 carries two challenges: RFC 6750 Bearer
 * (no error attribute when no token was sent at all) and Agent Auth's pointer
 * to the discovery document. A response already under way is cut instead.
 */
export function writeDenial(
  res: ServerResponse,
  denial: Denial,
  presented: PresentedDenial,
  o: { requestId: string; issuer: string; closeConnection: boolean },
): void {
  if (res.headersSent) return void res.destroy();
  const headers: Record<string, string> = { 'x-request-id': o.requestId, ...presented.headers, ...denial.extra?.headers };
  if (presented.status === 401) headers['www-authenticate'] = agentChallenge(denial.code, o.issuer);
  // An unread body would otherwise be drained into a connection we no longer trust.
  if (o.closeConnection) headers.connection = 'close';
  sendJson(res, presented.status, presented.body, headers);
}

/** A refusal written many times a second (a shed call's): built once, only its X-Request-Id set per call. */
export interface PreparedDenial {
  readonly status: number;
  readonly text: string;
  /** content-type, content-length, cache-control and the presentation's own headers, flat (name, value, ...). */
  readonly headers: readonly string[];
}

/** Not for a 401: its challenge names the code (writeDenial adds it). */
export function prepareDenial(denial: Denial, presented: PresentedDenial): PreparedDenial {
  const text = JSON.stringify(presented.body);
  const own = { ...presented.headers, ...denial.extra?.headers };
  const headers = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(text)), 'cache-control', 'no-store'];
  for (const [name, value] of Object.entries(own)) headers.push(name, value);
  return { status: presented.status, text, headers };
}

/** What writeDenial writes for a prepared refusal, without building it again. */
export function writePreparedDenial(res: ServerResponse, p: PreparedDenial, requestId: string, closeConnection: boolean): void {
  if (res.headersSent) return void res.destroy();
  const headers = [...p.headers, 'x-request-id', requestId];
  if (closeConnection) headers.push('connection', 'close');
  res.writeHead(p.status, headers);
  res.end(p.text);
}

function agentChallenge(code: DenialCode, issuer: string): string {
  const realm = `Bearer realm="${issuer}"`;
  const bearer = code === 'token_missing' ? realm : `${realm}, error="invalid_token", error_description="${code}"`;
  return `${bearer}, AgentAuth discovery="${issuer.replace(/\/+$/, '')}/.well-known/agent-configuration"`;
}

/** A refusal on the admin listener: the plain body, the admin realm on 401. */
export function writeAdminDenial(res: ServerResponse, denial: Denial): void {
  const headers: Record<string, string> = { ...denial.extra?.headers };
  if (statusOf(denial.code) === 401) headers['www-authenticate'] = 'Bearer realm="agents-chain-admin"';
  if (res.headersSent) return void res.destroy();
  sendJson(res, statusOf(denial.code), denialBody(denial), headers);
}

const REASON: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };

/** Requests Node's HTTP parser refuses still get the JSON error shape, written on the raw socket. */
export function writeSocketError(socket: Duplex, err: NodeJS.ErrnoException): void {
  if (!socket.writable || err.code === 'ECONNRESET') return void socket.destroy();
  // Node's parser caps the header block at --max-http-header-size (16 KiB): too many headers as well.
  const [code, message]: [DenialCode, string] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? ['request_timeout', 'the request was not received in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? ['too_many_headers', `the request headers exceed ${maxHeaderSize} bytes`]
        : ['invalid_request', `malformed HTTP request (${err.code ?? 'parse error'})`];
  const status = statusOf(code);
  const body = JSON.stringify({ error: code, message });
  socket.end(
    `HTTP/1.1 ${status} ${REASON[status] ?? ''}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/**
 * The app's answer, streamed to the client. A sized response sends its
 * headers with the body in one write; a streamed one (SSE, chunked) gets them
 * at once. Plain pipe plus listeners: stream.pipeline allocates an
 * AbortController per call, which showed up in profiles. If either side fails
 * mid-response, both are torn down. Resolves with the body bytes relayed.
 */
export function relayAnswer(
  res: ServerResponse,
  status: number,
  headers: Record<string, string | string[]>,
  body: NodeJS.ReadableStream & { destroy(err?: Error): void },
  /** Bytes written before and after the app's (execute's `{"data":` and `}`), streamed: the caller sized content-length. */
  frame?: { prefix: Buffer; suffix: Buffer },
): Promise<number> {
  res.writeHead(status, headers);
  if (frame) res.write(frame.prefix);
  else if (headers['content-length'] === undefined) res.flushHeaders();
  let bytes = 0;
  body.on('data', (c: Buffer) => {
    bytes += c.length;
  });
  return new Promise((resolve) => {
    const done = (): void => {
      body.off('error', fail);
      res.off('close', done);
      resolve(bytes);
    };
    const fail = (): void => {
      res.destroy();
      done();
    };
    body.once('error', fail);
    res.once('close', done);
    res.once('finish', done);
    if (frame) {
      body.once('end', () => res.end(frame.suffix));
      body.pipe(res, { end: false });
    } else body.pipe(res);
    res.once('close', () => {
      if (!res.writableFinished) body.destroy();
    });
  });
}

/** The app's JSON answer rewritten (the `envelope: all` wrapping): sized, uncompressed. */
export function writeRewrittenJson(res: ServerResponse, status: number, headers: Record<string, string | string[]>, text: string): void {
  delete headers['content-length'];
  delete headers['content-encoding'];
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}
