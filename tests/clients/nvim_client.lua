-- SPDX-License-Identifier: MIT
-- sbxd driven by Debian's neovim as a msgpack-rpc client (sockconnect with rpc = true,
-- vim.rpcrequest, vim.rpcnotify), run by tests/e2e/test_clients.py as
--   SBX_SOCK=PATH nvim --headless --clean -i NONE -c 'luafile nvim_client.lua'
-- It prints a JSON report on stdout and quits. vim.rpcrequest blocks, so what must reach
-- sbxd while a request is in flight (exec.stdin) is sent from a libuv timer, which runs in
-- the loop the request waits in. Neovim dispatches the notifications sbxd sends to its own
-- API (they are not visible here); the test reads them from a relay on the socket.

local rpc = dofile('nvim_rpc.lua')
local report, request = rpc.report, rpc.request

-- Runs fn as soon as the loop turns, that is while the next request waits for its answer.
local function during_next_request(fn)
  local t = vim.loop.new_timer()
  t:start(0, 0, function()
    t:close()
    fn()
  end)
end

local function main()
  local ch = rpc.connect()
  report.channel = ch

  table.insert(report.steps, 'ping')
  report.ping = request('ping', {})

  table.insert(report.steps, 'stdin')
  local id = rpc.last_id + 1
  during_next_request(function()
    vim.rpcnotify(ch, 'exec.stdin', id, 'hello ')
    vim.rpcnotify(ch, 'exec.stdin', id, 'world\n')
    vim.rpcnotify(ch, 'exec.stdin', id, '')
  end)
  report.stdin = request('exec', { argv = { 'sh', '-c', 'cat; exit 3' }, stdin = true })

  -- Lua strings are bytes; neovim sends them as msgpack str, UTF-8 or not.
  table.insert(report.steps, 'odd_argv')
  report.odd_argv = request('exec', {
    argv = { 'sh', '-c', '[ "$1" = "$(printf "\\377\\376")" ] && printf "%s" "$1"', 'sh',
      '\255\254' },
  })

  table.insert(report.steps, 'stdin_not_asked')
  id = rpc.last_id + 1
  during_next_request(function()
    vim.rpcnotify(ch, 'exec.stdin', id, 'lost')
  end)
  report.stdin_not_asked = request('exec', { argv = { 'sh', '-c', 'sleep 1; echo ok' } })

  table.insert(report.steps, 'bad_args')
  report.bad_args = request('exec', { argv = 5 })
  table.insert(report.steps, 'unknown_method')
  report.unknown_method = request('rm_rf', {})
  vim.fn.chanclose(ch)
end

rpc.run(main)
