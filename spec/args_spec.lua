-- gpurun.args: options through lua-argparse, checked values, one-line
-- errors with exit 2; and the scripts' command lines run end to end.
local gpurun = require("gpurun")
local args = require("gpurun.args")
local process = require("spec.support.process")

-- Runs gpurun with `argv` -> stdout, stderr, exit code.
local function run_gpurun(argv)
  local words = {}
  for _, word in ipairs(argv) do
    words[#words + 1] = process.quote(word)
  end
  local result = process.gpurun(table.concat(words, " "))
  return result.stdout, result.stderr, result.code
end

-- The command line of scripts/cudagraphs.lua, built the same way.
local function cudagraphs_cli()
  local cli = args.new("cudagraphs.lua", "test")
  cli:integer_option("--elements", "Elements per vector.", 4096)
  cli:common_options{ iters = 1000 }
  return cli
end

describe("gpurun.args", function()
  it("reads positive integers and refuses everything else", function()
    assert.are.equal(4096, args.to_integer("4096"))
    assert.are.equal(7, args.to_integer("+7"))
    assert.are.equal(12, args.to_integer(" 12 "))
    assert.are.equal("integer", math.type(args.to_integer("1")))
    for _, bad in ipairs{ "0", "-3", "abc", "1.5", "1e3", "0x10", "", "12abc" } do
      local value, why = args.to_integer(bad)
      assert.is_nil(value, bad)
      assert.are.equal("expected a positive integer, got '" .. bad .. "'", why)
    end
    local value, why = args.to_integer("99999999999999999999")
    assert.is_nil(value)
    assert.matches("too large", why)
  end)

  it("reads non-negative integers for a minimum of 0", function()
    assert.are.equal(0, args.to_integer("0", 0))
    local value, why = args.to_integer("-1", 0)
    assert.is_nil(value)
    assert.are.equal("expected a non-negative integer, got '-1'", why)
  end)

  it("reads finite numbers", function()
    assert.are.equal(2.5, args.to_number("2.5"))
    assert.are.equal(-0.001, args.to_number("-1e-3"))
    for _, bad in ipairs{ "abc", "nan", "inf", "1e999", "" } do
      local value, why = args.to_number(bad)
      assert.is_nil(value, bad)
      assert.are.equal("expected a finite number, got '" .. bad .. "'", why)
    end
  end)

  it("quotes the input in its messages through gpurun.quoted, capped at a line", function()
    local long = ("7"):rep(100000) .. "x"
    for _, convert in ipairs({ args.to_integer, args.to_number }) do
      local value, why = convert(long)
      assert.is_nil(value)
      assert.matches("got '7777777777777777777777777777777777777777...77777777777x' (100001 bytes)", why, 1, true)
      assert.is_true(#why < 200, why)
      local hostile = setmetatable({}, { __tostring = function() return {} end, __name = "gpurun.Buffer" })
      value, why = convert(hostile)
      assert.is_nil(value)
      assert.matches("got a table named gpurun.Buffer$", why)
      value, why = convert("1\n2")
      assert.is_nil(value)
      assert.matches("got '1\\x0A2'", why, 1, true)
    end
    local value, why = args.to_integer(("9"):rep(5000))
    assert.is_nil(value)
    assert.matches("(5000 bytes) (too large)", why, 1, true)
    -- The other parsers of command-line text quote the same way.
    local hostile = setmetatable({}, { __tostring = function() return {} end })
    local sizes, plot = require("gpurun.sweep.sizes"), require("gpurun.plot")
    for _, parse in ipairs({ sizes.parse_size, sizes.parse_range, plot.files }) do
      assert.matches("got a table$", select(2, parse(hostile)))
      assert.matches("%(100001 bytes%)$", select(2, parse(long)))
    end
  end)

  it("gives the defaults with converted types", function()
    local ok, options = cudagraphs_cli():try_parse({})
    assert.is_true(ok)
    assert.are.same({ elements = 4096, iters = 1000, device = 0 },
                    { elements = options.elements, iters = options.iters, device = options.device })
    assert.are.equal("integer", math.type(options.elements))
    assert.is_falsy(options.json)
  end)

  it("reads the options it was given", function()
    local ok, options = cudagraphs_cli():try_parse{ "--elements", "1000", "--iters=20",
                                                    "--device", "1", "--json" }
    assert.is_true(ok)
    assert.are.equal(1000, options.elements)
    assert.are.equal(20, options.iters)
    assert.are.equal(1, options.device)
    assert.is_true(options.json)
  end)

  it("names the option and the value it refuses, on one line", function()
    local cases = {
      { { "--elements", "0" }, "--elements: expected a positive integer, got '0'" },
      { { "--elements", "-3" }, "--elements: expected a positive integer, got '-3'" },
      { { "--elements=-3" }, "--elements: expected a positive integer, got '-3'" },
      { { "--iters", "abc" }, "--iters: expected a positive integer, got 'abc'" },
      { { "--device", "-1" }, "--device: expected a non-negative integer, got '-1'" },
      { { "--elements" }, "option '--elements' requires an argument" },
    }
    for _, case in ipairs(cases) do
      local ok, message = cudagraphs_cli():try_parse(case[1])
      assert.is_false(ok, table.concat(case[1], " "))
      assert.are.equal(case[2], message)
    end
    local ok, message = cudagraphs_cli():try_parse{ "--elemnts", "5" }
    assert.is_false(ok)
    assert.matches("^unknown option '%-%-elemnts'", message)
    assert.is_nil(message:find("\n"), "one line")
  end)

  it("reads a negative number for a number option", function()
    local cli = args.new("t.lua", "test")
    cli:number_option("--alpha", "A coefficient.", 2.5)
    local ok, options = cli:try_parse{ "--alpha", "-0.5" }
    assert.is_true(ok)
    assert.are.equal(-0.5, options.alpha)
    ok, options = cli:try_parse{}
    assert.is_true(ok)
    assert.are.equal(2.5, options.alpha)
  end)

  it("names an option with a short alias by its long name, negative values included", function()
    local cli = args.new("t.lua", "test")
    cli:integer_option("-n --array-size", "Array size.", 50000)
    local ok, options = cli:try_parse{ "-n", "7" }
    assert.is_true(ok)
    assert.are.equal(7, options.array_size)
    for _, argv in ipairs{ { "-n", "-5" }, { "--array-size", "-5" }, { "--array-size=-5" } } do
      local refused, message = cli:try_parse(argv)
      assert.is_false(refused, table.concat(argv, " "))
      assert.are.equal("--array-size: expected a positive integer, got '-5'", message)
    end
  end)

  it("gives the help text for -h and --help, and never exits", function()
    -- In a child: a try_parse that exits would end the spec run.
    local script = [[
      local cli = require("gpurun.args").new("t.lua", "What t shows.")
      cli:integer_option("--size", "Elements.", 4)
      for _, argv in ipairs{ { "--help" }, { "-h" }, { "--size", "0", "--help" }, { "--bogus", "-h" } } do
        local ok, text = cli:try_parse(argv)
        assert(ok == "help", table.concat(argv, " ") .. ": " .. tostring(ok))
        assert(text == cli.parser:get_help(), text)
      end
      local ok, text = cli:try_parse{ "--", "--help" }
      assert(ok == false and text:match("too many arguments"), tostring(text))
      io.write("returned")
    ]]
    local stdout, stderr, code = run_gpurun{ "-e", script }
    assert.are.same({ "returned", "", 0 }, { stdout, stderr, code })
  end)

  it("says why a device cannot be used, with the exit code", function()
    assert.are.same({ "no CUDA GPU available: libcuda.so.1: cannot open", 1 },
                    { args.device_problem(0, 0, "libcuda.so.1: cannot open") })
    assert.are.same({ "no CUDA GPU available: no device", 1 },
                    { args.device_problem(0, 0, nil) })
    assert.are.same({ "error: --device 3: no such CUDA device (1 device visible)", 2 },
                    { args.device_problem(3, 1, nil) })
    assert.are.same({ "error: --device 2: no such CUDA device (2 devices visible)", 2 },
                    { args.device_problem(2, 2, nil) })
    assert.is_nil(args.device_problem(1, 2, nil))
  end)
end)

describe("a script's command line", function()
  local function assert_usage_error(argv, expected_line)
    local stdout, stderr, code = run_gpurun(argv)
    assert.are.equal(2, code, table.concat(argv, " ") .. ": " .. stderr)
    assert.are.equal("", stdout)
    if expected_line then
      assert.are.equal(expected_line .. "\n", stderr)
    else
      assert.matches("^[%w.]+: error: [^\n]+\n$", stderr)
    end
  end

  it("exits 2 with one line for --elements 0, launching nothing", function()
    assert_usage_error({ "scripts/cudagraphs.lua", "--elements", "0" },
                       "cudagraphs.lua: error: --elements: expected a positive integer, got '0'")
  end)

  it("exits 2 with one line for every bad value", function()
    for _, argv in ipairs{
      { "scripts/cudagraphs.lua", "--elements", "-5" },
      { "scripts/cudagraphs.lua", "--elements", "many" },
      { "scripts/cudagraphs.lua", "--iters", "0" },
      { "scripts/cudagraphs.lua", "--device", "first" },
      { "scripts/cudagraphs.lua", "--bogus" },
      { "scripts/stencil2d.lua", "--width", "0" },
      { "scripts/stencil2d.lua", "--alpha", "fast" },
      { "scripts/stencil2d.lua", "--height", "2000000" },
      { "scripts/stencil2d.lua", "--width", "100000", "--height", "100000" },
    } do
      assert_usage_error(argv)
    end
  end)

  it("prints --help and exits 0 without a GPU", function()
    local stdout, _, code = run_gpurun{ "scripts/cudagraphs.lua", "--help" }
    assert.are.equal(0, code)
    assert.matches("Usage: cudagraphs.lua", stdout, 1, true)
    for _, option in ipairs{ "--elements", "--iters", "--device", "--json" } do
      assert.matches(option, stdout, 1, true)
    end
  end)

  it("refuses a device that does not exist", function()
    local stdout, stderr, code = run_gpurun{ "scripts/cudagraphs.lua", "--device", "99" }
    assert.are.equal("", stdout)
    if gpurun.device_count() > 0 then
      assert.are.equal(2, code)
      assert.matches("^cudagraphs.lua: error: %-%-device 99: no such CUDA device", stderr)
    else
      assert.are.equal(1, code)
      assert.matches("^cudagraphs.lua: no CUDA GPU available: [^\n]+\n$", stderr)
    end
  end)
end)
