-- tools/gpu-check.sh's sanitizer part, what of it runs without a GPU: the
-- table of small arguments (every program it names exists and takes those
-- arguments), the parsing of compute-sanitizer's reports against
-- tools/compute-sanitizer-expected.txt, and tests/sanitizer/while_graph's
-- kernels, compiled by NVRTC. The runs themselves are the GPU host's.
local process = require("spec.support.process")
local q = process.quote

-- The build folder of the gpurun under test (build/, build-asan/, ...).
local BUILD = process.gpurun_bin():match("^(.*)/[^/]*$")

local function table_lines()
  local lines = {}
  for line in io.lines("tools/compute-sanitizer-programs.txt") do
    local program, args = line:match("^([^#%s]%S*)%s*(.*)$")
    if program then lines[#lines + 1] = { program = program, args = args } end
  end
  return lines
end

-- Runs a shell fragment with tools/gpu-check.sh's functions defined.
local function with_functions(fragment)
  local logs = os.tmpname()
  os.remove(logs)
  local result = process.run(("GPURUN_CHECK_LOGS=%s bash -c %s"):format(q(logs),
    q("source tools/gpu-check.sh; " .. fragment)))
  os.execute("rm -rf " .. q(logs))
  return result
end

local REPORT = [[
# memcheck scripts/stencil2d.lua: build-gpu/gpurun scripts/stencil2d.lua --width 64 --height 64 --iters 3
========= COMPUTE-SANITIZER
32 points, tolerance 0.0001: 814 steps on the device
========= Program hit CUDA_ERROR_ILLEGAL_ADDRESS (error 700) due to "an illegal memory access was encountered" on CUDA API call to cuStreamQuery.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: gpurun_wait_stream in gpurun
=========
========= Invalid __global__ write of size 4 bytes
=========     at stencil+0x90
=========     by thread (0,0,0) in block (0,0,0)
=========
========= LEAK SUMMARY: 0 bytes leaked in 0 allocations
========= ERROR SUMMARY: 2 errors
# exit 1
]]

describe("tools/gpu-check.sh sanitizers", function()
  it("names programs that exist, each taking its small arguments", function()
    local gpurun = require("gpurun")
    for _, entry in ipairs(table_lines()) do
      local args = entry.args:gsub("BUILD", BUILD)
      local command
      if entry.program:match("%.lua$") then
        assert(io.open(entry.program), entry.program .. " is listed but does not exist"):close()
        command = q(process.gpurun_bin()) .. " " .. entry.program .. " " .. args
      else
        local source = entry.program:gsub("^tests/", "tests/sanitizer/") .. ".c"
        assert(io.open(source), entry.program .. " is listed but " .. source .. " does not exist"):close()
        command = q(BUILD .. "/" .. entry.program) .. " " .. args
      end
      -- With no GPU every program stops for want of one (exit 1); a usage
      -- error (exit 2) means the table's arguments are wrong. With one,
      -- that is the GPU host's to run.
      if gpurun.device_count() == 0 then
        local result = process.run(command)
        if result.code ~= 127 then -- a C bench with no libcuda here at all
          assert.are_not.equal(2, result.code, command .. "\n" .. result.stderr)
        end
      end
    end
  end)

  it("has small arguments for every program it runs", function()
    local result = with_functions("program_lines >/dev/null")
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
  end)

  it("runs only the programs $GPURUN_CHECK_PROGRAMS matches, where it is set", function()
    local result = with_functions("GPURUN_CHECK_PROGRAMS='^(scripts/cudagraphs|bench/sort)\\.lua$' "
      .. "program_lines | cut -f1")
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("bench/sort.lua\nscripts/cudagraphs.lua\n", result.stdout)
  end)

  it("lists each error of a report, and counts those the expected file does not list", function()
    local log = os.tmpname()
    local file = assert(io.open(log, "w"))
    file:write(REPORT)
    file:close()
    local result = with_functions(("errors_of memcheck scripts/stencil2d.lua %s | while IFS= read -r r; do "
      .. "if is_expected memcheck scripts/stencil2d.lua \"$r\"; then echo listed; else echo unlisted; fi; "
      .. "printf '%%s\\n' \"$r\" | cut -f3; done"):format(q(log)))
    os.remove(log)
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("unlisted\nProgram hit CUDA_ERROR_ILLEGAL_ADDRESS (error 700) due to \"an illegal "
      .. "memory access was encountered\" on CUDA API call to cuStreamQuery.\nunlisted\nInvalid "
      .. "__global__ write of size 4 bytes\n", result.stdout)
  end)

  it("allows converge.lua's while-node fault only in the programs the expected file names", function()
    local record = "memcheck\tscripts/converge.lua\tProgram hit CUDA_ERROR_ILLEGAL_ADDRESS (error 700)\tHost Frame: x"
    local result = with_functions(("is_expected memcheck scripts/converge.lua %s && echo listed; "
      .. "is_expected memcheck scripts/dag.lua %s || echo unlisted; "
      .. "is_expected memcheck scripts/converge.lua %s || echo unlisted"):format(q(record),
      q(record:gsub("converge", "dag")), q("memcheck\tscripts/converge.lua\texit status 134\t")))
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("listed\nunlisted\nunlisted\n", result.stdout)
  end)

  it("allows initcheck's reports on combine only where a copy runs beside a kernel", function()
    local function record(program, where)
      return ("initcheck\t%s\tUninitialized __global__ memory read of size 4 bytes\tat %s+0x140 | by thread (32,0,0)")
        :format(program, where)
    end
    local cases = {
      { "scripts/dag.lua", "combine", "listed" },
      { "tests/copy_streams", "combine", "listed" },
      { "tests/sanitizer/two_streams.lua", "combine_uploaded_graph", "listed" },
      { "tests/sanitizer/two_streams.lua", "combine_one_stream", "unlisted" },
      { "scripts/dag.lua", "scale", "unlisted" },
      { "scripts/fused.lua", "combine", "unlisted" },
    }
    local fragment, expected = {}, {}
    for _, case in ipairs(cases) do
      fragment[#fragment + 1] = ("if is_expected initcheck %s %s; then echo listed; else echo unlisted; fi")
        :format(q(case[1]), q(record(case[1], case[2])))
      expected[#expected + 1] = case[3]
    end
    local result = with_functions(table.concat(fragment, "; "))
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal(table.concat(expected, "\n") .. "\n", result.stdout)
  end)

  it("reads racecheck's summary and the program's exit status", function()
    local log = os.tmpname()
    local file = assert(io.open(log, "w"))
    file:write("# racecheck scripts/axpy.lua: gpurun scripts/axpy.lua\n========= COMPUTE-SANITIZER\n"
      .. "========= RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warning)\n# exit 1\n")
    file:close()
    local result = with_functions(("reported_count %s; exit_of %s"):format(q(log), q(log)))
    os.remove(log)
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("3\n1\n", result.stdout)
  end)

  it("counts errors past the print limit as listed only when every printed one is", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir)))
    local printed = "========= Uninitialized __global__ memory read of size 4 bytes\n"
      .. "=========     at combine+0x140\n=========     by thread (0,0,0) in block (0,0,0)\n=========\n"
    local function log(name, program, body)
      local file = assert(io.open(dir .. "/" .. name .. ".log", "w"))
      file:write("# initcheck " .. program .. ": gpurun " .. program .. "\n========= COMPUTE-SANITIZER\n"
        .. body .. "# exit 0\n")
      file:close()
    end
    log("listed", "scripts/dag.lua", printed .. printed .. "========= ERROR SUMMARY: 4096 errors\n")
    log("unlisted", "scripts/axpy.lua", printed .. "========= ERROR SUMMARY: 10 errors\n")
    local result = with_functions("count_errors " .. q(dir))
    os.execute("rm -rf " .. q(dir))
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("ERROR: initcheck scripts/axpy.lua: Uninitialized __global__ memory read of size 4 bytes\n",
      result.stdout, 1, true)
    assert.matches("ERROR: initcheck scripts/axpy.lua: 9 error(s) in the summary not parsed", result.stdout, 1, true)
    assert.are.equal("compute-sanitizer: 4106 error(s), 4096 listed in tools/compute-sanitizer-expected.txt "
      .. "(4094 of them past the print limit of runs whose printed errors are all listed), 10 unlisted",
      result.stdout:match("([^\n]*)\n$"))
  end)

  it("takes a listed exit status as the reason a run has no summary, and only that one", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir)))
    local function log(name, tool, program, status)
      local file = assert(io.open(dir .. "/" .. name .. ".log", "w"))
      file:write("# " .. tool .. " " .. program .. ": gpurun " .. program .. "\n========= COMPUTE-SANITIZER\n"
        .. "# exit " .. status .. "\n")
      file:close()
    end
    log("stopped", "racecheck", "scripts/converge.lua", 124)
    log("synccheck", "synccheck", "scripts/converge.lua", 124)
    log("other", "racecheck", "scripts/dag.lua", 124)
    local result = with_functions("count_errors " .. q(dir))
    os.execute("rm -rf " .. q(dir))
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("ERROR: racecheck scripts/dag.lua: exit status 124", result.stdout, 1, true)
    assert.matches("ERROR: synccheck scripts/converge.lua: exit status 124", result.stdout, 1, true)
    assert.no.matches("ERROR: racecheck scripts/converge.lua", result.stdout, 1, true)
    assert.are.equal("compute-sanitizer: 5 error(s), 1 listed in tools/compute-sanitizer-expected.txt "
      .. "(0 of them past the print limit of runs whose printed errors are all listed), 4 unlisted",
      result.stdout:match("([^\n]*)\n$"))
  end)

  it("compiles tests/sanitizer/copy_streams's kernels (dag.lua's) with NVRTC", function()
    local result = process.run(q(BUILD .. "/tests/copy_streams") .. " --compile-only")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^copy_streams: compiled scale, shift and combine", result.stdout)
  end)

  it("compiles tests/sanitizer/while_graph's kernels (converge.lua's) with NVRTC", function()
    local result = process.run(q(BUILD .. "/tests/while_graph") .. " --compile-only")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^while_graph: compiled its kernels", result.stdout)
  end)

  it("runs tests/sanitizer/two_streams.lua's pipeline eight ways, all right #gpu", function()
    local result = process.run(q(process.gpurun_bin()) .. " tests/sanitizer/two_streams.lua")
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.are.equal("combine_one_stream: 0 of 4096 wrong\ncombine_two_streams: 0 of 4096 wrong\n"
      .. "combine_graph: 0 of 4096 wrong\ncombine_copy_graph: 0 of 4096 wrong\n"
      .. "combine_updated_graph: 0 of 4096 wrong\ncombine_set_args_graph: 0 of 4096 wrong\n"
      .. "combine_uploaded_graph: 0 of 4096 wrong\ncombine_copy_streams: 0 of 4096 wrong\n", result.stdout)
  end)

  it("runs dag.lua's two-stream round eight times with the driver alone, right #gpu", function()
    local result = process.run(q(BUILD .. "/tests/copy_streams") .. " --rounds 8")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("\ncopy_streams: 8 rounds, right\n$", result.stdout)
  end)

  it("runs converge.lua's while graph three times, the same steps each time #gpu", function()
    local result = process.run(q(BUILD .. "/tests/while_graph") .. " --launches 3")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("while_graph: 3 launches, 814 steps each\n$", result.stdout)
  end)
