local json = require("json")

-- Bookkeeping for one account.
local Ledger = {}
Ledger.__index = Ledger

function Ledger.new(owner)
  return setmetatable({ owner = owner, entries = {} }, Ledger)
end

-- Adds an entry and returns the new balance.
function Ledger:add(amount, note)
  table.insert(self.entries, { amount = amount, note = note })
  return self:balance()
end

function Ledger:balance()
  local total = 0
  for _, e in ipairs(self.entries) do
    total = total + e.amount
  end
  return total
end

local function summary(ledger)
  return #ledger.entries .. " entries"
end

M.helper = function(x)
  return x + 1
end

return Ledger
