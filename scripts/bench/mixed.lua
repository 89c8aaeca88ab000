-- wrk script: the Task API's list with a create every 20th request, bearer token from $TOKEN.
local n = 0
function request()
  n = n + 1
  local headers = { ["Authorization"] = "Bearer " .. os.getenv("TOKEN"), ["Content-Type"] = "application/json" }
  if n % 20 == 0 then
    return wrk.format("POST", "/api/tasks", headers, '{"title":"soak task ' .. n .. '"}')
  end
  return wrk.format("GET", "/api/tasks", headers)
end
