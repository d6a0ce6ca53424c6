-- gpurun.plot: the data file and gnuplot script of a sweep's picture, and a
-- fixture data set drawn into a PNG and an SVG by the installed gnuplot
-- (Debian's gnuplot-nox, which tools/dev.sh installs). Nothing here needs a GPU.
local plot = require("gpurun.plot")
local fixture = require("spec.support.sweep_fixture")

local files = require("spec.support.files")
local read = files.read

describe("gpurun.plot", function()
  local folder_of = files.folder_per_spec(before_each, after_each)

  it("names the data and the script after the picture", function()
    assert.are.same({ picture = "out/sweep.png", format = "png", data = "out/sweep.dat",
                      script = "out/sweep.gp", folder = "out" }, plot.files("out/sweep.png"))
    assert.are.same({ picture = "a.b.SVG", format = "svg", data = "a.b.dat", script = "a.b.gp",
                      folder = "." }, plot.files("a.b.SVG"))
    for _, bad in ipairs{ "sweep.jpg", "sweep", ".png", "sweep.png.txt" } do
      local names, why = plot.files(bad)
      assert.is_nil(names, bad)
      assert.are.equal("expected a file name ending in .png or .svg, got '" .. bad .. "'", why)
    end
  end)

  it("writes one line per size, '-' where a figure is missing", function()
    assert.are.equal(table.concat({
      "# elements individual_us_per_iter graph_us_per_iter graph_speedup",
      "4096 13.6 4.06 3.34975",
      "1048576 13.2 11.9 1.10924",
      "16777216 185 182 1.01648",
      "67108864 701 - -",
      "",
    }, "\n"), plot.data_text(fixture()))
  end)

  it("writes a log-log script with the speedup on y2 and the crossover marked", function()
    local script = plot.script_text(fixture(), plot.files("out/sweep.png"))
    for _, line in ipairs{
      "set output 'sweep.png'",
      "set title 'add -> mul -> sub: individual launches vs graph replay on NVIDIA H200 "
        .. "(driver 580.159, CUDA 13.0)' noenhanced",
      "set logscale x 2",
      "set logscale y 10",
      "set datafile missing '-'",
      "set xtics ('2^{12}' 4096, '2^{20}' 1048576, '2^{24}' 16777216, '2^{26}' 67108864)",
      "set xlabel 'elements per vector'",
      "set ylabel 'microseconds per iteration'",
      "set y2tics",
      "set y2label 'speedup over individual launches' noenhanced",
      "set arrow 1 from 16777216, graph 0 to 16777216, graph 1 nohead dashtype 2 lc rgb '#707070'",
    } do
      assert.is_truthy(script:find("\n" .. line .. "\n", 1, true), line .. " in:\n" .. script)
    end
    assert.matches("\nset label 1 'crossover: graph replay under 1.05x at 2^{24}' at 16777216",
                   script)
    assert.matches("pngcairo", script)
    assert.matches("'sweep.dat' using 1:2 axes x1y1 with linespoints [^\n]*title "
                   .. "'individual launches'", script)
    assert.matches("'' using 1:3 axes x1y1 [^\n]*title 'graph replay'", script)
    assert.matches("'' using 1:4 axes x1y2 [^\n]*title 'speedup: graph replay %(right axis%)'",
                   script)
    assert.matches("1.05 axes x1y2 with lines", script)
  end)

  it("writes an SVG terminal for .svg and quotes titles for gnuplot", function()
    local results = fixture()
    results.title = "it's a GPU_name^2"
    results.crossover = nil
    local script = plot.script_text(results, plot.files("sweep.svg"))
    assert.matches("^set terminal svg size %d+,%d+ ", script)
    assert.is_nil(script:find("pngcairo", 1, true))
    assert.is_truthy(script:find("\nset title 'it''s a GPU_name^2' noenhanced\n", 1, true))
    assert.is_nil(script:find("set arrow", 1, true), "no crossover, no mark")
  end)

  it("leaves out the right axis when there is only the baseline", function()
    local results = fixture()
    results.paths = { results.paths[1] }
    results.crossover = nil
    local script = plot.script_text(results, plot.files("sweep.png"))
    assert.is_nil(script:find("y2", 1, true), script)
  end)

  it("keeps the data and the script and names the package when gnuplot is missing", function()
    local folder = folder_of()
    local ok, why, kind = plot.render(fixture(), folder .. "/sweep.png",
                                      { gnuplot = folder .. "/no-gnuplot-here" })
    assert.is_nil(ok)
    assert.are.equal("missing", kind)
    assert.are.equal(("gnuplot not found: wrote %s/sweep.dat and %s/sweep.gp; install "
                      .. "gnuplot-nox (sudo apt-get install gnuplot-nox) to draw %s/sweep.png")
                     :format(folder, folder, folder), why)
    assert.are.equal(plot.data_text(fixture()), read(folder .. "/sweep.dat"))
    assert.is_truthy(read(folder .. "/sweep.gp"))
  end)

  it("says in one line that gnuplot failed, keeping the data", function()
    local folder = folder_of()
    local fake = folder .. "/gnuplot"
    local file = assert(io.open(fake, "w"))
    file:write("#!/bin/sh\necho '         line 3: unknown terminal type' >&2\nexit 1\n")
    file:close()
    assert(os.execute("chmod +x " .. require("gpurun.shell").quote(fake)))
    local ok, why, kind = plot.render(fixture(), folder .. "/sweep.svg", { gnuplot = fake })
    assert.is_nil(ok)
    assert.are.equal("failed", kind)
    assert.are.equal(("gnuplot failed (exit 1): line 3: unknown terminal type; the data and "
                      .. "script are in %s/sweep.dat and %s/sweep.gp"):format(folder, folder), why)
    assert.is_truthy(read(folder .. "/sweep.dat"))
  end)

  it("refuses a picture name that is neither .png nor .svg, and nothing measured", function()
    assert.are.same({ nil, "expected a file name ending in .png or .svg, got 'x.gif'", "write" },
                    { plot.render(fixture(), "x.gif") })
    local empty = fixture()
    empty.rows = {}
    assert.are.same({ nil, "nothing measured to draw", "write" },
                    { plot.render(empty, "x.png") })
  end)

  local gnuplot = plot.find_gnuplot()
  local with_gnuplot = gnuplot and it or pending
  local reason = gnuplot and "" or " (gnuplot is not installed: apt-get install gnuplot-nox)"

  with_gnuplot("draws the fixture into a PNG" .. reason, function()
    local folder = folder_of()
    assert.is_true((plot.render(fixture(), folder .. "/sweep.png")))
    local picture = read(folder .. "/sweep.png")
    assert.are.equal("\137PNG\r\n\26\n", picture:sub(1, 8))
    assert.is_true(#picture > 10000, "a picture, not an empty canvas")
  end)

  with_gnuplot("draws the fixture into an SVG" .. reason, function()
    local folder = folder_of()
    assert.is_true((plot.render(fixture(), folder .. "/sweep.svg")))
    local picture = read(folder .. "/sweep.svg")
    assert.matches("^<%?xml[^>]*>%s*<svg[%s>]", picture)
    assert.matches("</svg>%s*$", picture)
    assert.is_truthy(picture:find("graph replay", 1, true), "the legend is in the picture")
  end)
end)
