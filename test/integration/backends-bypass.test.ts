import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sidecar } from '../../src/sidecar/start.js';
import { BACKENDS, missingTool, startBackend, type Backend, type BackendName, type Seen } from '../support/backends.js';
import { startTestSidecar, testAgent, type TestAgent } from '../support/fixture.js';
import { rawSocketRequest, type RawResponse } from '../support/raw-socket.js';

/**
 * The second round of parser differentials (issue 15, review of items 5–9):
 * undecodable query and form keys, multipart header blocks read loosely,
 * JSON in a BOM, UTF-16/32 or followed by garbage, compressed bodies, and
 * headers the first round missed. Each attack is shown real against the
 * stack that misreads it (reached directly), then refused through the sidecar.
 */
const policyText = (bot: TestAgent): string => `
version: 1
provider: { name: items-service, issuer: https://items.example.com, description: Items }
capabilities:
  - { name: listItems, method: GET, path: /items }
  - { name: createItem, method: POST, path: /items }
  - { name: addNote, method: POST, path: /notes }
public:
  - { method: GET, path: /health }
  - { method: POST, path: /hooks }
agents:
  - { id: ${bot.id}, name: items-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${bot.keys.publicJwk.x}" } }
grants:
  - agent: ${bot.id}
    capability: listItems
    status: active
    constraints:
      limit: { max: 50 }
  - agent: ${bot.id}
    capability: createItem
    status: active
    constraints:
      qty: { max: 10 }
  - { agent: ${bot.id}, capability: addNote, status: active }
`;

const requireBackends = process.env.AGENTS_CHAIN_REQUIRE_BACKENDS === '1';
for (const name of BACKENDS) {
  const missing = missingTool(name);
  if (missing && requireBackends) throw new Error(`AGENTS_CHAIN_REQUIRE_BACKENDS=1 but ${missing}`);
  // eslint-disable-next-line no-console
  if (missing) console.warn(`skipping the ${name} backend tests: ${missing}`);
  describe.skipIf(missing !== undefined)(`behind the sidecar, second round: ${name}`, () => suite(name));
}

const JSON_TYPE = 'Content-Type: application/json';
const FORM_TYPE = 'Content-Type: application/x-www-form-urlencoded';
const utf16be = (s: string): Buffer => Buffer.from(s, 'utf16le').swap16();
const utf32le = (s: string): Buffer => {
  const out = Buffer.alloc(s.length * 4);
  for (let i = 0; i < s.length; i++) out.writeUInt32LE(s.charCodeAt(i), i * 4);
  return out;
};
const OVERRIDE = '{"text":"hi","_method":"DELETE"}';
const multipart = (disposition: string): string => `--b\r\n${disposition}\r\n\r\nDELETE\r\n--b--\r\n`;
/** Content-Disposition lines PHP reads as a "_method" field (checked against php -S 8.2). */
const MULTIPART_NAMES: [string, string][] = [
  ['single quotes', "Content-Disposition: form-data; name='_method'"],
  ['no "form-data;"', 'Content-Disposition: name="_method"'],
  ['two names, PHP takes the last', 'Content-Disposition: form-data; name="x"; name="_method"'],
  ['a continuation line without a colon', 'Content-Disposition: form-data\r\n; name="_method"'],
  ['a continuation line with a leading space', 'Content-Disposition: form-data\r\n ; name="_method"'],
];

/** RFC 2231 part names Go's net/http and Werkzeug decode to "_method". */
const MULTIPART_2231: [string, string][] = [
  ['a percent-encoded name*', "Content-Disposition: form-data; name*=utf-8''%5Fmethod"],
  ['name* split in continuations', 'Content-Disposition: form-data; name*0=_met; name*1=hod'],
];
const NAN_OVERRIDE = '{"_method":"DELETE","x":NaN}';
const XBOUNDARY_TYPE = 'Content-Type: multipart/form-data; xboundary=zz; boundary=b';
const XBOUNDARY_BODY = '--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--zz--\r\n';

