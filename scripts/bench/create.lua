-- wrk script: POST /api/tasks with a bearer token from $TOKEN.
local n = 0
function request()
  n = n + 1
  return wrk.format("POST", "/api/tasks",
    { ["Authorization"] = "Bearer " .. os.getenv("TOKEN"), ["Content-Type"] = "application/json" },
    '{"title":"bench task ' .. n .. '"}')
end
