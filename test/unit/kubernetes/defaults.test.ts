import { describe, expect, it } from 'vitest';
import { INJECT_DEFAULTS, parseInjectDefaults } from '../../../src/kubernetes/defaults.js';

describe('injection defaults file', () => {
  it('fills what it does not say from the embedded defaults', () => {
    expect(parseInjectDefaults('captureMode: port\nport: 18000\n', 'd.yaml')).toEqual({ ...INJECT_DEFAULTS, captureMode: 'port', port: 18000 });
    expect(parseInjectDefaults('', 'd.yaml')).toEqual(INJECT_DEFAULTS);
  });

  it('the embedded ports stay clear of the ports apps use', () => {
    for (const common of [80, 443, 3000, 5000, 8000, 8080, 8443, 9090]) expect([INJECT_DEFAULTS.port, INJECT_DEFAULTS.adminPort]).not.toContain(common);
  });

  it.each([
    ['captureMode: ebpf\n', /^d\.yaml:1:14: captureMode must be iptables or port, got "ebpf"/],
    ['image: x\nprot: 1\n', /^d\.yaml:2:1: unknown key "prot"/],
    ['port: 70000\n', /^d\.yaml:1:7: port must be a port number/],
    ['port: 17490\n', /port and adminPort must differ/],
    ['maxInFlight: 0\n', /^d\.yaml:1:14: maxInFlight must be a positive whole number/],
    ['maxEventLoopDelayMs: 2.5\n', /^d\.yaml:1:22: maxEventLoopDelayMs must be whole milliseconds/],
    ['[1, 2]\n', /^d\.yaml:1:1: injection defaults must be a mapping/],
    ['a: [\n', /^d\.yaml:\d+:\d+: /],
  ])('refuses %j naming file, line and key', (text, message) => {
    expect(() => parseInjectDefaults(text, 'd.yaml')).toThrow(message);
  });
});