function suite(name: BackendName): void {
  let backend: Backend;
  let sidecar: Sidecar;
  let bot: TestAgent;
  beforeAll(async () => {
    bot = await testAgent('agent-items-bot');
    backend = await startBackend(name);
    ({ sidecar } = await startTestSidecar({ policy: policyText(bot), policyName: 'items.yaml', app: backend, logLevel: 'error' }));
  }, 120_000);
  afterAll(async () => {
    await sidecar?.close();
    await backend?.close();
  });

  /** Sends the request line and headers exactly as given (plus Host and Connection: close), with an optional body. */
  const sendRaw = (line: string, headers: string[] = [], body?: string | Buffer, to = sidecar.url): Promise<RawResponse> => {
    const bytes = typeof body === 'string' ? Buffer.from(body, 'latin1') : body;
    const head = [
      line,
      'Host: items.internal',
      'Connection: close',
      ...headers,
      ...(bytes === undefined ? [] : [`Content-Length: ${bytes.length}`]),
      '',
      '',
    ].join('\r\n');
    return rawSocketRequest(to, bytes ? Buffer.concat([Buffer.from(head, 'latin1'), bytes]) : head);
  };
  const auth = async (cap: string): Promise<string> => `Authorization: Bearer ${await bot.signer.sign(cap)}`;
  const direct = async (line: string, headers: string[] = [], body?: string | Buffer): Promise<Seen> => {
    const before = backend.seen().length;
    await sendRaw(line, headers, body, backend.url);
    expect(backend.seen().length).toBe(before + 1);
    return backend.seen().at(-1)!;
  };
  async function expectRefused(r: Promise<RawResponse>, status: number, code: string): Promise<void> {
    const before = backend.seen().length;
    const res = await r;
    expect({ status: res.status, error: res.json().error }, res.body).toEqual({ status, error: code });
    expect(backend.seen().length).toBe(before);
  }
  async function forwarded(r: Promise<RawResponse>): Promise<Seen> {
    const before = backend.seen().length;
    const res = await r;
    expect(res.status, res.body).toBe(200);
    expect(backend.seen().length).toBe(before + 1);
    return backend.seen().at(-1)!;
  }

  it('the attacks are real: what this app reads when they reach it directly', async () => {
    if (name === 'php') {
      // urldecode keeps "%zz" and the name ends at the NUL: "_method", "qty".
      expect((await direct('POST /notes?_method%00%zz=DELETE HTTP/1.1', [JSON_TYPE], '{"text":"hi"}')).method).toBe('DELETE');
      expect((await direct('POST /items?qty%00%zz=500 HTTP/1.1', [JSON_TYPE], '{"qty":1}')).query.qty).toBe('500');
      expect((await direct('POST /hooks HTTP/1.1', [FORM_TYPE], '_method%00%zz=DELETE')).method).toBe('DELETE');
      for (const [what, d] of MULTIPART_NAMES) {
        expect((await direct('POST /hooks HTTP/1.1', ['Content-Type: multipart/form-data; boundary=b'], multipart(d))).method, what).toBe('DELETE');
      }
      // rfc1867.c takes the first "boundary" anywhere in the header: here "zz", from "xboundary".
      expect((await direct('POST /hooks HTTP/1.1', [XBOUNDARY_TYPE], XBOUNDARY_BODY)).method).toBe('DELETE');
    }
    if (name === 'python') {
      // json.loads on bytes skips a BOM and detects UTF-16/32 (json.detect_encoding).
      for (const body of [
        Buffer.from(`\ufeff${OVERRIDE}`),
        Buffer.from(OVERRIDE, 'utf16le'),
        utf16be(OVERRIDE),
        utf32le(OVERRIDE),
        Buffer.from(`\ufeff${OVERRIDE}`, 'utf16le'),
      ]) {
        expect((await direct('POST /notes HTTP/1.1', [JSON_TYPE], body)).method).toBe('DELETE');
      }
    }
    if (name === 'go') {
      // json.NewDecoder(...).Decode reads the first value and leaves the rest.
      expect((await direct('POST /notes HTTP/1.1', [JSON_TYPE], `${OVERRIDE} x`)).method).toBe('DELETE');
      // r.PostFormValue decodes RFC 2231 names (mime.ParseMediaType).
      for (const [what, d] of MULTIPART_2231) {
        expect((await direct('POST /hooks HTTP/1.1', ['Content-Type: multipart/form-data; boundary=b'], multipart(d))).method, what).toBe('DELETE');
      }
    }
    if (name === 'python') {
      // json.loads accepts NaN and Infinity, which JSON.parse refuses.
      expect((await direct('POST /hooks HTTP/1.1', [JSON_TYPE], NAN_OVERRIDE)).method).toBe('DELETE');
    }
    if (name === 'php' || name === 'python') {
      // json_decode / json.loads read the body whatever its declared type.
      expect((await direct('POST /hooks HTTP/1.1', [FORM_TYPE], OVERRIDE)).method).toBe('DELETE');
    }
    if (name === 'node') {
      // body-parser inflates gzip, deflate and br before it parses.
      expect((await direct('POST /notes HTTP/1.1', [JSON_TYPE, 'Content-Encoding: gzip'], gzipSync(OVERRIDE))).method).toBe('DELETE');
      expect((await direct('POST /notes HTTP/1.1', [JSON_TYPE, 'Content-Encoding: br'], brotliCompressSync(OVERRIDE))).method).toBe('DELETE');
    }
  });

  describe('keys that are not valid percent-encoding', () => {
    it.each([
      ['"_method" then NUL and a bad escape', 'POST /notes?_method%00%zz=DELETE HTTP/1.1', 'addNote'],
      ['a constrained body field, NUL, bad escape', 'POST /items?qty%00%zz=500 HTTP/1.1', 'createItem'],
      ['qs\'s "[qty]" then invalid UTF-8', 'POST /items?[qty]%C0=500 HTTP/1.1', 'createItem'],
      ['"_method[]" then a bad escape', 'POST /notes?_method[]%zz=DELETE HTTP/1.1', 'addNote'],
    ])('refuses a query key with %s (invalid_query)', async (_what, line, cap) => {
      await expectRefused(sendRaw(line, [await auth(cap), JSON_TYPE], cap === 'createItem' ? '{"qty":1}' : '{"text":"hi"}'), 400, 'invalid_query');
    });

    it('refuses one on a public route too', async () => {
      await expectRefused(sendRaw('GET /health?x%zz=1 HTTP/1.1'), 400, 'invalid_query');
    });

    it('forwards a malformed value (only names are misread)', async () => {
      const seen = await forwarded(sendRaw('GET /health?q=100% HTTP/1.1'));
      expect(seen.path).toBe('/health');
    });

    it('refuses a form field name with a bad escape (invalid_body)', async () => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [FORM_TYPE], 'url=x&_method%00%zz=DELETE'), 400, 'invalid_body');
    });
  });

  describe("qs's and Rack's readings", () => {
    it('refuses qs\'s "[limit]x" beside "limit" (qs reads both as limit)', async () => {
      await expectRefused(sendRaw('GET /items?[limit]x=500&limit=5 HTTP/1.1', [await auth('listItems')]), 400, 'invalid_query');
    });

    it.each(['[_method]x=DELETE', ']_method=DELETE', '_method]=DELETE', '[[_method]]=DELETE'])('refuses the form field %s', async (body) => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [FORM_TYPE], body), 400, 'invalid_body');
    });

    it('reads a POST body without Content-Type as a form too (Rack does)', async () => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [], 'url=x&_method=DELETE'), 400, 'invalid_body');
      const seen = await forwarded(sendRaw('POST /hooks HTTP/1.1', [], 'url=x&method=card'));
      expect(seen.method).toBe('POST');
    });
  });

  describe('multipart header blocks', () => {
    it.each(MULTIPART_NAMES)('refuses a "_method" part named with %s', async (_what, d) => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', ['Content-Type: multipart/form-data; boundary=b'], multipart(d)), 400, 'invalid_body');
    });

    it('forwards a file whose content names "_method" (only header blocks count)', async () => {
      const file = '<form method="post"><input type="hidden" name="_method" value="PUT"></form>';
      const body = `--b\r\nContent-Disposition: form-data; name="page"; filename="edit.html"\r\nContent-Type: text/html\r\n\r\n${file}\r\n--b--\r\n`;
      const seen = await forwarded(sendRaw('POST /hooks HTTP/1.1', ['Content-Type: multipart/form-data; boundary=b'], body));
      expect(seen.method).toBe('POST');
    });
  });

  describe('JSON as lenient parsers read it', () => {
    it.each([
      ['a UTF-8 BOM', Buffer.from(`\ufeff${OVERRIDE}`)],
      ['UTF-16LE', Buffer.from(OVERRIDE, 'utf16le')],
      ['UTF-16LE with a BOM', Buffer.from(`\ufeff${OVERRIDE}`, 'utf16le')],
      ['UTF-16BE', utf16be(OVERRIDE)],
      ['UTF-32LE', utf32le(OVERRIDE)],
      ['trailing bytes after the first value', Buffer.from(`${OVERRIDE} x`)],
    ])('refuses "_method" in %s', async (_what, body) => {
      await expectRefused(sendRaw('POST /notes HTTP/1.1', [await auth('addNote'), JSON_TYPE], body), 400, 'invalid_body');
    });

    it('refuses a UTF-7 charset, which iconv-lite decodes ("+AF8-method" is "_method")', async () => {
      await expectRefused(
        sendRaw('POST /notes HTTP/1.1', [await auth('addNote'), 'Content-Type: application/json; charset=utf-7'], '{"+AF8-method":"DELETE"}'),
        415,
        'unsupported_media_type',
      );
    });
  });

  describe('compressed bodies', () => {
    it.each([
      ['gzip', gzipSync],
      ['deflate', deflateSync],
      ['deflate', deflateRawSync],
      ['br', brotliCompressSync],
    ])('refuses "_method" inside a %s body', async (coding, compress) => {
      await expectRefused(
        sendRaw('POST /notes HTTP/1.1', [await auth('addNote'), JSON_TYPE, `Content-Encoding: ${coding}`], compress(OVERRIDE)),
        400,
        'invalid_body',
      );
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [FORM_TYPE, `Content-Encoding: ${coding}`], compress('url=x&_method=DELETE')), 400, 'invalid_body');
    });

    it('forwards a legitimate compressed body as sent', async () => {
      const seen = await forwarded(sendRaw('POST /notes HTTP/1.1', [await auth('addNote'), JSON_TYPE, 'Content-Encoding: gzip'], gzipSync('{"text":"hi"}')));
      expect(seen.method).toBe('POST');
      expect(seen.headers['content-encoding']).toBe('gzip');
    });

    it('refuses a coding it cannot read, and a body that does not decode as its coding says (unsupported_media_type)', async () => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [JSON_TYPE, 'Content-Encoding: zstd'], 'xx'), 415, 'unsupported_media_type');
      await expectRefused(
        sendRaw('POST /hooks HTTP/1.1', [JSON_TYPE, 'Content-Encoding: gzip, gzip'], gzipSync(gzipSync('{}'))),
        415,
        'unsupported_media_type',
      );
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [JSON_TYPE, 'Content-Encoding: gzip'], OVERRIDE), 415, 'unsupported_media_type');
    });

    it('refuses a body that inflates past the body limit (body_too_large)', async () => {
      await expectRefused(
        sendRaw('POST /hooks HTTP/1.1', [JSON_TYPE, 'Content-Encoding: gzip'], gzipSync(Buffer.alloc(2 * 1024 * 1024, 0x20))),
        413,
        'body_too_large',
      );
    });
  });

  describe('third round: the second review of body.ts and query.ts', () => {
    it.each([
      ['NaN', NAN_OVERRIDE],
      ['Infinity', '{"x":Infinity,"_method":"DELETE"}'],
      ['-Infinity', '{"x":-Infinity,"_method":"DELETE"}'],
      ['a comment and a trailing comma', '{/* x */"_method":"DELETE",}'],
    ])('refuses "_method" beside %s, on a public and a capability route', async (_what, body) => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [JSON_TYPE], body), 400, 'invalid_body');
      await expectRefused(sendRaw('POST /notes HTTP/1.1', [await auth('addNote'), JSON_TYPE], body), 400, 'invalid_body');
    });

    it('forwards NaN beside other keys', async () => {
      expect((await forwarded(sendRaw('POST /hooks HTTP/1.1', [JSON_TYPE], '{"x":NaN,"payment_method":"card"}'))).method).toBe('POST');
    });

    it.each(['utf--7', 'utf-_7', 'utf-.7', '"utf\\-7"', 'UTF7', 'ibm037'])('refuses charset=%s (unsupported_media_type)', async (charset) => {
      await expectRefused(
        sendRaw('POST /hooks HTTP/1.1', [`Content-Type: application/json; charset=${charset}`], '{"+AF8-method":"DELETE"}'),
        415,
        'unsupported_media_type',
      );
    });

    it.each([
      ['JSON sent as a form', FORM_TYPE, OVERRIDE],
      ['JSON sent as multipart', 'Content-Type: multipart/form-data; boundary=b', OVERRIDE],
      ['a form sent as application/x-url-encoded (Werkzeug)', 'Content-Type: application/x-url-encoded', 'a=1&_method=DELETE'],
      ['multipart/mixed (Rack)', 'Content-Type: multipart/mixed; boundary=b', multipart('Content-Disposition: form-data; name="_method"')],
      ['multipart/related (Rack)', 'Content-Type: multipart/related; boundary=b', multipart('Content-Disposition: form-data; name="_method"')],
    ])('refuses "_method" in %s (the declared type does not pick the check)', async (_what, type, body) => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [type], body), 400, 'invalid_body');
    });

    it.each(MULTIPART_2231)('refuses a multipart part named with %s (invalid_body)', async (_what, d) => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', ['Content-Type: multipart/form-data; boundary=b'], multipart(d)), 400, 'invalid_body');
    });

    it('refuses a part delimited by the boundary PHP reads when the declared one differs ("xboundary=")', async () => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [XBOUNDARY_TYPE], XBOUNDARY_BODY), 400, 'invalid_body');
    });

    it('forwards an uploaded diff whose lines start with "--" and name "_method"', async () => {
      const diff = '--- a/edit.html\n+++ b/edit.html\n@@ -1 +1 @@\n-<input name="_method" value="PUT">\n+<input name="_method" value="DELETE">\n';
      const body = `--XX\r\nContent-Disposition: form-data; name="patch"; filename="edit.diff"\r\nContent-Type: text/x-diff\r\n\r\n${diff}\r\n--XX--\r\n`;
      expect((await forwarded(sendRaw('POST /hooks HTTP/1.1', ['Content-Type: multipart/form-data; boundary=XX'], body))).method).toBe('POST');
    });

    it('forwards names that are valid escapes of non-UTF-8 bytes (a Latin-1 form), in a form and a query', async () => {
      await forwarded(sendRaw('POST /hooks HTTP/1.1', [`${FORM_TYPE}; charset=ISO-8859-1`], 'caf%E9=1'));
      await forwarded(sendRaw('GET /health?caf%E9=1 HTTP/1.1'));
    });

    it('answers a form body of 256 KB of "[" at once (the bracket fold was quadratic), and stays responsive', async () => {
      const start = performance.now();
      await forwarded(sendRaw('POST /hooks HTTP/1.1', [FORM_TYPE], `method${'['.repeat(256 * 1024)}=1`));
      await forwarded(
        sendRaw(
          'POST /hooks HTTP/1.1',
          ['Content-Type: multipart/form-data; boundary=b'],
          multipart(`Content-Disposition: form-data; name=method${'['.repeat(256 * 1024)}`),
        ),
      );
      expect(performance.now() - start).toBeLessThan(2000);
    });
  });

  it('drops Proxy (httpoxy) and the scheme, script-path and auth-proxy identity headers', async () => {
    const spoofed = [
      'Proxy: http://10.6.6.6:8080',
      'Front-End-Https: on',
      'X-Url-Scheme: https',
      'X-Scheme: https',
      'X-Script-Name: /admin',
      'X-Amzn-Oidc-Identity: admin',
      'X-Goog-Authenticated-User-Email: accounts.google.com:admin@example.com',
      'X-Ms-Client-Principal-Name: admin',
      'X-Webauth-User: admin',
      'X-Remote-Group: admins',
    ];
    const seen = await forwarded(sendRaw('GET /health HTTP/1.1', [...spoofed, 'X-Kept: yes']));
    expect(seen.headers['x-kept']).toBe('yes');
    for (const h of spoofed) {
      const n = h.slice(0, h.indexOf(':')).toLowerCase();
      expect(seen.headers[n], n).toBeUndefined();
    }
  });
}
