-- gpurun.shell: quoting, paths and the binary running the script.

describe("gpurun.shell", function()
  local shell = require("gpurun.shell")

  it("quotes one /bin/sh word, whatever it holds", function()
    local tricky = "it's $HOME; `x` \"y\" \\ *"
    local pipe = io.popen("printf %s " .. shell.quote(tricky))
    assert.are.equal(tricky, pipe:read("a"))
    pipe:close()
  end)

  it("splits folders from paths and finds files", function()
    assert.are.equal("/a/b", shell.dirname("/a/b/c.lua"))
    assert.are.equal(".", shell.dirname("c.lua"))
    assert.is_true(shell.file_exists("spec/shell_spec.lua"))
    assert.is_false(shell.file_exists("spec/no-such-file"))
  end)

  it("names the binary running the script", function()
    -- gpurun itself, or a stock Lua 5.4 that loaded gpurun.so (tools/dev.sh test-module)
    local expected = package.preload.gpurun and "/gpurun$" or "/lua[^/]*$"
    assert.matches(expected, shell.interpreter())
  end)
end)
