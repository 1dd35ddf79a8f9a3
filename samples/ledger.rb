require "json"
require_relative "entry"

# Bookkeeping for one account.
module Books
  class Ledger
    attr_reader :entries

    def initialize(owner)
      @owner = owner
      @entries = []
    end

    # Adds an entry and returns the new balance.
    def add(amount, note = nil)
      @entries << { amount: amount, note: note }
      balance
    end

    def balance
      total = 0
      @entries.each { |e| total += e[:amount] }
      total
    end

    def self.load(path)
      new(JSON.parse(File.read(path))["owner"])
    end
  end
end

def summary(ledger)
  "#{ledger.entries.size} entries"
end
