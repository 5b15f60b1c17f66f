-- wrk script of the service benchmark (run.py starts wrk with it).
--
--   wrk -t1 -c20 -d5s -s load.lua http://127.0.0.1:PORT -- MODE DATADIR STATEFILE
--
-- MODE is validate, list or search; DATADIR holds the files written by workload.py.
-- Every response is checked: status 200 and the length of the expected body. The result
-- is one line, "WRK_RESULT {json}", printed by done(). STATEFILE carries the index of the
-- next unique page of the list mode from the warm-up to the measured window, so that no
-- page is requested twice in one run.

-- Globals, not locals: done() runs in another Lua state and reads them by thread:get().
mode = nil
statefile = nil
checked = 0
bad_status = 0
bad_length = 0
first_bad = ""
page_index = 0
page_start = 0
wrapped = 0

local requests_ = {}  -- prebuilt requests (validate, search)
local expected = {}   -- expected body length: by filter key (search), by offset + 1 (list)
local expected_validate = 0
local counter = 0
local page_window, page_stride, page_limit = 0, 1, 100

local function lines(path)
  local out = {}
  for line in io.lines(path) do
    out[#out + 1] = line
  end
  return out
end

function init(args)
  mode, statefile = args[1], args[3]
  local dir = args[2]
  local headers = {["Content-Type"] = "application/json"}
  if mode == "validate" then
    local rows = lines(dir .. "/validate.txt")
    expected_validate = tonumber(rows[1])
    for i = 2, #rows do
      requests_[#requests_ + 1] = wrk.format("POST", "/cities/validate", headers, rows[i])
    end
  elseif mode == "list" then
    local rows = lines(dir .. "/pages.txt")
    local w, s, l = rows[1]:match("^(%d+) (%d+) (%d+)$")
    page_window, page_stride, page_limit = tonumber(w), tonumber(s), tonumber(l)
    for i = 2, #rows do
      expected[i - 1] = tonumber(rows[i])
    end
    local file = statefile and io.open(statefile, "r")
    if file then
      page_start = tonumber(file:read("*l")) or 0
      file:close()
    end
    page_index = page_start
  elseif mode == "search" then
    local rows = lines(dir .. "/search.txt")
    for i = 2, #rows do
      local key, length, body = rows[i]:match("^([^\t]+)\t(%d+)\t(.*)$")
      expected[key] = tonumber(length)
      requests_[#requests_ + 1] = wrk.format("POST", "/cities/search", headers, body)
    end
  else
    error("unknown mode " .. tostring(mode))
  end
end

function request()
  counter = counter + 1
  if mode == "list" then
    local offset = 0
    if counter % 10 == 0 then
      -- A permutation of 1..window: unique until the window is used up.
      offset = (page_index * page_stride) % page_window + 1
      page_index = page_index + 1
      if page_index > page_window then
        wrapped = 1
      end
    end
    return wrk.format("GET", "/cities?limit=" .. page_limit .. "&offset=" .. offset)
  end
  return requests_[(counter - 1) % #requests_ + 1]
end

local function note(status, body, want)
  if first_bad == "" then
    first_bad = string.format("status %d, %d bytes (expected %s): %s", status, #body,
      tostring(want), body:sub(1, 200))
  end
end

function response(status, headers, body)
  checked = checked + 1
  if status ~= 200 then
    bad_status = bad_status + 1
    note(status, body, "status 200")
    return
  end
  local want
  if mode == "validate" then
    want = expected_validate
  elseif mode == "list" then
    local offset = body:match('^{"offset":(%d+),')
    want = offset and expected[tonumber(offset) + 1]
  else
    local country, min_population = body:match(
      '^{"query":{"country":"(%u%u)","admin1":null,"min_population":(%d+),')
    want = country and expected[country .. ":" .. min_population]
  end
  if want == nil or #body ~= want then
    bad_length = bad_length + 1
    note(status, body, want)
  end
end

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

function done(summary, latency, requests)
  local total = {checked = 0, bad_status = 0, bad_length = 0, wrapped = 0}
  local bad, next_page, start = "", 0, 0
  for _, thread in ipairs(threads) do
    for key in pairs(total) do
      total[key] = total[key] + thread:get(key)
    end
    if bad == "" then
      bad = thread:get("first_bad")
    end
    next_page = math.max(next_page, thread:get("page_index"))
    start = thread:get("page_start")
    local path = thread:get("statefile")
    if thread:get("mode") == "list" and path then
      local file = assert(io.open(path, "w"))
      file:write(string.format("%d\n", next_page))
      file:close()
    end
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,"errors_connect":%d,'
      .. '"errors_read":%d,"errors_write":%d,"errors_status":%d,"errors_timeout":%d,'
      .. '"checked":%d,"bad_status":%d,"bad_length":%d,"pages_from":%d,"pages_to":%d,'
      .. '"pages_wrapped":%d,"latency_mean_us":%.1f,"latency_p50_us":%d,"latency_p99_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, total.checked, total.bad_status, total.bad_length, start, next_page,
    total.wrapped, latency.mean, latency:percentile(50), latency:percentile(99)))
  if bad ~= "" then
    io.write("WRK_FIRST_BAD " .. bad:gsub("[\r\n]", " ") .. "\n")
  end
end
