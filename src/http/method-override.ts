import type { IncomingMessage } from 'node:http';
import { deny, isDenial, type Denial } from '../errors.js';
import { keyProblem, overridesMethod } from '../routing/query.js';
import { jsonMethodOverride, methodAt } from './json-override.js';
import { multipartProblem } from './multipart-override.js';

export { jsonMethodOverride, jsonUtf8, topLevelKeyIsMethod } from './json-override.js';
export { multipartMethodOverride, multipartProblem, type MultipartProblem } from './multipart-override.js';
import { decodedContent, parseContentType } from './body.js';

/*
 * Method overrides in a request body: a "_method" field that PHP, Laravel,
 * Symfony, Rack, Express's method-override or Go handlers would read as the
 * real method, in a form, multipart or JSON body, read the way those parsers
 * read it. Pure but for zlib (decodedContent).
 */

/**
 * Refuses a body that overrides the method ("_method" in a form, multipart
 * or JSON body) or that the sidecar cannot read as the app will. The body is
 * read as it is meant: inflated when compressed (body-parser inflates gzip,
 * deflate and br by default). The declared Content-Type does not decide
 * which reading counts (PHP's json_decode and Laravel read a JSON body sent
 * as a form, Werkzeug reads application/x-url-encoded as a form, Rack parses
 * multipart/mixed), so every cheap check runs on every body: the JSON key
 * scan, the form-name check (strict only for a declared form), and the
 * multipart scan for any multipart/* type. The bytes forwarded are the
 * original ones.
 */
export async function bodyOverrideDenial(req: IncomingMessage, body: Buffer, limit: number): Promise<Denial | undefined> {
  const type = req.headers['content-type'] ?? '';
  const { essence, params } = parseContentType(type);
  const charset = unsafeCharset(params);
  if (charset !== undefined) {
    // iconv-lite (body-parser) decodes UTF-7, where "+AF8-method" is "_method", and many more: only known ones are checkable.
    return deny(
      'unsupported_media_type',
      `charset "${printableParam(charset)}" is not accepted; send the body as UTF-8 (or UTF-16/32, ASCII, or a single-byte superset of ASCII such as ISO-8859-x or windows-125x)`,
    );
  }
  const bytes = await decodedContent(body, req.headers['content-encoding'], limit);
  if (isDenial(bytes)) return bytes;
  const override = deny('invalid_body', 'the "_method" override is not accepted; use the real HTTP method');
  // Both form readings need a "%" escape or the letters "method": most bodies are not copied into a string at all.
  const formNamesMayMatter = mayNameMethod(bytes);
  if (essence === 'application/x-www-form-urlencoded') {
    const problem = formNamesMayMatter ? keyProblem(bytes.toString('latin1')) : undefined;
    if (problem === 'malformed')
      return deny('invalid_body', 'a form field name has a malformed percent-encoding (apps would read it leniently, as another name)');
    if (problem === 'method') return override;
  } else if (formNamesMayMatter && overridesMethod(bytes.toString('latin1'))) {
    return override;
  }
  if (essence.startsWith('multipart/')) {
    const problem = multipartProblem(bytes, agreedBoundary(type, params.get('boundary')?.[0]));
    if (problem === 'extended') return deny('invalid_body', 'a multipart part header uses an RFC 2231 "name*" parameter; send the field name as name="..."');
    if (problem === 'method') return override;
  }
  return jsonMethodOverride(bytes) ? override : undefined;
}

/**
 * The boundary every parser agrees on, or undefined (then every "--" line
 * counts as a delimiter, a superset of any boundary's). PHP (rfc1867.c)
 * takes the first "boundary" anywhere in the header, case-insensitively
 * (inside "xboundary=" or a quoted value too), then what follows the next
 * "=", up to "," or ";" (spaces kept) or the closing quote; Go and busboy
 * parse parameters. A PHP boundary that starts with the parsed one is fine:
 * its delimiter lines all start with the parsed delimiter.
 */
export function agreedBoundary(type: string, parsed: string | undefined): string | undefined {
  if (parsed === undefined) return undefined;
  const at = type.toLowerCase().indexOf('boundary');
  const eq = at === -1 ? -1 : type.indexOf('=', at);
  if (eq === -1) return undefined;
  let php = type.slice(eq + 1);
  if (php.startsWith('"')) {
    const close = php.indexOf('"', 1);
    php = php.slice(1, close === -1 ? php.length : close);
  } else {
    const end = php.search(/[,;]/);
    if (end !== -1) php = php.slice(0, end);
  }
  return php.startsWith(parsed) ? parsed : undefined;
}

/**
 * Charsets whose decoding the sidecar reproduces (UTF-8, UTF-16/32 as
 * jsonUtf8 detects them, and ASCII-compatible single-byte ones, where an
 * ASCII name is the same bytes), normalised as iconv-lite looks names up:
 * lower-cased, everything but [a-z0-9] dropped ("UTF--7", "utf-_7" and
 * "utf\-7" are all "utf7" to it).
 */
const SAFE_CHARSETS = new Set([
  'utf8',
  'utf16',
  'utf16le',
  'utf16be',
  'utf32',
  'utf32le',
  'utf32be',
  'ascii',
  'usascii',
  'latin1',
  // Single-byte supersets of ASCII: bytes below 0x80 are ASCII in each, so the byte scan reads what the app
  // reads. Multi-byte ones (Shift_JIS, GBK, Big5) are not here: a trail byte 0x5C would end a string the
  // scan thinks goes on, and UTF-7, EBCDIC and ISO-2022 can spell "_method" without its ASCII bytes.
  ...Array.from({ length: 16 }, (_, i) => `iso8859${i + 1}`),
  ...Array.from({ length: 9 }, (_, i) => `windows125${i}`),
  ...Array.from({ length: 9 }, (_, i) => `cp125${i}`),
  'koi8r',
  'koi8u',
  'macroman',
  'macintosh',
  'cp437',
  'cp850',
  'ibm437',
  'ibm850',
]);

/** The first charset parameter the sidecar cannot read as the app would (any "charset*" variant included), if any. */
function unsafeCharset(params: Map<string, string[]>): string | undefined {
  for (const [name, values] of params) {
    if (!name.startsWith('charset')) continue;
    for (const v of values) if (name !== 'charset' || !SAFE_CHARSETS.has(v.toLowerCase().replace(/[^a-z0-9]/g, ''))) return v;
  }
  return undefined;
}

function printableParam(s: string): string {
  const shown = s.replace(/[^\x20-\x7e]/g, '?');
  return shown.length > 40 ? `${shown.slice(0, 40)}…` : shown;
}

/** A form name could read as "_method": it needs a "%" escape or the letters "method" (any case) somewhere. */
function mayNameMethod(body: Buffer): boolean {
  if (body.indexOf(0x25) !== -1) return true;
  for (const m of [0x6d, 0x4d]) {
    for (let i = body.indexOf(m); i !== -1; i = body.indexOf(m, i + 1)) if (methodAt(body, i)) return true;
  }
  return false;
}
