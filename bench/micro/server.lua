-- wrk script of `micro.py --deps --server` (server.py starts wrk with it).
--
--   wrk -t1 -cN -dSs -H "Name: value" -s server.lua http://127.0.0.1:PORT -- METHOD PATH LENGTH [BODY]
--
-- The same request every time: METHOD PATH, with the JSON BODY if given. Every response is
-- checked: status 200 and LENGTH bytes, the length of the answer checked before the run.
-- The result is one line, "WRK_RESULT {json}", printed by done().

-- Globals, not locals: done() runs in another Lua state and reads them by thread:get().
checked = 0
bad_status = 0
bad_length = 0
first_bad = ""

local expected_length = 0

function init(args)
  wrk.method, wrk.path, expected_length = args[1], args[2], tonumber(args[3])
  if args[4] then
    wrk.body = args[4]
    wrk.headers["Content-Type"] = "application/json"
  end
end

function response(status, headers, body)
  checked = checked + 1
  if status ~= 200 then
    bad_status = bad_status + 1
  elseif #body ~= expected_length then
    bad_length = bad_length + 1
  else
    return
  end
  if first_bad == "" then
    first_bad = string.format("status %d, %d bytes: %s", status, #body, body:sub(1, 200))
  end
end

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

function done(summary, latency, requests)
  local total = {checked = 0, bad_status = 0, bad_length = 0}
  local bad = ""
  for _, thread in ipairs(threads) do
    for key in pairs(total) do
      total[key] = total[key] + thread:get(key)
    end
    if bad == "" then
      bad = thread:get("first_bad")
    end
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"duration_us":%d,"errors_connect":%d,"errors_read":%d,'
      .. '"errors_write":%d,"errors_status":%d,"errors_timeout":%d,"checked":%d,'
      .. '"bad_status":%d,"bad_length":%d,"latency_p50_us":%d,"latency_p99_us":%d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    total.checked, total.bad_status, total.bad_length, latency:percentile(50),
    latency:percentile(99)))
  if bad ~= "" then
    io.write("WRK_FIRST_BAD " .. bad:gsub("[\r\n]", " ") .. "\n")
  end
end
