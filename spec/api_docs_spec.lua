-- docs/api.md documents the whole API, and nothing that is not there: every
-- key of the gpurun module, every method and field of every type gpurun
-- registers, and every public function of the Lua library (lua/gpurun/*.lua)
-- and of the objects it makes must appear in it by its qualified name
-- (gpurun.empty, Buffer:fill, Buffer.dtype, bench.run, checks:tables), and
-- every such name it mentions must exist.
local gpurun = require("gpurun")

local DOC_PATH = "docs/api.md"

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
-- parts (builtin/, and compute/ behind gpurun.elementwise and the other
-- module functions, documented as those), by name without "gpurun."
-- (sweep, samples.kernels).
local function library_modules()
  local modules = {}
  local pipe = assert(io.popen("find lua/gpurun -name '*.lua' -not -path '*/builtin/*' -not -path '*/compute/*' | sort"))
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

describe("docs/api.md", function()
  local doc, types, modules, objects
  lazy_setup(function()
    doc = read(DOC_PATH)
    types = registered_types()
    modules = library_modules()
    objects = library_objects()
  end)

  local function mentions(name)
    return doc:find(name, 1, true) ~= nil
  end

  it("documents every name the module, its types and the Lua library hold", function()
    local missing = {}
    local function expect(name)
      if not mentions(name) then missing[#missing + 1] = name end
    end
    for _, key in ipairs(sorted_keys(gpurun)) do expect("gpurun." .. key) end
    for _, type_name in ipairs(sorted_keys(types)) do
      local metatable = types[type_name]
      for _, method in ipairs(sorted_keys(metatable.methods)) do expect(type_name .. ":" .. method) end
      for _, field in ipairs(sorted_keys(metatable.fields or {})) do expect(type_name .. "." .. field) end
    end
    for _, module_name in ipairs(sorted_keys(modules)) do
      expect("gpurun." .. module_name)
      local module = modules[module_name]
      if type(module) == "table" then
        -- As scripts name them: kernels.path for gpurun.samples.kernels.
        local short = module_name:match("[%w_]+$")
        for _, key in ipairs(sorted_keys(module)) do expect(short .. "." .. key) end
      end
    end
    for _, object in ipairs(sorted_keys(objects)) do
      for _, method in ipairs(sorted_keys(objects[object])) do expect(object .. ":" .. method) end
    end
    assert(#missing == 0, ("%d public name(s) are not in %s:\n  %s"):format(#missing, DOC_PATH,
      table.concat(missing, "\n  ")))
  end)

  it("names nothing that does not exist", function()
    local unknown = {}
    local function bad(name, why) unknown[#unknown + 1] = name .. " (" .. why .. ")" end
    for name in doc:gmatch("gpurun%.([%a_][%w_%.]*[%w_])") do
      local key = name:match("^[%a_][%w_]*")
      local known = gpurun[key] ~= nil or types[key]
      -- Or a module of the library, the module's own parts included.
      local function loads(module_name)
        return modules[module_name] or pcall(require, "gpurun." .. module_name)
      end
      for prefix_end in name:gmatch("()%.") do
        known = known or loads(name:sub(1, prefix_end - 1))
      end
      if not known and not loads(name) then
        bad("gpurun." .. key, "no such module key, type or library module")
      end
    end
    for type_name, method in doc:gmatch("(%u[%w_]*):([%a_][%w_]*)") do
      if types[type_name] and not types[type_name].methods[method] then
        bad(type_name .. ":" .. method, "no such method")
      end
    end
    for type_name, field in doc:gmatch("(%u[%w_]*)%.([%a_][%w_]*)") do
      local metatable = types[type_name]
      if metatable and metatable.fields and not metatable.fields[field] then
        bad(type_name .. "." .. field, "no such field")
      end
    end
    for object, method in doc:gmatch("(%l+):([%a_][%w_]*)") do
      if objects[object] and not objects[object][method] then bad(object .. ":" .. method, "no such method") end
    end
    for module_name, key in doc:gmatch("(%l+)%.([%a_][%w_]*)%(") do
      if type(modules[module_name]) == "table" and modules[module_name][key] == nil then
        bad(module_name .. "." .. key, "no such function in gpurun." .. module_name)
      end
    end
    assert(#unknown == 0, ("%s names what does not exist:\n  %s"):format(DOC_PATH, table.concat(unknown, "\n  ")))
  end)

  it("is linked from the README", function()
    assert.truthy(read("README.md"):find("(docs/api.md)", 1, true))
  end)
end)
