-- A sweep's picture, drawn by gnuplot (Debian's gnuplot-nox): microseconds
-- per iteration against elements for each path (log-log), the speedup of
-- every other path over the baseline on the right-hand axis, the crossover
-- marked, the title naming the device and the driver.
--
--   local plot = require("gpurun.plot")
--   local ok, why = plot.render(results, "sweep.png")   -- or "sweep.svg"

local shell = require("gpurun.script.shell")
local quoted = require("gpurun.common").quoted
local check_options = require("gpurun.options").check

local plot = {}

plot.INSTALL_HINT = "install gnuplot-nox (sudo apt-get install gnuplot-nox)"

local WIDTH, HEIGHT = 1280, 800
local MISSING = "-"
local POINT_TYPES = { 7, 5, 9, 11, 13 } -- filled circle, square, triangles, diamond

-- path -> { picture, format, data, script, folder } with the data and script
-- named after the picture; or nil and why when the name ends neither in
-- .png nor in .svg.
function plot.files(path)
  local stem, extension
  if type(path) == "string" then stem, extension = path:match("^(.+)%.(%w+)$") end
  local format = extension and extension:lower()
  if format ~= "png" and format ~= "svg" then
    return nil, "expected a file name ending in .png or .svg, got " .. quoted(path)
  end
  return {
    picture = path,
    format = format,
    data = stem .. ".dat",
    script = stem .. ".gp",
    folder = shell.dirname(path),
  }
end

local function basename(path)
  return path:match("([^/]*)$")
end

-- Text in single quotes for gnuplot, where only a doubled quote is special.
local function quote(text)
  return "'" .. tostring(text):gsub("'", "''") .. "'"
end

