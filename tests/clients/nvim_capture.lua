-- SPDX-License-Identifier: MIT
-- sbxd's exec with capture = true driven by Debian's neovim (vim.rpcrequest over
-- sockconnect with rpc = true), run by tests/e2e/test_capture.py as
--   SBX_SOCK=PATH nvim --headless --clean -i NONE -c 'luafile nvim_capture.lua'
-- A script sees only the responses to its requests: the notifications sbxd sends go to
-- neovim's own API. It prints a JSON report on stdout and quits.

local rpc = dofile('nvim_rpc.lua')
local report, request = rpc.report, rpc.request

local function main()
  local ch = rpc.connect()
  local cmd = { 'sh', '-c', 'echo hello; echo oops >&2' }
  table.insert(report.steps, 'capture')
  report.capture = request('exec', { argv = cmd, capture = true })
  table.insert(report.steps, 'plain')
  report.plain = request('exec', { argv = { 'echo', 'hello' } })
  vim.fn.chanclose(ch)
end

rpc.run(main)
