-- wrk script: ROPC sign-ins for a pool of users (bench1@example.com … benchN), so that no single
-- account's lockout or row lock is what gets measured.
local counter = 0
function setup(thread)
  thread:set("slice", counter)
  counter = counter + 1
end

local n = 0
function request()
  n = n + 1
  local users = tonumber(os.getenv("USERS"))
  local user = "bench" .. ((n + slice * 7) % users + 1) .. "%40example.com"
  local body = "grant_type=password&client_id=" .. os.getenv("CLIENT_ID") .. "&username=" .. user ..
    "&password=" .. os.getenv("PASSWORD") .. "&scope=openid+offline_access+" .. os.getenv("CLIENT_ID")
  return wrk.format("POST", os.getenv("TOKEN_PATH"), { ["Content-Type"] = "application/x-www-form-urlencoded" }, body)
end
