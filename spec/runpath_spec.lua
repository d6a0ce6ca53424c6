-- Every binary and module the build made carries only absolute RUNPATH
-- entries: an empty one (CMake once padded the build tree's with ':') is
-- the current directory, from which a stray liblua5.4.so.0 would be loaded.
-- tools/package-check.sh holds the .deb's and the rock's files to the same.
local process = require("spec.support.process")
local q = process.quote

describe("the built binaries", function()
  it("have no empty or relative RUNPATH entry (tools/check-runpath.sh)", function()
    local build_dir = process.gpurun_bin():match("^(.*)/[^/]*$")
    local result = process.run("tools/check-runpath.sh " .. q(build_dir))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("/gpurun %(RUNPATH=/", result.stdout)
    local module = io.open(build_dir .. "/gpurun.so") -- sanitizer builds make none
    if module then
      module:close()
      assert.matches("/gpurun%.so %(RUNPATH=/", result.stdout)
    end
  end)

  it("a bad entry fails the check, naming it", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir)))
    local source = dir .. "/m.c"
    local file = assert(io.open(source, "w"))
    file:write("int main(void) { return 0; }\n")
    file:close()
    for _, runpath in ipairs({ "/usr/lib:", "lib", "/usr/lib::/opt" }) do
      local built = process.run(("cc -o %s/m %s -Wl,--enable-new-dtags,-rpath,%s"):format(q(dir),
        q(source), q(runpath)))
      assert.are.equal(0, built.code, built.stderr)
      local result = process.run("tools/check-runpath.sh " .. q(dir))
      assert.are.equal(1, result.code, result.stdout)
      assert.matches("BAD: .*/m: RUNPATH %[" .. runpath:gsub("%p", "%%%0") .. "%]", result.stdout)
    end
    os.execute("rm -rf " .. q(dir))
  end)
end)