-- The paths compared with the baseline, in order.
function plot.compared_paths(results)
  local compared = {}
  for _, path in ipairs(results.paths) do
    if path.name ~= results.baseline then
      compared[#compared + 1] = path
    end
  end
  return compared
end
local compared_paths = plot.compared_paths

-- A sweep's figures as a table of text: the header (elements, each path's
-- "<name>_us_per_iter", each compared path's "<name>_speedup"), then one
-- row per size, `missing` where a figure is missing. The data file here
-- and sweep.csv_text both write it.
function plot.figure_table(results, missing)
  local compared = compared_paths(results)
  local header = { "elements" }
  for _, path in ipairs(results.paths) do
    header[#header + 1] = path.name .. "_us_per_iter"
  end
  for _, path in ipairs(compared) do
    header[#header + 1] = path.name .. "_speedup"
  end
  local function figure(value)
    return value and string.format("%.6g", value) or missing
  end
  local rows = {}
  for i, row in ipairs(results.rows) do
    local fields = { string.format("%d", row.elements) }
    for _, path in ipairs(results.paths) do
      fields[#fields + 1] = figure(row.us_per_iter[path.name])
    end
    for _, path in ipairs(compared) do
      fields[#fields + 1] = figure(row.speedup[path.name])
    end
    rows[i] = fields
  end
  return header, rows
end

-- The data file: the figure table, space-separated, "-" where a figure is
-- missing, the header as a comment.
function plot.data_text(results)
  local header, rows = plot.figure_table(results, MISSING)
  local lines = { "# " .. table.concat(header, " ") }
  for _, fields in ipairs(rows) do
    lines[#lines + 1] = table.concat(fields, " ")
  end
  return table.concat(lines, "\n") .. "\n"
end

local function elements_range(results)
  local low, high = math.huge, 0
  for _, row in ipairs(results.rows) do
    low, high = math.min(low, row.elements), math.max(high, row.elements)
  end
  return low, high
end

local function terminal_lines(format)
  if format == "svg" then
    return {
      ("set terminal svg size %d,%d dynamic enhanced font 'Sans,12' background rgb 'white'")
        :format(WIDTH, HEIGHT),
    }
  end
  -- gnuplot-nox has both; cairo draws smoother lines, libgd's png is the fallback.
  return {
    "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {",
    ("  set terminal pngcairo size %d,%d enhanced font 'Sans,12' background rgb 'white'")
      :format(WIDTH, HEIGHT),
    "} else {",
    ("  set terminal png size %d,%d enhanced font 'Sans,12' background rgb 'white'")
      :format(WIDTH, HEIGHT),
    "}",
  }
end

-- The label of the path called `name` (its name when it has none).
function plot.label_of(results, name)
  for _, path in ipairs(results.paths) do
    if path.name == name then
      return path.label or path.name
    end
  end
  return name
end
local label_of = plot.label_of

-- "2^{20}" for a power of two (gnuplot's enhanced text), else the number.
local function elements_text(elements)
  local power = math.log(elements, 2)
  if math.abs(power - math.floor(power + 0.5)) < 1e-9 then
    return string.format("2^{%d}", math.floor(power + 0.5))
  end
  return string.format("%d", elements)
end

-- Tics at the sizes measured, labelled every second one when crowded.
local function x_tics(results)
  local every = #results.rows > 12 and 2 or 1
  local tics = {}
  for index, row in ipairs(results.rows) do
    if (index - 1) % every == 0 then
      tics[#tics + 1] = string.format("%s %d", quote(elements_text(row.elements)), row.elements)
    else
      tics[#tics + 1] = string.format("'' %d 1", row.elements)
    end
  end
  return table.concat(tics, ", ")
end

-- The gnuplot script that draws `results` from files.data into
-- files.picture, both named relative to files.folder (gnuplot runs there).
function plot.script_text(results, files)
  local compared = compared_paths(results)
  local low, high = elements_range(results)
  local lines = terminal_lines(files.format)
  local function add(line, ...)
    lines[#lines + 1] = line:format(...)
  end
  add("set output %s", quote(basename(files.picture)))
  add("set title %s noenhanced", quote(results.title))
  add("set datafile missing %s", quote(MISSING))
  add("set logscale x 2")
  add("set logscale y 10")
  add("set xrange [%.17g:%.17g]", low / 1.5, high * 1.5)
  add("set xtics (%s)", x_tics(results))
  add("set format y '%%g'")
  add("set xlabel %s", quote(results.x_label or "elements"))
  add("set ylabel 'microseconds per iteration'")
  add("set grid xtics ytics")
  add("set key below")
  if #compared > 0 then
    add("set ytics nomirror")
    add("set y2tics")
    add("set y2range [0:*]")
    add("set y2label %s noenhanced", quote("speedup over " .. label_of(results, results.baseline)))
  end
  local crossover = results.crossover
  if crossover then
    add("set arrow 1 from %.17g, graph 0 to %.17g, graph 1 nohead dashtype 2 lc rgb '#707070'",
        crossover.elements, crossover.elements)
    local position = math.log(crossover.elements / low) / math.max(math.log(high / low), 1e-9)
    add("set label 1 %s at %.17g, graph 0.95 %s front", quote(string.format(
          "crossover: %s under %.2fx at %s", label_of(results, results.crossover_path),
          results.threshold, elements_text(crossover.elements))),
        crossover.elements, position > 0.6 and "right offset -1,0" or "left offset 1,0")
  end
  local data = quote(basename(files.data))
  local plots = {}
  for column, path in ipairs(results.paths) do
    plots[#plots + 1] = string.format(
      "%s using 1:%d axes x1y1 with linespoints lw 2 pt %d title %s noenhanced",
      #plots == 0 and data or "''", column + 1, POINT_TYPES[(column - 1) % #POINT_TYPES + 1],
      quote(path.label or path.name))
  end
  for index, path in ipairs(compared) do
    plots[#plots + 1] = string.format(
      "'' using 1:%d axes x1y2 with linespoints lw 1.5 dashtype 2 pt 6 title %s noenhanced",
      #results.paths + index + 1,
      quote("speedup: " .. (path.label or path.name) .. " (right axis)"))
  end
  if #compared > 0 and results.threshold then
    plots[#plots + 1] = string.format(
      "%.17g axes x1y2 with lines dashtype 3 lc rgb '#909090' title %s", results.threshold,
      quote(string.format("%.2fx (right axis)", results.threshold)))
  end
  add("plot " .. table.concat(plots, ", \\\n     "))
  return table.concat(lines, "\n") .. "\n"
end

-- command -> the gnuplot to run: `command` (default $GPURUN_GNUPLOT, else
-- "gnuplot") when the shell finds it, else nil.
function plot.find_gnuplot(command)
  command = command or os.getenv("GPURUN_GNUPLOT") or "gnuplot"
  if command == "" then
    return nil
  end
  local pipe = io.popen("command -v " .. shell.quote(command) .. " 2>/dev/null")
  local found = pipe and pipe:read("l")
  if pipe then
    pipe:close()
  end
  if found == nil or found == "" then
    return nil
  end
  return found
end

local function first_line(text)
  for line in tostring(text):gmatch("[^\n]+") do
    if line:match("%S") then
      return (line:gsub("^%s+", ""))
    end
  end
  return "no message"
end

local function list(files)
  return files.data .. " and " .. files.script
end

-- Writes the data and the script, runs gnuplot in the picture's folder.
-- -> true, or nil, one line saying why, and "missing" (no gnuplot), "failed"
-- (gnuplot ran and failed) or "write" (a file could not be written).
-- options: gnuplot (the command; default as plot.find_gnuplot).
--
-- `results` is a gpurun.sweep result (see sweep.lua): title, paths
-- ({ name, label } in order), baseline, crossover_path, threshold,
-- crossover ({ elements, speedup } or nil), rows ({ elements, us_per_iter =
-- { [path] = us }, speedup = { [path] = x } }).
--
-- Beside the picture go the data (sweep.dat) and the gnuplot script
-- (sweep.gp) that draws it, so `cd <folder> && gnuplot sweep.gp` draws it
-- again, or a copy of the script draws it differently. The data and script
-- are written before gnuplot runs: a missing or failing gnuplot leaves them.
function plot.render(results, path, options)
  options = check_options("plot.render", options, { "gnuplot" }) or {}
  local files, why = plot.files(path)
  if not files then
    return nil, why, "write"
  end
  if #results.rows == 0 then
    return nil, "nothing measured to draw", "write"
  end
  for _, item in ipairs{ { files.data, plot.data_text(results) },
                         { files.script, plot.script_text(results, files) } } do
    local written, write_error = shell.write_file(item[1], item[2])
    if not written then
      return nil, string.format("cannot write %s: %s", item[1], write_error), "write"
    end
  end
  local gnuplot = plot.find_gnuplot(options.gnuplot)
  if not gnuplot then
    return nil, string.format("gnuplot not found: wrote %s; %s to draw %s", list(files),
                              plot.INSTALL_HINT, files.picture), "missing"
  end
  os.remove(files.picture) -- so a picture left by an earlier run cannot pass for this one
  local command = string.format("cd %s && %s %s 2>&1", shell.quote(files.folder),
                                shell.quote(gnuplot), shell.quote(basename(files.script)))
  local pipe = assert(io.popen(command, "r"))
  local output = pipe:read("a")
  local ok, how, code = pipe:close()
  if not ok then
    return nil, string.format("gnuplot failed (%s %s): %s; the data and script are in %s",
                              how, tostring(code), first_line(output), list(files)), "failed"
  end
  local picture = io.open(files.picture, "rb")
  local size = picture and picture:seek("end") or 0
  if picture then
    picture:close()
  end
  if size == 0 then
    return nil, string.format("gnuplot wrote no %s: %s", files.picture, first_line(output)),
           "failed"
  end
  return true
end

return plot
