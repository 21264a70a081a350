import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  json: () => any;
}

/**
 * Sends bytes exactly as given over a plain TCP socket and reads the whole response. Only for requests a client
 * library would refuse or normalise (a target as written, broken header lines, smuggling shapes, more headers
 * than a parser keeps); everything else goes through `call` (http.ts). The request should ask for Connection: close.
 */
export function rawSocketRequest(baseUrl: string, request: string | Buffer): Promise<RawResponse> {
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    sock.on('data', (c) => chunks.push(c));
    sock.on('error', reject);
    sock.on('close', () => resolve(parse(Buffer.concat(chunks).toString('latin1'))));
    sock.write(request);
    sock.setTimeout(5000, () => sock.destroy());
  });
}

function parse(text: string): RawResponse {
  // Interim 1xx answers (100 Continue) come before the final one.
  while (/^HTTP\/1\.1 1\d\d /.test(text)) text = text.slice(text.indexOf('\r\n\r\n') + 4);
  const split = text.indexOf('\r\n\r\n');
  const head = text.slice(0, split).split('\r\n');
  const status = Number(head[0]?.split(' ')[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of head.slice(1)) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = text.slice(split + 4);
  if (headers['transfer-encoding'] === 'chunked') body = dechunk(body);
  return { status, headers, body, json: () => JSON.parse(body) };
}

function dechunk(s: string): string {
  let out = '';
  let i = 0;
  for (;;) {
    const eol = s.indexOf('\r\n', i);
    const size = parseInt(s.slice(i, eol), 16);
    if (!size) return out;
    out += s.slice(eol + 2, eol + 2 + size);
    i = eol + 2 + size + 2;
  }
}
