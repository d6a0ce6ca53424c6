-- The stage kind "sort": gpurun.sort of declared data, declared by p:sort.
-- The keys are sorted in place (read and written) or into options.out
-- (keys read, out written); values move with them the same way. Dtypes
-- and sizes are checked as declared, by sort's own checks.
local common = require("gpurun.common")
local sort = require("gpurun.compute.sort")
local declare = require("gpurun.pipeline.declare")
local launch_arguments = require("gpurun.pipeline.launch_arguments")

local raise = common.raise
local type_name = common.type_name

local kind = { name = "sort", method = "sort" }

local OPTIONS = { "name", "reads", "writes", "values", "out", "values_out", "segments", "descending" }
local OPTIONS_SHAPE = "{ values =, out =, values_out =, segments =, descending =, name =, reads =, "
  .. "writes = }"
local DATA_OPTIONS = { "values", "out", "values_out", "segments" }
-- Which two of a sort's data may be the same: the in-place pairs.
local SAME_ALLOWED = { ["keys/out"] = true, ["values/values_out"] = true }

local function measured(data)
  return data.dtype, data.count
end

-- sort(keys [, options]): options as gpurun.sort's (values, out,
-- values_out, segments: declared data; descending), and name, reads, writes.
function kind.declare(p, keys, options)
  options = declare.check_options_table(("pipeline '%s': sort"):format(p.name), options, OPTIONS,
                                        OPTIONS_SHAPE)
  local data = { keys = declare.resolve_data(p, keys, "sort keys") }
  for _, key in ipairs(DATA_OPTIONS) do
    if options[key] ~= nil then
      data[key] = declare.resolve_data(p, options[key], "sort options." .. key)
    end
  end
  local name = options.name or ("sort %s"):format(data.keys.name)
  if type(name) ~= "string" or name == "" then
    raise(("pipeline '%s': sort: name must be a non-empty string"):format(p.name))
  end
  local function refuse(why)
    raise(("pipeline '%s': stage '%s': %s"):format(p.name, name, why))
  end
  local descending = options.descending
  if descending ~= nil and type(descending) ~= "boolean" then
    refuse(("options.descending must be a boolean, got %s"):format(type_name(descending)))
  end
  local labels = { "keys", table.unpack(DATA_OPTIONS) }
  for _, label in ipairs(labels) do
    local d = data[label]
    local why = d and declare.not_device_buffer(d, label == "keys" and "keys" or "options." .. label,
                                                "gpurun.sort")
    if why then refuse(why) end
  end
  for i = 1, #labels do
    for j = i + 1, #labels do
      local x, y = labels[i], labels[j]
      if data[x] and data[x] == data[y] and not SAME_ALLOWED[x .. "/" .. y] then
        refuse(("%s and %s are the same data ('%s')"):format(x, y, data[x].name))
      end
    end
  end
  local _, why = sort.shape_problem(data.keys, data.values, data.out, data.values_out, data.segments,
                                    measured)
  if why then refuse(why) end

  local into = data.out and data.out ~= data.keys
  local values_into = data.values_out and data.values_out ~= data.values
  local stage = { name = name, data = data, descending = descending == true }
  local inferred = {}
  local function add(d, mode, how)
    if d then inferred[#inferred + 1] = { data = d, mode = mode, how = how, const = mode == "r" } end
  end
  add(data.keys, into and "r" or "rw", into and "sort keys" or "sort keys, in place")
  add(into and data.out, "w", "sorted keys")
  add(data.values, values_into and "r" or "rw", values_into and "sort values" or "sort values, in place")
  add(values_into and data.values_out, "w", "sorted values")
  add(data.segments, "r", "sort segments")
  stage.accesses, stage.declared = declare.accesses_of(p, name, inferred,
    declare.read_overrides(p, options, ("stage '%s'"):format(name)))
  return stage
end

-- The options table gpurun.sort takes is made once; each refresh points it
-- at the buffers behind the data. Its kernels are compiled before a
-- capture (prepare), which may not load code.
function kind.compile(stage, runnable, state)
  local data, keys = stage.data, nil
  local call = { descending = stage.descending }
  local buffer_of = launch_arguments.buffer_of
  runnable.refresh = function()
    keys = buffer_of(state, data.keys)
    for _, key in ipairs(DATA_OPTIONS) do
      call[key] = data[key] and buffer_of(state, data[key]) or nil
    end
  end
  runnable.launch = function(target)
    sort.sort(target, keys, call)
  end
  runnable.object = {
    prepare = function()
      sort.prepare(keys.device, keys.dtype, stage.descending, call.values and call.values.dtype,
                   call.segments and call.segments.dtype)
    end,
  }
end

return kind