end)

describe("tools/gpu-check.sh's commit line", function()
  -- A copy of the tree without .git, as a GPU host gets it: two tracked
  -- files, gpu-check.sh itself, and what `stamp` would have written.
  local function copy_without_git()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute(("mkdir -p %s/tools && cp tools/gpu-check.sh %s/tools/"):format(q(dir), q(dir))))
    for name, text in pairs({ ["a.txt"] = "one\n", ["b.txt"] = "two\n" }) do
      local file = assert(io.open(dir .. "/" .. name, "w"))
      file:write(text)
      file:close()
    end
    return dir
  end
  local function commit_line(dir)
    local result = process.run(("cd %s && bash -c %s"):format(q(dir),
      q("source tools/gpu-check.sh; commit_line")))
    assert.are.equal(0, result.code, result.stderr)
    return result.stdout
  end

  it("names the stamped commit and how many tracked files differ, without .git", function()
    local dir = copy_without_git()
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    assert.matches("^not a git checkout, and no %.tree%-stamp/", commit_line(dir))
    assert(os.execute(("cd %s && mkdir .tree-stamp && echo 0123abcd >.tree-stamp/HEAD"
      .. " && sha256sum a.txt b.txt >.tree-stamp/files"):format(q(dir))))
    assert.are.equal("0123abcd (stamped; 0 of 2 tracked files differ)\n", commit_line(dir))
    assert(os.execute(("echo changed >%s/b.txt && rm %s/a.txt"):format(q(dir), q(dir))))
    assert.are.equal("0123abcd (stamped; 2 of 2 tracked files differ)\n", commit_line(dir))
  end)

  it("records HEAD and every tracked file in a checkout (stamp)", function()
    if process.run("git --version").code ~= 0 then pending("git is not installed") return end
    local dir = copy_without_git()
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    local made = process.run(("cd %s && git init -q && git add a.txt b.txt tools"
      .. " && git -c user.name=spec -c user.email=spec@localhost commit -qm files"
      .. " && tools/gpu-check.sh stamp"):format(q(dir)))
    assert.are.equal(0, made.code, made.stderr)
    local head = process.run(("cd %s && git rev-parse HEAD"):format(q(dir))).stdout
    assert.are.equal(head, assert(io.open(dir .. "/.tree-stamp/HEAD")):read("a"))
    assert(os.execute(("rm -rf %s/.git"):format(q(dir))))
    assert.are.equal(head:gsub("\n$", "") .. " (stamped; 0 of 3 tracked files differ)\n",
      commit_line(dir))
  end)
end)
