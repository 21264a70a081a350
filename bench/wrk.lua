-- wrk script for make bench: each request takes the next single-use token of a file and the next body
-- (wrk ... -- TOKENS_FILE BODIES_FILE), and done() prints one JSON line the bench reads.
local tokens, bodies = {}, {}
local n = 0

function init(args)
  for line in io.lines(args[1]) do tokens[#tokens + 1] = line end
  for line in io.lines(args[2]) do bodies[#bodies + 1] = line end
end

function request()
  n = n + 1
  local body = bodies[(n - 1) % #bodies + 1]
  return wrk.format("POST", "/invoices", {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. tokens[(n - 1) % #tokens + 1],
  }, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"status":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p50":%d,"p99":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
