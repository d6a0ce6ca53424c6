-- busted helper (see .busted): drops #gpu specs when no GPU is usable, and
-- #multigpu specs when fewer than two devices are visible. The filters are
-- subscribed when the suite starts, after busted's own filters, so they see
-- every spec and can count the ones they drop.
local busted = require("busted")
local gpu_tag = require("spec.support.gpu_tag")

-- Drops the `it` blocks for which drops(name) holds, counting them in
-- gpu_tag[counter].
local function exclude(drops, counter)
  busted.subscribe({ "register", "it" }, function(name)
    if drops(name) then
      gpu_tag[counter] = gpu_tag[counter] + 1
      return nil, false
    end
    return nil, true
  end, { priority = 1 })
end

busted.subscribe({ "suite", "start" }, function()
  if not gpu_tag.available then
    busted.subscribe({ "register", "describe" }, function(name)
      if gpu_tag.has_tag(name) then
        error("tag #gpu belongs on `it` blocks, not on `describe` ('" .. name .. "'): "
          .. "put GPU set-up in lazy_setup or before_each", 0)
      end
      return nil, true
    end, { priority = 1 })
    -- A #multigpu spec is counted with the #multigpu ones, below.
    exclude(function(name) return gpu_tag.has_tag(name) and not gpu_tag.has_multi_tag(name) end,
      "excluded")
  end
  if not gpu_tag.multi_available then
    exclude(gpu_tag.has_multi_tag, "multi_excluded")
  end
  return nil, true
end)
