-- SPDX-License-Identifier: MIT
-- sbxd's exec with capture = true driven by Debian's neovim (vim.rpcrequest over
-- sockconnect with rpc = true), run by tests/e2e/test_capture.py as
--   SBX_SOCK=PATH nvim --headless --clean -i NONE -c 'luafile nvim_capture.lua'
-- A script sees only the responses to its requests: the notifications sbxd sends go to
-- neovim's own API. It prints a JSON report on stdout and quits.

local report = { steps = {} }
local ch
local last_id = 0

local function request(method, params)
  last_id = last_id + 1
  local ok, res = pcall(vim.rpcrequest, ch, method, params)
  return { ok = ok, res = res, id = last_id }
end

local function main()
  ch = vim.fn.sockconnect('pipe', os.getenv('SBX_SOCK'), { rpc = true })
  local cmd = { 'sh', '-c', 'echo hello; echo oops >&2' }
  table.insert(report.steps, 'capture')
  report.capture = request('exec', { argv = cmd, capture = true })
  table.insert(report.steps, 'plain')
  report.plain = request('exec', { argv = { 'echo', 'hello' } })
  vim.fn.chanclose(ch)
end

-- A hang is a failure with a report, not a stuck test.
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
