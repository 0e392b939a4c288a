-- SPDX-License-Identifier: MIT
-- What the neovim client scripts share (loaded with dofile from tests/clients, their cwd):
-- a request that records its msgid, and a run that turns a hang into a report.
local M = { report = { steps = {} }, last_id = 0 }

-- Neovim numbers a channel's requests 1, 2, ...: a script that must name a request's msgid
-- (exec.stdin) counts along.
function M.request(method, params)
  M.last_id = M.last_id + 1
  local ok, res = pcall(vim.rpcrequest, M.ch, method, params)
  return { ok = ok, res = res, id = M.last_id }
end

function M.connect()
  M.ch = vim.fn.sockconnect('pipe', os.getenv('SBX_SOCK'), { rpc = true })
  return M.ch
end

-- Runs main, prints the JSON report on stdout and quits; a hang is a failure with a
-- report, not a stuck test.
function M.run(main)
  local report = M.report
  local guard = vim.loop.new_timer()
  guard:start(60000, 0, function()
    report.timeout = report.steps[#report.steps] or 'start'
    io.stdout:write(vim.json.encode(report) .. '\n')
    os.exit(3)
  end)
  local ok, err = pcall(main)
  if not ok then
    report.exception = tostring(err)
  end
  io.stdout:write(vim.json.encode(report) .. '\n')
  io.stdout:flush()
  vim.cmd('qall!')
end

return M
