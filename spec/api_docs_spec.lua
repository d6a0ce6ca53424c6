-- The reference documents the whole API, and nothing that is not there, in
-- two halves, each checked both ways: docs/api.md the module (every key of
-- the gpurun module, every method and field of every type gpurun
-- registers: gpurun.empty, Buffer:fill, Buffer.dtype) and docs/library.md
-- the Lua library (every public function of lua/gpurun/**.lua but the
-- module's own parts, and of the objects it makes: bench.run,
-- checks:tables). Every such name must appear in its half by its qualified
-- name, and every such name a half mentions must exist.
local gpurun = require("gpurun")

local MODULE_DOC, LIBRARY_DOC = "docs/api.md", "docs/library.md"

local function read(path)
  local file = assert(io.open(path, "rb"))
  local text = file:read("a")
  file:close()
  return text
end

local sorted_keys = require("spec.support.api_catalog").sorted_keys

-- The types gpurun registers: { [short name] = metatable }.
local function registered_types()
  local types = {}
  for key, value in pairs(debug.getregistry()) do
    local name = type(key) == "string" and key:match("^gpurun%.(%u[%w_]*)$")
    if name and type(value) == "table" and type(value.methods) == "table" then types[name] = value end
  end
  return types
end

-- The Lua library's modules: every lua/gpurun/**.lua but the module's own
-- parts (builtin/; compute/, pipeline/ and graph/ behind gpurun.elementwise,
-- gpurun.pipeline, Graph:check, Graph:profile, Graph:update and the other
-- module functions and methods, documented as those; and
-- common.lua, what those parts share) and the subsystems' files behind the
-- public names (script/, io/: gpurun.args is script/args.lua), by name
-- without "gpurun." (sweep, samples.kernels).
local function library_modules()
  local modules = {}
  local pipe = assert(io.popen("find lua/gpurun -name '*.lua' -not -path '*/builtin/*' "
    .. "-not -path '*/compute/*' -not -path '*/pipeline/*' -not -path '*/graph/*' -not -path '*/script/*' "
    .. "-not -path '*/io/*' -not -name common.lua | sort"))
  for path in pipe:lines() do
    local name = path:match("lua/gpurun/([%w_/]+)%.lua$")
    name = name and name:gsub("/", ".")
    if name then
      local ok, module = pcall(require, "gpurun." .. name)
      assert(ok, ("the library module gpurun.%s does not load: %s"):format(name, tostring(module)))
      modules[name] = module
    end
  end
  pipe:close()
  return modules
end

-- The objects the library's constructors make, by the name the docs call
-- them, with their methods.
local function library_objects()
  local objects = {
    checks = require("gpurun.check").new("api_docs_spec"),
    cli = require("gpurun.args").new("api_docs_spec", ""),
    out = require("gpurun.report").new({ write = function() end }),
  }
  local methods = {}
  for name, object in pairs(objects) do
    local index = getmetatable(object).__index
    methods[name] = {}
    for _, key in ipairs(sorted_keys(index)) do
      if type(index[key]) == "function" and not key:match("^__") then methods[name][key] = true end
    end
  end
  return methods
end

describe("the reference", function()
  local module_doc, library_doc, types, modules, objects
  lazy_setup(function()
    module_doc = read(MODULE_DOC)
    library_doc = read(LIBRARY_DOC)
    types = registered_types()
    modules = library_modules()
    objects = library_objects()
  end)

  local function missing_from(doc, names)
    local missing = {}
    for _, name in ipairs(names) do
      if not doc:find(name, 1, true) then missing[#missing + 1] = name end
    end
    return missing
  end

  local function assert_none_missing(path, missing)
    assert(#missing == 0, ("%d public name(s) are not in %s:\n  %s"):format(#missing, path,
      table.concat(missing, "\n  ")))
  end

  local function assert_none_unknown(path, unknown)
    assert(#unknown == 0, ("%s names what does not exist:\n  %s"):format(path, table.concat(unknown, "\n  ")))
  end

  -- Or a module of the library, the module's own parts included.
  local function loads(module_name)
    return modules[module_name] or pcall(require, "gpurun." .. module_name)
  end

  -- Every gpurun.<name> a text mentions that is neither a key of the
  -- module, nor a type, nor a module that loads.
  local function unknown_gpurun_names(doc, bad)
    for name in doc:gmatch("gpurun%.([%a_][%w_%.]*[%w_])") do
      local key = name:match("^[%a_][%w_]*")
      local known = gpurun[key] ~= nil or types[key]
      for prefix_end in name:gmatch("()%.") do
        known = known or loads(name:sub(1, prefix_end - 1))
      end
      if not known and not loads(name) then
        bad("gpurun." .. key, "no such module key, type or library module")
      end
    end
  end

  local function unknown_list()
    local unknown = {}
    return unknown, function(name, why) unknown[#unknown + 1] = name .. " (" .. why .. ")" end
  end

  describe(MODULE_DOC, function()
    it("documents every name the module and its types hold", function()
      local names = {}
      for _, key in ipairs(sorted_keys(gpurun)) do names[#names + 1] = "gpurun." .. key end
      -- A type's own functions (gpurun.ObjectCode.from_cubin).
      for _, type_name in ipairs(sorted_keys(types)) do
        if type(gpurun[type_name]) == "table" then
          for _, name in ipairs(sorted_keys(gpurun[type_name])) do
            names[#names + 1] = "gpurun." .. type_name .. "." .. name
          end
        end
      end
      for _, type_name in ipairs(sorted_keys(types)) do
        local metatable = types[type_name]
        for _, method in ipairs(sorted_keys(metatable.methods)) do names[#names + 1] = type_name .. ":" .. method end
        for _, field in ipairs(sorted_keys(metatable.fields or {})) do names[#names + 1] = type_name .. "." .. field end
      end
      -- gpurun.nvtx is written in C, with the module.
      names[#names + 1] = "gpurun.nvtx"
      for _, key in ipairs(sorted_keys(require("gpurun.nvtx"))) do names[#names + 1] = "nvtx." .. key end
      for _, key in ipairs(sorted_keys(gpurun.system)) do names[#names + 1] = "system." .. key end
      assert_none_missing(MODULE_DOC, missing_from(module_doc, names))
    end)

    it("names nothing that does not exist", function()
      local unknown, bad = unknown_list()
      unknown_gpurun_names(module_doc, bad)
      for type_name, method in module_doc:gmatch("(%u[%w_]*):([%a_][%w_]*)") do
        if types[type_name] and not types[type_name].methods[method] then
          bad(type_name .. ":" .. method, "no such method")
        end
      end
      for type_name, field in module_doc:gmatch("(%u[%w_]*)%.([%a_][%w_]*)") do
        local metatable = types[type_name]
        local type_functions = type(gpurun[type_name]) == "table" and gpurun[type_name] or {}
        if metatable and metatable.fields and not metatable.fields[field] and type_functions[field] == nil then
          bad(type_name .. "." .. field, "no such field")
        end
      end
      assert_none_unknown(MODULE_DOC, unknown)
    end)
  end)

  describe(LIBRARY_DOC, function()
    it("documents every name the Lua library and the objects it makes hold", function()
      local names = {}
      for _, module_name in ipairs(sorted_keys(modules)) do
        names[#names + 1] = "gpurun." .. module_name
        local module = modules[module_name]
        if type(module) == "table" then
          -- As scripts name them: kernels.path for gpurun.samples.kernels.
          local short = module_name:match("[%w_]+$")
          for _, key in ipairs(sorted_keys(module)) do names[#names + 1] = short .. "." .. key end
        end
      end
      for _, object in ipairs(sorted_keys(objects)) do
        for _, method in ipairs(sorted_keys(objects[object])) do names[#names + 1] = object .. ":" .. method end
      end
      assert_none_missing(LIBRARY_DOC, missing_from(library_doc, names))
    end)

    it("names nothing that does not exist", function()
      local unknown, bad = unknown_list()
      unknown_gpurun_names(library_doc, bad)
      for object, method in library_doc:gmatch("(%l+):([%a_][%w_]*)") do
        if objects[object] and not objects[object][method] then bad(object .. ":" .. method, "no such method") end
      end
      for module_name, key in library_doc:gmatch("([%l_]+)%.([%a_][%w_]*)%(") do
        local module
        for name, value in pairs(modules) do
          if name == module_name or name:match("[%w_]+$") == module_name then module = value end
        end
        if type(module) == "table" and module[key] == nil then
          bad(module_name .. "." .. key, "no such function in gpurun." .. module_name)
        end
      end
      assert_none_unknown(LIBRARY_DOC, unknown)
    end)
  end)

  it("is linked from the README, both halves", function()
    local readme = read("README.md")
    assert.truthy(readme:find("(docs/api.md)", 1, true))
    assert.truthy(readme:find("(docs/library.md)", 1, true))
  end)
end)
