-- busted helper (see .busted): drops #gpu specs when no GPU is usable. The
-- filter is subscribed when the suite starts, after busted's own filters, so
-- it sees every spec and can count the ones it drops.
local busted = require("busted")
local gpu_tag = require("spec.support.gpu_tag")

if not gpu_tag.available then
  busted.subscribe({ "suite", "start" }, function()
    busted.subscribe({ "register", "describe" }, function(name)
      if gpu_tag.has_tag(name) then
        error("tag #gpu belongs on `it` blocks, not on `describe` ('" .. name .. "'): "
          .. "put GPU set-up in lazy_setup or before_each", 0)
      end
      return nil, true
    end, { priority = 1 })
    busted.subscribe({ "register", "it" }, function(name)
      if gpu_tag.has_tag(name) and not gpu_tag.has_multi_tag(name) then
        gpu_tag.excluded = gpu_tag.excluded + 1
        return nil, false
      end
      return nil, true
    end, { priority = 1 })
    return nil, true
  end)
end

if not gpu_tag.multi_available then
  busted.subscribe({ "suite", "start" }, function()
    busted.subscribe({ "register", "it" }, function(name)
      if gpu_tag.has_multi_tag(name) then
        gpu_tag.multi_excluded = gpu_tag.multi_excluded + 1
        return nil, false
      end
      return nil, true
    end, { priority = 1 })
    return nil, true
  end)
end
