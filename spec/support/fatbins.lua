-- Fatbins for specs: NVRTC's PTX and cubin of a source, put together by the
-- toolkit's fatbinary, which (unlike nvcc) needs no host C++ compiler and
-- no GPU. One fatbin per compression mode: "default" (zstd, as nvcc
-- writes by default), "none" and "speed" (a format gpurun does not read).
local gpurun = require("gpurun")
local process = require("spec.support.process")
local shell = require("gpurun.shell")

local fatbins = {}

fatbins.FATBINARY = (os.getenv("CUDA_HOME") or "/usr/local/cuda") .. "/bin/fatbinary"

-- nil when fatbins can be built here, else why not.
function fatbins.missing()
  if not shell.file_exists(fatbins.FATBINARY) then
    return "no fatbinary at " .. fatbins.FATBINARY .. ": no fatbin built"
  end
  return nil
end

-- { ptx = path, cubin = path, [mode] = path of the fatbin, ... } in dir, for
-- the source built for compute_<arch> (the PTX) and sm_<arch> (the cubin).
function fatbins.build(dir, source, arch, modes)
  local built = { ptx = dir .. "/k.ptx", cubin = dir .. "/k.cubin" }
  gpurun.Program(source, "c++", { arch = "compute_" .. arch }):compile("ptx"):save(built.ptx)
  gpurun.Program(source, "c++", { arch = "sm_" .. arch }):compile("cubin"):save(built.cubin)
  local q = process.quote
  for _, mode in ipairs(modes) do
    local path = ("%s/%s.fatbin"):format(dir, mode)
    local result = process.run(("%s --create=%s --compress-mode=%s --image3=kind=ptx,sm=%s,file=%s "
      .. "--image3=kind=elf,sm=%s,file=%s"):format(q(fatbins.FATBINARY), q(path), mode, arch,
      q(built.ptx), arch, q(built.cubin)))
    assert(result.code == 0, "fatbinary failed: " .. result.stderr)
    built[mode] = path
  end
  return built
end

return fatbins
