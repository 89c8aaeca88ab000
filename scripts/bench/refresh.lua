-- wrk script: refresh-token grants in which every token is used exactly once.
-- The pool in $TOKENS_FILE (one token per line) is split between wrk's threads; each response's
-- rotated refresh_token goes back into the thread's queue, so a token is never presented twice
-- (which would revoke its family, RFC 9700 §4.14.2). Needs at least as many tokens as connections.
local counter = 0

function setup(thread)
  thread:set("slice", counter)
  counter = counter + 1
end

local queue = {}
local path, client_id
local refused = 0

function init(args)
  path = os.getenv("TOKEN_PATH")
  client_id = os.getenv("CLIENT_ID")
  local threads = tonumber(os.getenv("THREADS"))
  local all = {}
  for line in io.lines(os.getenv("TOKENS_FILE")) do all[#all + 1] = line end
  local per = math.floor(#all / threads)
  for i = slice * per + 1, (slice + 1) * per do queue[#queue + 1] = all[i] end
end

function request()
  local token = table.remove(queue, 1)
  assert(token, "token pool exhausted: use more tokens than connections")
  local body = "grant_type=refresh_token&client_id=" .. client_id .. "&refresh_token=" .. token
  return wrk.format("POST", path, { ["Content-Type"] = "application/x-www-form-urlencoded" }, body)
end

function response(status, headers, body)
  local token = body:match('"refresh_token":"([^"]+)"')
  if status == 200 and token then
    queue[#queue + 1] = token
  else
    refused = refused + 1
  end
end
